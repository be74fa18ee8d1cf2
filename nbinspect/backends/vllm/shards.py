"""Tensor parallelism in a vLLM engine: each rank's share of every tensor, and the global
statistics merged from them.

vLLM's parallel layers keep their unsplit sizes beside the shard each rank holds. A
column-parallel weight (``ColumnParallelLinear``, ``MergedColumnParallelLinear``) is split
on its rows, a row-parallel one on its columns; ``QKVParallelLinear`` splits the query heads
but replicates each key/value head over ``num_kv_head_replicas`` consecutive ranks (when
tp > num_kv_heads), so only the first of them contributes its k/v rows;
``VocabParallelEmbedding`` splits the vocabulary and pads each shard (the padding rows are
not the model's). Everything else (norms, a row-parallel bias, buffers, layers built with
``disable_tp``) is whole on every rank: tensor-parallel rank 0 contributes it. The shares of
all ranks are disjoint and cover every element once, so their
:class:`~nbinspect.core.moments.Moments` merge exactly.

The statistics take two rounds through the workers, as ``analyze/distributed.py`` does with
collectives: Moments of each share, then each rank bins its share on the edges agreed from
the global min/max and the driver adds the counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch import nn

from ...core.collective import Results, merge_ranks
from ...core.moments import Moments
from ...core.source import ModelSource, TensorEntry
from ..distributed.reduce import local_histogram

__all__ = ["from_plain", "global_moments", "rank_histograms", "rank_source", "to_plain"]

_Pieces = list[tuple[int, int]]  # row ranges of the local tensor this rank contributes


def _classes(module: nn.Module) -> set[str]:
    return {c.__name__ for c in type(module).__mro__}


def _layout(module: Any, leaf: str, shape: tuple[int, ...], tp_rank: int) -> tuple[tuple[int, ...], _Pieces]:
    """The global shape of a tensor whose local shape is `shape`, and the rows of it this
    rank contributes (none: another rank holds the same values). `module` is any vLLM layer:
    its sizes are read by name."""
    whole = [(0, shape[0])] if shape else [(0, 1)]
    classes = _classes(module)
    split = int(getattr(module, "tp_size", 1)) > 1 and leaf in ("weight", "bias") and len(shape) >= 1
    if split and "QKVParallelLinear" in classes:
        head, v_head = module.head_size, getattr(module, "v_head_size", module.head_size)
        q = module.num_heads * head
        rows = (module.total_num_heads + module.total_num_kv_heads) * head + module.total_num_kv_heads * v_head
        kv_owner = module.tp_rank % module.num_kv_head_replicas == 0
        return (rows, *shape[1:]), [(0, q), (q, shape[0])] if kv_owner else [(0, q)]
    if "VocabParallelEmbedding" in classes and leaf == "weight" and hasattr(module, "shard_indices"):
        ix = module.shard_indices  # padding rows follow the original and the added vocabulary
        pieces = [(0, ix.num_org_elements)]
        pieces.append((ix.num_org_elements_padded, ix.num_org_elements_padded + ix.num_added_elements))
        return (module.num_embeddings, *shape[1:]), pieces
    if split and "ColumnParallelLinear" in classes:
        return (module.output_size, *shape[1:]), whole
    if split and "RowParallelLinear" in classes and leaf == "weight" and len(shape) == 2:
        return (shape[0], module.input_size), whole
    return shape, whole if tp_rank == 0 else []


def _share(load: Callable[[], torch.Tensor], pieces: _Pieces, rows: int) -> Callable[[], torch.Tensor]:
    if pieces == [(0, rows)]:
        return load

    def values() -> torch.Tensor:
        local = load()
        flat = local.reshape(-1)
        if not pieces:
            return flat[:0]
        return torch.cat([local[a:b].reshape(-1) for a, b in pieces if b > a] or [flat[:0]])

    return values


def _global_entry(model: nn.Module, t: TensorEntry, tp_rank: int) -> TensorEntry:
    if t.shape is None:
        return t
    module = model.get_submodule(t.module)
    shape, pieces = _layout(module, t.name.rpartition(".")[2], tuple(t.shape), tp_rank)
    numel = math.prod(shape)
    width = t.nbytes // t.numel if t.numel else torch.empty(0, dtype=t.tensor.dtype).element_size()
    return replace(
        t,
        shape=shape,
        numel=numel,
        nbytes=numel * width,
        tensor=_share(t.values, pieces, t.shape[0] if t.shape else 1),
    )


def rank_source(model: nn.Module, source: ModelSource, tp_rank: int) -> ModelSource:
    """`source` (of `model`, on tensor-parallel rank `tp_rank`) with global shapes, counts and
    bytes, and values that are this rank's share."""
    return replace(source, tensors=tuple(_global_entry(model, t, tp_rank) for t in source.tensors))


def rank_histograms(source: ModelSource, ranges: dict[str, tuple[float, float]], bins: int) -> dict[str, np.ndarray]:
    """Exact counts of this rank's share of each tensor on the agreed ranges (round two)."""
    done: dict[Any, np.ndarray] = {}
    out = {}
    for t in source.tensors:
        if t.name in ranges:
            if t.storage_key not in done:
                done[t.storage_key] = local_histogram(t, *ranges[t.name], bins)
            out[t.name] = done[t.storage_key]
    return out


def global_moments(ask: Callable[[dict[str, Any]], list[Any]], bins: int) -> Results:
    """Global Moments of every tensor: `ask(step)` runs a round on every rank and returns
    their answers (``{"step": "moments"}``, then ``{"step": "histograms", "ranges": ...}``)."""

    def histograms(ranges: dict) -> dict:
        counts = ask({"step": "histograms", "ranges": ranges})
        return {name: np.sum([c[name] for c in counts], axis=0) for name in ranges}

    return merge_ranks(ask({"step": "moments"}), histograms)


def to_plain(results: Mapping[Any, Any]) -> dict[str, Any]:
    """`results` in Python lists, numbers and strings only: vLLM's RPC carries no numpy
    values from the engine's client to its workers."""
    return {n: (None if m is None else m.to_plain(), note) for n, (m, note) in results.items()}


def from_plain(plain: dict[str, Any]) -> Results:
    """The inverse of :func:`to_plain`."""
    return {n: (None if m is None else Moments.from_plain(m), note) for n, (m, note) in plain.items()}
