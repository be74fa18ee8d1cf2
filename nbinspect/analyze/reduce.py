"""Tensors to :class:`~nbinspect.core.moments.Moments`: exact, bounded memory.

Two paths, both exact for counts, min and max and within ~1e-7 of a float64 reference for
the moments:

- **Small tensors** (up to ``SAMPLE`` elements) are reduced many at a time: their values
  are concatenated in float64 and every statistic is one numpy ``reduceat`` over all of
  them. Histograms are exact and bin like
  ``numpy.histogram(finite_values, bins, range=(min, max))``.
- **Large tensors** are read once, in chunks of ``CHUNK`` elements that stay in cache:
  ``aminmax``, ``sum``, the sum of |x| and of x² per chunk (re-centred on the chunk mean
  when the data sit far from zero, as LayerNorm weights do), combined in float64.
  fp16/bf16/fp8 chunks are upcast into a reused float32 buffer, integer and bool chunks
  into float64. The histogram is binned from a strided sample of ``SAMPLE`` elements (the
  stride is made coprime with the last dimension so every column is visited), scaled to
  the finite count; ``Moments.hist_sample`` says how many elements it was binned from.
  Measured on N(0, 0.02) weights of 1M-100M elements: each bin within ~0.25% of the
  elements of the exact histogram (``benchmarks/bench_stats.py``). The chunks reuse the
  run's buffers (:class:`~.scratch.Scratch`). torch's own intra-op threads do this path's
  parallel work: a pool of single-threaded Python workers measured slower on an idle
  2-core machine and would have to change torch's process-wide thread count while it ran.

  When the run's buffers carry the fused kernels (:mod:`.fused`: a run with enough
  large-tensor bytes, numba installed), a dense large tensor is instead read once by one
  kernel per thread that takes every sum around a shift (the sample's mean), the min/max
  and the zero count together; the strided sample and the histogram are the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import torch

from ..core.moments import Moments, histogram_edges, histogram_range, merge
from . import fused
from .scratch import Scratch

__all__ = [
    "CHUNK",
    "SAMPLE",
    "Streamed",
    "batch_moments",
    "large_moments",
    "streamable",
    "streamed_moments",
    "tensor_moments",
]

CHUNK = 1 << 20  # elements per chunk of a large tensor (4 MB of fp32)
SAMPLE = 1 << 16  # elements binned per large tensor; tensors up to this size are exact
_SHIFT_SAMPLE = 256  # elements whose mean is the fused path's shift (its sums need one near the mean)
_SHIFT_ABOVE = 16.0  # re-centre a chunk when sum(x^2) > this * M2 (cancellation risk)


def tensor_moments(values: torch.Tensor, bins: int = 64, workspace: Scratch | None = None) -> Moments:
    """Statistics of one real tensor (floating, integer or bool, dense, any device).
    `workspace`: the run's buffers (chunks of ``CHUNK`` elements) and kernels; None: the torch path."""
    if values.numel() <= SAMPLE:
        return batch_moments([values], bins)[0]
    if workspace is None:
        with Scratch(CHUNK) as workspace:
            return large_moments(values, bins, workspace)
    return large_moments(values, bins, workspace)


# ---------------------------------------------------------------- small tensors, batched


def _bin_counts(values: np.ndarray, sizes: np.ndarray, lo: np.ndarray, hi: np.ndarray, bins: int) -> np.ndarray:
    """(k, bins) int64 counts of float64 `values`, k segments one after another (`sizes`
    values each), over [lo, hi] per segment, with numpy.histogram's edges and edge rule (the
    last bin is closed). Values outside a segment's range go to its end bins."""
    k = len(lo)
    left, right = histogram_range(lo, hi)
    first, width = np.repeat(left, sizes), np.repeat(right - left, sizes)
    step = width / bins  # edge j of histogram_edges is j * step + first
    index = ((values - first) / width * bins).astype(np.int64)
    np.clip(index, 0, bins - 1, out=index)
    # numpy's own correction within an ulp of an edge
    index -= values < index * step + first
    index += (values >= (index + 1) * step + first) & (index != bins - 1)
    np.clip(index, 0, bins - 1, out=index)
    index += np.repeat(np.arange(0, k * bins, bins), sizes)
    return np.bincount(index, minlength=k * bins).reshape(k, bins)


def _float64(t: torch.Tensor) -> np.ndarray:
    """A 1-D tensor's values as a float64 numpy array, converted by numpy where it can (a torch
    conversion of this size wakes torch's threads, which then spin: twice the CPU time)."""
    t = t.cpu()
    if t.dtype == torch.bfloat16 or (t.dtype.is_floating_point and t.itemsize == 1):  # no numpy twin
        t = t.float()
    return t.numpy().astype(np.float64)


def batch_moments(tensors: Sequence[torch.Tensor], bins: int = 64, kernels: ModuleType | None = None) -> list[Moments]:
    """Statistics of many small real tensors at once, over their values concatenated in
    float64: one reduceat per statistic in numpy, or one pass of the `kernels` (already
    loaded, see :mod:`.fused`); exact histograms."""
    out: list[Moments] = [None] * len(tensors)  # type: ignore[list-item]
    groups: dict[torch.dtype, list[int]] = {}
    sizes = [t.numel() for t in tensors]
    for i, t in enumerate(tensors):
        if sizes[i]:
            groups.setdefault(t.dtype, []).append(i)
        else:
            out[i] = Moments.empty(bins)
    if not groups:
        return out
    order = [i for indices in groups.values() for i in indices]  # one flatten per dtype
    flatten = torch._C._nn.flatten_dense_tensors
    with torch.no_grad():
        flat = [_float64(flatten([tensors[i] for i in g])) for g in groups.values()]
    x = flat[0] if len(flat) == 1 else np.concatenate(flat)
    numels = np.array([sizes[i] for i in order], np.int64)
    if kernels is not None:
        return _kernel_batch(kernels, x, numels, order, out, bins)
    starts = np.concatenate([[0], np.cumsum(numels)[:-1]])
    finite = np.isfinite(x)
    every = bool(finite.all())
    count = numels if every else np.add.reduceat(finite, starts, dtype=np.int64)
    nan = np.zeros_like(numels) if every else np.add.reduceat(np.isnan(x), starts, dtype=np.int64)
    zeros = np.add.reduceat(x == 0, starts, dtype=np.int64)
    v = x if every else np.where(finite, x, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.add.reduceat(v, starts) / count  # NaN where a tensor has no finite values
    dev = v - np.repeat(mean, numels)
    if not every:
        dev[~finite] = 0.0
    m2 = np.add.reduceat(dev * dev, starts)
    abs_sum = np.add.reduceat(np.abs(v), starts)
    lo = np.minimum.reduceat(x if every else np.where(finite, x, np.inf), starts)
    hi = np.maximum.reduceat(x if every else np.where(finite, x, -np.inf), starts)
    lo, hi = np.where(count > 0, lo, np.nan), np.where(count > 0, hi, np.nan)
    hist = _bin_counts(x, numels, lo, hi, bins) if every else _bin_counts(x[finite], count, lo, hi, bins)
    return _assemble(out, order, bins, numels, count, mean, m2, abs_sum, lo, hi, zeros, nan, hist)


def _kernel_batch(
    k: ModuleType, x: np.ndarray, numels: np.ndarray, order: list[int], out: list[Moments], bins: int
) -> list[Moments]:
    """batch_moments' statistics from one kernel pass over the concatenated values `x`."""
    sums = np.zeros((len(order), 8))
    hist = np.zeros((len(order), bins), np.int64)
    k.segment_moments(x, np.concatenate([[0], np.cumsum(numels)]), sums, hist)
    count, nan, zeros = sums[:, :3].astype(np.int64).T
    mean, m2, abs_sum, lo, hi = sums[:, 3:].T
    return _assemble(out, order, bins, numels, count, mean, m2, abs_sum, lo, hi, zeros, nan, hist)


def _assemble(out: list[Moments], order: list[int], bins: int, numel: np.ndarray, count: np.ndarray, *columns) -> list:
    """out[order[j]] = the Moments of row j of the columns (mean, m2, abs_sum, min, max,
    zeros, nan, hist), built at C speed: thousands of tensors per batch."""
    mean, m2, abs_sum, lo, hi, zeros, nan, hist = columns
    inf = numel - count - nan
    numel_, count_, lo_, hi_, nan_, inf_ = (c.tolist() for c in (numel, count, lo, hi, nan, inf))
    fields = (mean.tolist(), m2.tolist(), abs_sum.tolist(), lo_, hi_, zeros.tolist(), nan_, inf_, list(hist))
    for i, m in zip(order, Moments.from_rows(zip(numel_, count_, *fields, lo_, hi_, count_))):
        out[i] = m
    for j in np.flatnonzero(count == 0).tolist():  # nothing finite
        out[order[j]] = Moments.empty(bins, numel_[j], nan_[j], inf_[j])
    return out


# ---------------------------------------------------------------- large tensors, chunked


def _pieces(t: torch.Tensor, size: int) -> list[torch.Tensor]:
    """Views covering `t` once, each at most `size` elements: 1-D slices in memory order
    when the tensor is dense (any dim order), blocks of rows otherwise (the reducer copies
    one block at a time when it flattens it)."""
    flat = _dense_flat(t)
    if flat is not None:
        return [flat[i : i + size] for i in range(0, flat.numel(), size)]
    if t[0].numel() > size:
        return [piece for row in t for piece in _pieces(row, size)]
    rows = size // t[0].numel()
    return [t[i : i + rows] for i in range(0, t.shape[0], rows)]


def _sample_stride(t: torch.Tensor) -> int:
    return _stride_of(t.numel(), t.shape)


def _stride_of(numel: int, shape: Sequence[int]) -> int:
    """Step between sampled elements: about numel / SAMPLE, coprime with the last dim so a
    row-major matrix is sampled across all its columns, not a few."""
    stride = -(-numel // SAMPLE)
    last = shape[-1] if len(shape) else 1
    while math.gcd(stride, last) != 1:
        stride += 1
    return stride


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.float64:
        return dtype
    return torch.float32 if dtype.is_floating_point else torch.float64


def _chunk_moments(c: torch.Tensor, lo: float, hi: float, work: torch.Tensor, bins: int) -> Moments:
    """Moments (no histogram) of a finite 1-D chunk whose min/max are known."""
    n = c.numel()
    s = float(c.sum())
    if lo < 0 < hi:
        torch.abs(c, out=work)
        abs_sum = float(work.sum())
        has_zero = float(work.amin()) == 0
    else:
        abs_sum, has_zero = abs(s), lo == 0 or hi == 0
    zeros = 0
    if has_zero:  # dot of a sign vector counts nonzeros exactly (integers below 2**24)
        torch.sign(c, out=work)
        zeros = n - int(torch.dot(work, work))
    torch.mul(c, c, out=work)
    q = float(work.sum())
    m2 = q - s * s / n
    mean = s / n
    if q > _SHIFT_ABOVE * m2:  # far from zero: sum of squares would cancel, re-centre
        shift = float(torch.tensor(mean, dtype=c.dtype))
        torch.sub(c, shift, out=work)
        s = float(work.sum())
        work.mul_(work)
        m2 = float(work.sum()) - s * s / n
        mean = shift + s / n
    return Moments(
        numel=n, count=n, mean=mean, m2=max(m2, 0.0), abs_sum=abs_sum, min=lo, max=hi, zeros=zeros, nan=0, inf=0,
        hist=np.zeros(bins, np.int64), hist_lo=lo, hist_hi=hi, hist_sample=0,
    )  # fmt: skip


def _piece_moments(
    piece: torch.Tensor,
    cdt: torch.dtype,
    bins: int,
    workspace: Scratch,
    sample: torch.Tensor,
    position: int,
    stride: int,
) -> Moments:
    """Moments of one piece starting at flat `position`; writes its share of the strided
    sample (elements at multiples of `stride`) into `sample`."""
    c = piece.reshape(-1)
    n = c.numel()
    if c.dtype != cdt or c.device.type != "cpu":
        c = workspace.get(cdt, "upcast", n).copy_(c)
    share, first = fused.sample_share(position, position + n, sample, stride)
    share.copy_(c[first::stride])
    nan = inf = 0
    lo, hi = (float(v) for v in torch.aminmax(c))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        finite = torch.isfinite(c)
        nan = int(torch.isnan(c).sum())
        inf = n - int(finite.sum()) - nan
        c = c[finite]
        if c.numel() == 0:
            return Moments.empty(bins, n, nan, inf)
        lo, hi = (float(v) for v in torch.aminmax(c))
    m = _chunk_moments(c, lo, hi, workspace.get(cdt, "work", c.numel()), bins)
    return m._replace(numel=n, nan=nan, inf=inf) if n != m.numel else m


def _dense_flat(t: torch.Tensor) -> torch.Tensor | None:
    """`t` as a 1-D view in memory order when its elements fill a block of memory, else None."""
    if t.dim() == 0:
        return t.reshape(1)
    dense = t.permute(sorted(range(t.dim()), key=lambda d: -t.stride()[d]))
    return dense.view(-1) if dense.is_contiguous() else None


def _shift(flat: torch.Tensor) -> float:
    """The mean of a few hundred of the tensor's finite elements, in its own type: x - shift
    is then as short as x, so fp16/bf16/integer sums stay exact. numpy where it can: a torch
    op here would wake torch's threads, which then spin beside the kernels."""
    step = max(1, flat.numel() // _SHIFT_SAMPLE)
    if flat.dtype in (torch.float32, torch.float64) and flat.device.type == "cpu":
        few = flat.numpy()[::step]
        finite = few[np.isfinite(few)]
        return float(few.dtype.type(finite.mean(dtype=np.float64))) if finite.size else 0.0
    few = flat[::step].to("cpu", torch.float64).numpy()
    finite = few[np.isfinite(few)]
    return float(torch.tensor(finite.mean()).to(flat.dtype)) if finite.size else 0.0


def _fused_moments(
    k: ModuleType, flat: torch.Tensor, stride: int, workspace: Scratch, bins: int
) -> tuple[Moments, np.ndarray]:
    """(Moments without histogram, float64 sample) of a dense tensor, read once by kernels `k`,
    which copy the sample out while each block is in cache. The sums are taken around a
    shift near the mean (from a few hundred elements) so the squares do not cancel."""
    sample = workspace.get(torch.float64, "sample", -(-flat.numel() // stride), exact=True).numpy()
    sums = fused.moment_sums(k, flat, _shift(flat), lambda dtype: workspace.get(dtype, "upcast"), sample, stride)
    return _moments_of(sums, bins), sample


def _moments_of(sums: fused.MomentSums, bins: int) -> Moments:
    """Moments (histogram still empty) from the kernels' sums."""
    n, inf = sums.n, sums.n - sums.count - sums.nan
    if sums.count == 0:
        return Moments.empty(bins, n, sums.nan, inf)
    mean, m2 = sums.mean_m2()
    empty = np.zeros(bins, np.int64)
    return Moments(
        numel=n, count=sums.count, mean=mean, m2=m2, abs_sum=sums.abs_sum, min=sums.lo, max=sums.hi,
        zeros=sums.zeros, nan=sums.nan, inf=inf, hist=empty, hist_lo=0, hist_hi=0, hist_sample=0,
    )  # fmt: skip


def large_moments(t: torch.Tensor, bins: int, workspace: Scratch) -> Moments:
    """Statistics of a large real tensor in one chunked pass plus a strided sample."""
    t = t.detach()
    cdt = _compute_dtype(t.dtype)
    stride = _sample_stride(t)
    kernels = workspace.kernels
    flat = _dense_flat(t) if kernels is not None else None
    if kernels is not None and flat is not None:  # the fused path: dense tensors (nearly all)
        total, picked = _fused_moments(kernels, flat, stride, workspace, bins)
    else:
        sample = workspace.get(cdt, "sample", -(-t.numel() // stride), exact=True)
        pieces = _pieces(t, CHUNK)
        starts = np.cumsum([0] + [p.numel() for p in pieces[:-1]]).tolist()
        parts = [_piece_moments(p, cdt, bins, workspace, sample, start, stride) for p, start in zip(pieces, starts)]
        total = merge(parts)
        picked = workspace.get(torch.float64, "sample", len(sample), exact=True).copy_(sample).numpy()
    return _with_histogram(total, picked, bins, kernels)


class Streamed(fused.FileSpan, Protocol):
    """Values not in memory, read by the kernel from their file (``io.safetensors_file.FileTensor``)."""

    dtype: torch.dtype
    shape: tuple[int, ...]


_PROBES = 16  # places a streamed tensor's shift is read from, _PROBE elements each
_PROBE = 16


def streamable(values: Any, workspace: Scratch) -> bool:
    """Whether :func:`streamed_moments` can read `values` (a loader, not yet a tensor)."""
    return (
        workspace.kernels is not None
        and callable(getattr(values, "read_into", None))
        and callable(getattr(values, "span", None))
        and getattr(values, "dtype", None) in fused.KERNEL_VIEWS
        and math.prod(values.shape) > SAMPLE
    )


def streamed_moments(values: Streamed, bins: int, workspace: Scratch) -> Moments:
    """Statistics of a large tensor read a piece at a time (:func:`.fused.stream_sums`)
    instead of loaded whole: what :func:`large_moments` gives for the same values. The
    shift (near the mean, for the sums) is the mean of a few hundred elements read from
    places spread over the tensor (:func:`streamable` said the kernels are loaded)."""
    k = workspace.kernels
    assert k is not None
    n, dtype = math.prod(values.shape), values.dtype
    size = torch.tensor([], dtype=dtype).element_size()
    probe = np.empty((_PROBES, _PROBE * size), np.uint8)
    for i, row in enumerate(probe):
        values.read_into((i * (n - _PROBE) // (_PROBES - 1)) * size, row)
    shift = _shift(torch.from_numpy(probe.reshape(-1)).view(dtype))
    stride = _stride_of(n, values.shape)
    sample = workspace.get(torch.float64, "sample", -(-n // stride), exact=True).numpy()
    sums = fused.stream_sums(k, values, n, dtype, shift, sample, stride)
    return _with_histogram(_moments_of(sums, bins), sample, bins, k)


def _with_histogram(total: Moments, picked: np.ndarray, bins: int, kernels: ModuleType | None) -> Moments:
    """`total` with the histogram of its sample `picked` (float64), scaled to its count."""
    if total.count == 0:
        return total
    if total.nan or total.inf:
        picked = picked[np.isfinite(picked)]
    if kernels is not None:
        counts = np.zeros(bins, np.int64)
        kernels.bin_counts(picked, histogram_edges(total.min, total.max, bins), counts)
    else:
        counts = _bin_counts(picked, np.array([len(picked)]), np.array([total.min]), np.array([total.max]), bins)[0]
    return total._replace(
        hist=_scale_counts(counts, total.count), hist_lo=total.min, hist_hi=total.max, hist_sample=len(picked)
    )


def _scale_counts(counts: np.ndarray, total: int) -> np.ndarray:
    """Sample counts scaled to sum exactly to `total` (largest remainders round up)."""
    if counts.sum() == 0:
        return counts
    exact = counts * (total / counts.sum())
    out = np.floor(exact).astype(np.int64)
    short = total - int(out.sum())
    out[np.argsort(out - exact, kind="stable")[:short]] += 1
    return out
