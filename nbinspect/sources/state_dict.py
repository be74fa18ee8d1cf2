"""A state_dict, or a whole training checkpoint, as a source.

A training checkpoint keeps its weights under a key (``model_state_dict``, ``state_dict``,
``model``, ``ema``, ``module``) next to optimizer state, epoch counters and the like. The
weights become the tensors; everything else is summarised in ``ModelSource.metadata``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from torch import nn

from ..dtypes import dtype_name
from ..errors import CheckpointError
from .base import ModelSource
from .torch_module import from_module, storage_key
from .tree import StoredTensor, build_source

__all__ = ["CONFIG_KEYS", "WEIGHT_KEYS", "describe", "from_mapping", "split_checkpoint", "stored_tensors"]

WEIGHT_KEYS = ("model_state_dict", "state_dict", "model", "ema", "module")
# entries holding the model's constructor arguments (Lightning saves ``hyper_parameters``):
# kept as plain data in the metadata, so the model can be rebuilt from them
CONFIG_KEYS = ("config", "hparams", "hyper_parameters")


def _is_weights(value: Any) -> bool:
    if isinstance(value, nn.Module):
        return True
    return isinstance(value, Mapping) and any(isinstance(v, (torch.Tensor, Mapping)) for v in value.values())


def _tensors_and_bytes(value: Any) -> tuple[int, int]:
    """(tensors, bytes) anywhere inside nested dicts/lists."""
    if isinstance(value, torch.Tensor):
        return 1, value.numel() * value.element_size()
    items = value.values() if isinstance(value, Mapping) else value if isinstance(value, (list, tuple)) else ()
    counts = [_tensors_and_bytes(v) for v in items]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def _plain(value: Any) -> bool:
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    return isinstance(value, (bool, int, float, str)) or value is None


def _is_config(key: Any, value: Any) -> bool:
    return key in CONFIG_KEYS and isinstance(value, Mapping) and _plain(value)


def describe(value: Any, key: Any = None) -> Any:
    """A short, JSON-friendly description of a non-weight checkpoint entry (a config entry
    of plain data is kept as it is)."""
    if _is_config(key, value):
        return dict(value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, Mapping) and "param_groups" in value and "state" in value:
        n, nbytes = _tensors_and_bytes(value["state"])
        groups = value["param_groups"]
        hyper = {
            k: v for k, v in (groups[0] if groups else {}).items() if isinstance(v, (int, float, str)) and k != "params"
        }
        return f"optimizer state: {len(groups)} param group(s), {n} tensors, {nbytes:,} bytes; {hyper}"
    if isinstance(value, (Mapping, list, tuple)):
        n, nbytes = _tensors_and_bytes(value)
        kind = "dict" if isinstance(value, Mapping) else type(value).__name__
        return f"{kind} of {len(value)} entries ({n} tensors, {nbytes:,} bytes)"
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)} {dtype_name(value.dtype)}"
    return type(value).__name__


def split_checkpoint(obj: Mapping, key: str | None = None, origin: str = "state_dict") -> tuple[Any, dict[str, Any]]:
    """(weights, metadata) of a state_dict or a training checkpoint; `key` picks the entry
    holding the weights (default: the first of WEIGHT_KEYS present)."""
    if key is not None:
        if key not in obj:
            raise CheckpointError(f"{origin}: no entry {key!r}; top-level keys: {sorted(map(str, obj))}")
        chosen: str | None = key
    else:
        chosen = next((k for k in WEIGHT_KEYS if k in obj and _is_weights(obj[k])), None)
    if chosen is not None:
        meta = {"weights_key": chosen}
        meta.update({str(k): describe(v, k) for k, v in obj.items() if k != chosen})
        return obj[chosen], meta
    meta = {
        str(k): describe(v, k) for k, v in obj.items() if not isinstance(v, (torch.Tensor, Mapping)) or _is_config(k, v)
    }
    return {k: v for k, v in obj.items() if k not in meta}, meta


def _flatten(weights: Mapping, prefix: str, out: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    for k, v in weights.items():
        name = f"{prefix}{k}"
        if isinstance(v, torch.Tensor):
            out[name] = v
        elif isinstance(v, Mapping):
            _flatten(v, name + ".", out, meta)
        else:
            meta[name] = describe(v)


def stored_tensors(
    weights: Mapping,
    meta: dict[str, Any],
    origin: str,
    release: Callable[[torch.Tensor], None] | None = None,
) -> list[StoredTensor]:
    """The tensors of a (possibly nested) state_dict; non-tensor entries go to `meta`.
    `release(tensor)`, if given, drops a memory-mapped tensor's pages after use."""
    tensors: dict[str, torch.Tensor] = {}
    _flatten(weights, "", tensors, meta)
    if not tensors:
        raise CheckpointError(f"{origin}: no tensors found; top-level keys: {sorted(map(str, weights))[:20]}")
    return [
        StoredTensor(
            name=n,
            shape=tuple(t.shape),
            dtype=dtype_name(t.dtype),
            nbytes=t.numel() * t.element_size(),
            storage_key=storage_key(t),
            tensor=t.detach(),
            release_hook=None if release is None else partial(release, t),
        )
        for n, t in tensors.items()
    ]


def from_mapping(
    obj: Mapping,
    name: str | None = None,
    *,
    key: str | None = None,
    origin: str = "state_dict",
    release: Callable[[torch.Tensor], None] | None = None,
) -> ModelSource:
    """The source for a state_dict or training checkpoint held in `obj`."""
    weights, meta = split_checkpoint(obj, key, origin)
    if isinstance(weights, nn.Module):
        return dataclasses.replace(from_module(weights, name), metadata=meta)
    if not isinstance(weights, Mapping):
        raise CheckpointError(f"{origin}: entry {key!r} holds a {type(weights).__name__}, not a state_dict")
    return build_source(name or origin, stored_tensors(weights, meta, origin, release), metadata=meta)
