"""Global figures of a sharded model: each rank's statistics combined with torch.distributed.

Each rank reduces its own contribution (see ``sources/dtensor.py``) to
:class:`~nbinspect.analyze.moments.Moments` with the ordinary single-process code. Then:

1. one ``all_gather`` of every tensor's counts, float64 mean/M2/|x| sums, min and max;
2. the histogram edges are agreed from the global min/max, each rank bins its own finite
   values on them exactly (like ``numpy.histogram``), and one ``all_reduce`` adds the counts;
3. the per-rank parts are combined with :func:`~nbinspect.analyze.moments.merge` (Chan's
   formula in float64), on every rank alike.

Comparisons add their delta sums with ``all_reduce`` (sums and counts; max |delta| by MAX).
Every rank must run the same analysis on the same module tree in the same order: these are
collectives. By default the frames are returned on rank 0 only (``None`` elsewhere).
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import torch

from ..sources import ModelSource, TensorEntry
from ..sources.dtensor import DistributedSource, LocalPart, from_sharded_module, is_sharded_module
from .moments import Moments, merge

__all__ = [
    "aligned_values",
    "all_reduce_sums",
    "combine_moments",
    "distributed",
    "local_histogram",
    "on_receiving_rank",
    "with_histogram",
]

_FIELDS = ("numel", "count", "mean", "m2", "abs_sum", "min", "max", "zeros", "nan", "inf")
_CHUNK = 1 << 20

F = TypeVar("F", bound=Callable[..., Any])


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


def combine_moments(
    source: DistributedSource, results: Mapping[Any, tuple[Moments | None, str | None]], bins: int
) -> dict[Any, tuple[Moments | None, str | None]]:
    """Global Moments per storage key from each rank's Moments of its contribution."""
    dist = _dist()
    entries = source.unique_tensors()
    keys = list(entries)
    local = np.zeros((len(keys), len(_FIELDS) + 1), np.float64)  # last column: 1 = no values here
    for i, key in enumerate(keys):
        m = results[key][0]
        if m is None:
            local[i, -1] = 1
            continue
        local[i, :-1] = [getattr(m, f) for f in _FIELDS]
        if m.count == 0:
            local[i, 2:7] = (0.0, 0.0, 0.0, math.inf, -math.inf)
    world = dist.get_world_size(source.group)
    gathered = [torch.empty(local.shape, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, torch.from_numpy(local), group=source.group)
    parts = np.stack([g.numpy() for g in gathered])  # (world, keys, fields + 1)
    lo, hi = parts[:, :, 5].min(axis=0), parts[:, :, 6].max(axis=0)
    counts = parts[:, :, 1].sum(axis=0)
    hist = torch.zeros((len(keys), bins), dtype=torch.int64)
    for i, key in enumerate(keys):
        if counts[i] > 0 and not parts[:, i, -1].any():
            hist[i] = torch.from_numpy(local_histogram(entries[key], lo[i], hi[i], bins))
    dist.all_reduce(hist, group=source.group)
    out: dict[Any, tuple[Moments | None, str | None]] = {}
    for i, key in enumerate(keys):
        note = results[key][1]
        if parts[:, i, -1].any():
            out[key] = (None, note or "no values on some rank")
            continue
        ranks = [_moments(row, bins, lo[i], hi[i]) for row in parts[:, i, :-1]]
        total = merge(ranks)
        out[key] = (with_histogram(total, hist[i].numpy(), lo[i], hi[i]) if total.count else total, note)
    return out


def _moments(row: np.ndarray, bins: int, lo: float, hi: float) -> Moments:
    numel, count, mean, m2, abs_sum, mn, mx, zeros, nan, inf = row.tolist()
    if count == 0:
        return Moments.empty(bins, int(numel), int(nan), int(inf))
    return Moments(
        int(numel), int(count), mean, m2, abs_sum, mn, mx, int(zeros), int(nan), int(inf),
        np.zeros(bins, np.int64), lo, hi, int(count),
    )  # fmt: skip


def with_histogram(total: Moments, counts: np.ndarray, lo: float, hi: float) -> Moments:
    """`total` (merged from every rank's part) with the exact counts binned on [lo, hi]."""
    return total._replace(hist=np.asarray(counts, np.int64), hist_lo=lo, hist_hi=hi, hist_sample=total.count)


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


def pair_reducer(a: ModelSource, b: ModelSource) -> DistributedSource | None:
    """The distributed side of a comparison, if either side is one (it names the group)."""
    for side in (a, b):
        if isinstance(side, DistributedSource):
            return side
    return None


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


# ---------------------------------------------------------------- who receives the frames

_depth: contextvars.ContextVar[int] = contextvars.ContextVar("nbinspect_analysis_depth", default=0)


def is_receiver(obj: Any) -> bool | None:
    """Whether this rank receives results about `obj`; None when `obj` is not distributed."""
    if isinstance(obj, DistributedSource):
        return obj.rank is None or _dist().get_rank(obj.group) == obj.rank
    if isinstance(obj, torch.nn.Module) and is_sharded_module(obj):
        return _dist().get_rank() == 0
    return None


def on_receiving_rank(*positions: int) -> Callable[[F], F]:
    """A public analysis that returns None on ranks other than the receiving one when one of
    the arguments at `positions` is distributed. Nested calls (inspect calling params) pass
    their results through: only the outermost call decides."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            token = _depth.set(_depth.get() + 1)
            try:
                result = fn(*args, **kwargs)
            finally:
                _depth.reset(token)
            if _depth.get():
                return result
            for i in positions:
                receiver = is_receiver(args[i]) if i < len(args) else None
                if receiver is not None:
                    return result if receiver else None
            return result

        return run  # type: ignore[return-value]  # same signature as fn

    return wrap
