"""Global figures of a sharded model: each rank's statistics combined with torch.distributed.

Each rank reduces its own contribution (see ``source.py``) to
:class:`~nbinspect.core.moments.Moments` with the ordinary single-process code. Then:

1. one ``all_gather`` of every tensor's counts, float64 mean/M2/|x| sums, min and max;
2. the histogram edges are agreed from the global min/max, each rank bins its own finite
   values on them exactly (like ``numpy.histogram``), and one ``all_reduce`` adds the counts;
3. the per-rank parts are combined by :func:`~nbinspect.core.collective.merge_ranks` (Chan's
   formula in float64), on every rank alike: the merge vLLM's tensor-parallel ranks use too.

Comparisons add their delta sums with ``all_reduce`` (sums and counts; max |delta| by MAX).
Every rank must run the same analysis on the same module tree in the same order: these are
collectives. By default the frames are returned on rank 0 only (``None`` elsewhere).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...core.collective import Results, merge_ranks
from ...core.moments import SCALARS, Moments
from ...core.source import ModelSource, TensorEntry
from .source import DistributedSource, LocalPart, from_sharded_module, is_sharded_module

__all__ = [
    "Ranks",
    "aligned_values",
    "all_reduce_sums",
    "distributed",
    "local_histogram",
]

_CHUNK = 1 << 20


def distributed(model: Any, *, rank: int | None = 0, group: Any = None, name: str | None = None) -> DistributedSource:
    """A sharded model (DTensor parameters) as a source every analyzer takes, choosing who
    receives the frames: `rank` (default 0; ``None``: every rank). `group` is the process
    group holding the shards (default: the default group). Call it on every rank."""
    if isinstance(model, DistributedSource):
        return model
    return from_sharded_module(model, name, rank=rank, group=group)


def _dist() -> Any:
    import torch.distributed as dist

    return dist


class Ranks:
    """The :class:`~nbinspect.core.collective.Collective` of a DTensor-sharded source: rounds
    run as ``torch.distributed`` collectives over the source's process group."""

    def __init__(self, source: DistributedSource):
        self.source = source

    def receives(self) -> bool:
        rank = self.source.rank
        return rank is None or _dist().get_rank(self.source.group) == rank

    def combine(self, results: Results, bins: int) -> Results:
        """Global Moments per storage key from each rank's Moments of its contribution."""
        dist, group = _dist(), self.source.group
        entries = self.source.unique_tensors()
        keys = list(entries)
        local = np.zeros((len(keys), len(SCALARS) + 1), np.float64)  # last column: 1 = no values here
        for i, key in enumerate(keys):
            m = results[key][0]
            if m is None:
                local[i, -1] = 1
                continue
            local[i, :-1] = [getattr(m, f) for f in SCALARS]
            if m.count == 0:
                local[i, 2:7] = (0.0, 0.0, 0.0, math.inf, -math.inf)
        gathered = [torch.empty(local.shape, dtype=torch.float64) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, torch.from_numpy(local), group=group)
        ranks = [
            {
                key: (None if row[-1] else _moments(row[:-1], bins), results[key][1])
                for key, row in zip(keys, g.numpy().tolist())
            }
            for g in gathered
        ]

        def histograms(ranges: dict[Any, tuple[float, float]]) -> dict:
            hist = torch.zeros((len(keys), bins), dtype=torch.int64)
            for i, key in enumerate(keys):
                if key in ranges:
                    hist[i] = torch.from_numpy(local_histogram(entries[key], ranges[key][0], ranges[key][1], bins))
            dist.all_reduce(hist, group=group)
            return {key: hist[i].numpy() for i, key in enumerate(keys)}

        return merge_ranks(ranks, histograms)

    def shares(self, a: TensorEntry, b: TensorEntry, other: ModelSource) -> tuple[torch.Tensor, torch.Tensor]:
        part_b = other.parts.get(b.name) if isinstance(other, DistributedSource) else None
        return aligned_values(a, self.source.parts.get(a.name), b, part_b)

    def add_up(self, sums: list[float], maxima: list[float]) -> tuple[list, list]:
        return all_reduce_sums(self.source, sums, maxima)

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj` (picklable), in rank order, on every rank."""
        dist = _dist()
        out: list[Any] = [None] * dist.get_world_size(self.source.group)
        dist.all_gather_object(out, obj, group=self.source.group)
        return out

    def part(self, name: str) -> LocalPart | None:
        """Where this rank's contribution to tensor `name` sits in the global tensor."""
        return self.source.parts.get(name)


def _moments(row: list[float], bins: int) -> Moments:
    """A rank's Moments from its gathered row of :data:`SCALARS` (its histogram comes in round two)."""
    s: dict[str, Any] = dict(zip(SCALARS, row))
    for f in ("numel", "count", "zeros", "nan", "inf"):
        s[f] = int(s[f])
    if s["count"] == 0:
        return Moments.empty(bins, s["numel"], s["nan"], s["inf"])
    return Moments(**s, hist=np.zeros(bins, np.int64), hist_lo=s["min"], hist_hi=s["max"], hist_sample=s["count"])


def local_histogram(entry: TensorEntry, lo: float, hi: float, bins: int) -> np.ndarray:
    """Exact counts of this rank's finite values on the agreed range, chunk by chunk."""
    out = np.zeros(bins, np.int64)
    with torch.no_grad():
        values = entry.values()
        if values.is_complex():
            values = values.abs()
        if values.is_quantized:
            values = values.dequantize()
        flat = values.reshape(-1)
        for start in range(0, flat.numel(), _CHUNK):
            chunk = flat[start : start + _CHUNK].to("cpu", torch.float64).numpy()
            chunk = chunk[np.isfinite(chunk)]
            out += np.histogram(chunk, bins, range=(lo, hi) if lo < hi else (lo - 0.5, hi + 0.5))[0]
    entry.release()
    return out


# ---------------------------------------------------------------- comparisons


def _block(part: LocalPart) -> tuple[slice, ...]:
    return tuple(slice(o, o + s) for o, s in zip(part.offsets, part.shape))


def aligned_values(
    a: TensorEntry, part_a: LocalPart | None, b: TensorEntry, part_b: LocalPart | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of `a` and of `b` over the same elements. A side without a part is a
    whole tensor every rank can read; two parts of different layouts gather b whole first."""
    if part_a is not None and part_b is not None and part_a[:3] == part_b[:3]:
        return a.values(), b.values()
    if part_a is None and part_b is None:
        raise ValueError("aligned_values: neither side is distributed")
    if part_a is None:
        vb, va = aligned_values(b, part_b, a, part_a)
        return va, vb
    whole_b = b.values() if part_b is None or part_b.full is None else part_b.full()
    piece = whole_b[_block(part_a)] if part_a.owner else whole_b.reshape(-1)[:0]
    return a.values(), piece


def all_reduce_sums(source: DistributedSource, sums: list[float], maxima: list[float]) -> tuple[list, list]:
    """`sums` added and `maxima` maxed over the ranks of the source's group (NaN wins a max)."""
    dist = _dist()
    s = torch.tensor(sums, dtype=torch.float64)
    m = torch.tensor(maxima, dtype=torch.float64)
    nan = torch.isnan(m).to(torch.float64)
    dist.all_reduce(s, group=source.group)
    dist.all_reduce(nan, group=source.group)
    dist.all_reduce(torch.nan_to_num(m, nan=-math.inf, out=m), op=dist.ReduceOp.MAX, group=source.group)
    return s.tolist(), [math.nan if n else x for x, n in zip(m.tolist(), nan.tolist())]


def receives(obj: Any) -> bool | None:
    """Whether this rank receives results about `obj` (a live sharded model: rank 0)."""
    return _dist().get_rank() == 0 if is_sharded_module(obj) else None
