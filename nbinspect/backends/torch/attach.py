"""A model built on meta, with a checkpoint's tensors attached lazily at its paths.

The module tree, types, attributes and ties are the model's; the values are the file's,
read when an analyzer asks (statistics stream them and release their pages), never
copied into the model. The model stays on meta, so tracing and the memory plan run on fake
tensors. What did not meet is reported as by :func:`load_into`: missing, unexpected, shape
mismatches (left on meta) and dtype conversions (values converted when read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...core.source import ModelSource, TensorEntry
from ...dtypes import parse_dtype
from .model_loader import LoadReport, saved_ties
from .source import from_module

__all__ = ["attach"]


def _converted(entry: TensorEntry, dtype: torch.dtype) -> Callable[[], Any]:
    return lambda: entry.values().to(dtype)


def attach(model: nn.Module, checkpoint: ModelSource, *, name: str | None = None, built: str = "") -> ModelSource:
    """The source of `model` (parameters on meta) whose tensors read their values from
    `checkpoint`; ``metadata`` is the checkpoint's plus ``load_report`` and, if given,
    ``model`` (`built`: how the model was made)."""
    live = from_module(model, name or checkpoint.name)
    stored = {t.name: t for t in checkpoint.tensors}
    persistent = set(model.state_dict(keep_vars=True))
    loadable = {
        e.name: stored[e.name]
        for e in live.tensors
        if e.name in persistent and e.name in stored and e.shape == stored[e.name].shape
    }
    by_storage = saved_ties(live.tensors, loadable)
    tensors: list[TensorEntry] = []
    mismatched: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
    cast: list[tuple[str, str, str]] = []
    missing: list[str] = []
    for entry in live.tensors:
        # a non-persistent buffer is the model's own (load_state_dict skips it): the file's copy is unexpected
        found = stored.get(entry.name) if entry.name in persistent else None
        if found is not None and found.shape != entry.shape:
            mismatched.append((entry.name, found.shape or (), entry.shape or ()))
            tensors.append(entry)
            continue
        if found is not None and found.dtype != entry.dtype:
            cast.append((entry.name, found.dtype, entry.dtype))
        found = found or by_storage.get(entry.storage_key)
        if found is None:
            if entry.name in persistent:
                missing.append(entry.name)
            tensors.append(entry)
            continue
        value = found.tensor if found.dtype == entry.dtype else _converted(found, parse_dtype(entry.dtype))
        tensors.append(dataclasses.replace(entry, device=found.device, tensor=value, release_hook=found.release_hook))
    bad = {m[0] for m in mismatched}
    report = LoadReport(
        loaded=sum(1 for n in stored if n in persistent and n not in bad),
        missing=tuple(missing),
        unexpected=tuple(n for n in stored if n not in persistent),
        mismatched=tuple(mismatched),
        cast=tuple(cast),
    )
    metadata = {**checkpoint.metadata, **({"model": built} if built else {}), "load_report": report}
    return dataclasses.replace(live, tensors=tuple(tensors), metadata=metadata)
