"""Mergeable weight statistics: the accumulator every stats view is built from.

A :class:`Moments` holds what is needed to describe a set of numbers and to combine two
sets exactly: element counts (all, finite, zeros, NaN, Inf), min and max, the mean and M2
(sum of squared deviations) in float64, the sum of absolute values, and a histogram of
the finite values over ``[hist_lo, hist_hi]``.

Merging (:func:`merge`) is exact for the counts, min and max, and combines the moments
with Chan's formula in float64 (``math.fsum``), so a merge tree of any shape matches a
float64 reference to ~1e-15. Histograms on the same edges add exactly; histograms on
different ranges are re-binned once onto the union range by linear interpolation of their
cumulative counts (the totals stay exact, single bins are approximate). Pass one
``hist_range`` to every part when exact merged bins matter.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

_ROWS = 512  # histograms re-binned together

__all__ = [
    "SCALARS",
    "Moments",
    "histogram_edges",
    "histogram_range",
    "merge",
    "merge_groups",
    "rebin",
    "rebin_rows",
    "rebin_sum",
    "spread",
]


class Moments(NamedTuple):
    """Statistics of a set of numbers, mergeable with :func:`merge`. An immutable value
    (a NamedTuple: thousands are built per model, and cheaply)."""

    numel: int  # every element, NaN and Inf included
    count: int  # type: ignore[assignment]  # shadows tuple.count on purpose; finite elements: the ones mean, m2, abs_sum, min, max and hist describe
    mean: float  # NaN when count == 0
    m2: float  # sum of (x - mean)**2
    abs_sum: float
    min: float
    max: float
    zeros: int  # elements exactly 0 (or -0)
    nan: int
    inf: int
    hist: np.ndarray  # int64 counts of the finite elements, summing to `count`
    hist_lo: float  # histogram range; equal ends mean a point mass; NaN when count == 0
    hist_hi: float
    hist_sample: int  # elements the histogram was binned from (== count when exact)

    @property
    def bins(self) -> int:
        return len(self.hist)

    @property
    def std(self) -> float:
        """Population standard deviation (ddof=0)."""
        return float(spread(self.count, self.mean, self.m2, self.abs_sum)[0])

    @property
    def l2(self) -> float:
        """Euclidean norm of the finite elements."""
        return float(spread(self.count, self.mean, self.m2, self.abs_sum)[1])

    @property
    def abs_mean(self) -> float:
        return float(spread(self.count, self.mean, self.m2, self.abs_sum)[2])

    @property
    def edges(self) -> np.ndarray:
        """``bins + 1`` float edges as :func:`numpy.histogram` would draw them."""
        return histogram_edges(self.hist_lo, self.hist_hi, self.bins)

    @classmethod
    def from_rows(cls, rows: Iterable[tuple]) -> Iterator[Moments]:
        """Moments from tuples of their fields, in order, built at C speed (``_make`` costs a
        Python call per row, and roll-ups build thousands)."""
        return map(functools.partial(tuple.__new__, cls), rows)

    def to_plain(self) -> dict[str, int | float | list[int]]:
        """The one serialization: field name -> a plain Python number (the histogram a list),
        what JSON, an RPC or a ``torch.distributed`` object collective can carry."""
        plain: dict[str, int | float | list[int]] = {f: getattr(self, f) for f in SCALARS}
        plain.update(hist=[int(c) for c in self.hist], hist_lo=self.hist_lo, hist_hi=self.hist_hi)
        plain["hist_sample"] = self.hist_sample
        return {k: v.item() if isinstance(v, np.generic) else v for k, v in plain.items()}

    @classmethod
    def from_plain(cls, plain: dict) -> Moments:
        """The inverse of :meth:`to_plain`."""
        return cls(**{**plain, "hist": np.asarray(plain["hist"], np.int64)})

    @classmethod
    def empty(cls, bins: int, numel: int = 0, nan: int = 0, inf: int = 0) -> Moments:
        """No finite values (an empty tensor, or one that is all NaN/Inf)."""
        nan_ = math.nan
        return cls(numel, 0, nan_, 0.0, 0.0, nan_, nan_, 0, nan, inf, np.zeros(bins, np.int64), nan_, nan_, 0)


SCALARS = Moments._fields[:10]
"""The scalar fields (numel ... inf), in order: what a per-rank merge gathers as a float row."""


def spread(count, mean, m2, abs_sum) -> tuple:
    """(std, l2, abs_mean) from Moments fields, scalars or arrays alike: std is the
    population standard deviation; with no finite values std and abs_mean are NaN, l2 is 0."""
    count, mean, m2, abs_sum = (np.asarray(v, np.float64) for v in (count, mean, m2, abs_sum))
    with np.errstate(divide="ignore", invalid="ignore"):
        std = np.sqrt(m2 / count)
        l2 = np.where(count > 0, np.sqrt(m2 + count * np.where(count > 0, mean, 0.0) ** 2), 0.0)
        return std, l2, abs_sum / count


def histogram_edges(lo, hi, bins: int) -> np.ndarray:
    """Edges over [lo, hi] exactly as numpy.histogram draws them (np.linspace; empty: [0, 1];
    lo == hi: [lo - 0.5, hi + 0.5]). Scalars give ``bins + 1`` edges; arrays of k ranges
    give a (k, bins + 1) array."""
    if np.ndim(lo) == 0:  # the common single range: the same arithmetic without array overhead
        lo, hi = float(lo), float(hi)
        if math.isnan(lo):
            lo, hi = 0.0, 1.0
        elif lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = np.arange(bins + 1, dtype=np.float64) * ((hi - lo) / bins) + lo
        edges[-1] = hi
        return edges
    lo, hi = histogram_range(lo, hi)
    edges = np.multiply.outer((hi - lo) / bins, np.arange(bins + 1, dtype=np.float64))
    edges += lo[..., None]  # in place: thousands of rows at once
    edges[..., -1] = hi
    return edges


def histogram_range(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """The first and last of :func:`histogram_edges` for arrays of ranges, without the edges
    between (edge j of k bins is ``j * ((last - first) / k) + first``)."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    empty = np.isnan(lo)
    lo, hi = np.where(empty, 0.0, lo), np.where(empty, 1.0, hi)
    point = lo == hi
    return np.where(point, lo - 0.5, lo), np.where(point, hi + 0.5, hi)


def rebin(counts: np.ndarray, lo: float, hi: float, new_lo: float, new_hi: float) -> np.ndarray:
    """Counts over [lo, hi] moved onto as many bins over [new_lo, new_hi] ⊇ [lo, hi]
    (see :func:`rebin_sum`)."""
    return rebin_sum(counts[None, :], np.array([lo]), np.array([hi]), new_lo, new_hi)


def rebin_sum(counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, new_lo: float, new_hi: float) -> np.ndarray:
    """The sum of k histograms (rows of `counts`, over [lo[i], hi[i]]) moved onto as many
    bins over [new_lo, new_hi], which holds every range.

    Rows with the target range are added as they are. Otherwise the cumulative counts are
    interpolated linearly at the new edges and rounded, so each row's total is kept exactly
    and each bin is within one source bin's count of the truth. A point mass (lo == hi) goes
    whole into the bin that holds its value. Vectorized over rows: a module roll-up merges
    thousands of tensors."""
    k = len(lo)
    return rebin_rows(counts, lo, hi, np.full(k, float(new_lo)), np.full(k, float(new_hi))).sum(axis=0)


def rebin_rows(
    counts: np.ndarray, lo: np.ndarray, hi: np.ndarray, new_lo: np.ndarray, new_hi: np.ndarray
) -> np.ndarray:
    """Each row of `counts` (over [lo[i], hi[i]]) moved onto its own target range
    [new_lo[i], new_hi[i]], as :func:`rebin_sum` describes; (k, bins) int64."""
    k, bins = counts.shape
    out = np.zeros((k, bins), np.int64)
    same = (lo == new_lo) & (hi == new_hi)
    out[same] = counts[same]
    point = ~same & (lo == hi)
    if point.any():
        new_edges = histogram_edges(new_lo[point], new_hi[point], bins).reshape(-1, bins + 1)
        index = (new_edges <= lo[point][:, None]).sum(axis=1) - 1  # searchsorted(side="right") - 1, per row
        out[np.flatnonzero(point), np.clip(index, 0, bins - 1)] = counts[point].sum(axis=1)
    rest = np.flatnonzero(~same & ~point)
    for start in range(0, len(rest), _ROWS):  # blocks of rows: the temporaries stay in cache
        rows = rest[start : start + _ROWS]
        edges = histogram_edges(lo[rows], hi[rows], bins).reshape(-1, bins + 1)
        new_edges = histogram_edges(new_lo[rows], new_hi[rows], bins).reshape(-1, bins + 1)
        cumulative = np.zeros(edges.shape)
        np.cumsum(counts[rows], axis=1, out=cumulative[:, 1:])
        at_new = _interp_rows(new_edges, edges, cumulative)
        out[rows] = np.diff(np.rint(at_new), axis=1).astype(np.int64)
    return out


def _interp_rows(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """numpy.interp(x[i], xp[i], fp[i]) for every row i at once, with numpy's arithmetic
    (slope * (x - xp[j]) + fp[j] where xp[j] <= x < xp[j + 1]; fp's ends outside xp).
    Rows of xp are evenly spaced histogram edges, so j is computed, then corrected by one
    step either way against the edges themselves (rounding moves it by at most one)."""
    n = xp.shape[1]
    base = (np.arange(len(xp)) * n)[:, None]
    flat_x, flat_y = xp.ravel(), fp.ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        guess = np.floor((x - xp[:, :1]) / ((xp[:, -1:] - xp[:, :1]) / (n - 1)))
    j = np.clip(np.nan_to_num(guess, nan=-1.0), -1, n - 1).astype(np.int64)
    j -= (j >= 0) & (x < flat_x[base + np.maximum(j, 0)])
    j += (j < n - 1) & (x >= flat_x[base + np.minimum(j + 1, n - 1)])
    at = base + np.clip(j, 0, n - 2)
    x0, x1, y0, y1 = flat_x[at], flat_x[at + 1], flat_y[at], flat_y[at + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = (y1 - y0) / (x1 - x0) * (x - x0) + y0
    return np.where((j >= 0) & (j < n - 1), value, np.where(j < 0, fp[:, :1], fp[:, -1:]))


def merge_groups(parts: Sequence[Moments], groups: Sequence[Sequence[int]]) -> list[Moments | None]:
    """``merge([parts[i] for i in g])`` for every group `g` of indices into `parts` (None for
    an empty group), computed for all groups at once: a per-module roll-up merges every
    module's subtree, thousands of small merges. Counts, min, max and histograms are
    what :func:`merge` gives; mean and M2 are summed in float64 rather than ``math.fsum``
    (the same to ~1e-15)."""
    out: list[Moments | None] = [None] * len(groups)
    multi = [g for g in range(len(groups)) if len(groups[g]) > 1]
    for g, members in enumerate(groups):
        if len(members) == 1:
            out[g] = parts[members[0]]
    if not multi:
        return out
    columns = list(zip(*parts))  # Moments are tuples: transposed at C speed
    sizes = {len(h) for h in columns[10]}
    if len(sizes) > 1:
        raise ValueError(f"cannot merge histograms with different bin counts: {sorted(sizes)}")
    bins = parts[0].bins
    lengths = [len(groups[g]) for g in multi]
    gid = np.repeat(np.arange(len(multi)), lengths)
    pid = np.fromiter(itertools.chain.from_iterable(groups[g] for g in multi), np.int64, sum(lengths))
    numel, count, mean, m2, abs_sum, low, high, zeros, nan, inf = np.array(columns[:10], np.float64)[:, pid]
    k = len(multi)

    def total(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(gid if where is None else gid[where], values if where is None else values[where], k)

    filled = count > 0
    g_count = total(count)
    with np.errstate(divide="ignore", invalid="ignore"):
        g_mean = total(count * mean, filled) / g_count
        g_m2 = total(m2, filled) + total(count * (mean - g_mean[gid]) ** 2, filled)
    g_min, g_max = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(g_min, gid[filled], low[filled])
    np.maximum.at(g_max, gid[filled], high[filled])
    hist_lo, hist_hi = np.array(columns[11:13], np.float64)[:, pid]
    g_lo, g_hi = np.full(k, np.inf), np.full(k, -np.inf)
    np.minimum.at(g_lo, gid[filled], hist_lo[filled])
    np.maximum.at(g_hi, gid[filled], hist_hi[filled])
    # np.array, not np.stack: 4x faster on thousands of rows
    hists = np.array(columns[10])[pid[filled]] if filled.any() else np.zeros((0, bins), np.int64)
    moved = rebin_rows(hists, hist_lo[filled], hist_hi[filled], g_lo[gid[filled]], g_hi[gid[filled]])
    cells = (gid[filled][:, None] * bins + np.arange(bins)).ravel()  # bincount adds at C speed, ufunc.at does not
    g_hist = np.bincount(cells, moved.ravel(), k * bins).astype(np.int64).reshape(k, bins)
    samples = np.array(columns[13], np.int64)[pid]
    n, z, na, nf = (total(v).astype(np.int64).tolist() for v in (numel, zeros, nan, inf))
    c = g_count.astype(np.int64).tolist()
    g_sample = np.bincount(gid[filled], samples[filled], k).astype(np.int64).tolist()
    floats = (g.tolist() for g in (g_mean, g_m2, total(abs_sum, filled), g_min, g_max))
    mean_, m2_, abs_, min_, max_ = floats
    rows = zip(n, c, mean_, m2_, abs_, min_, max_, z, na, nf, list(g_hist), g_lo.tolist(), g_hi.tolist(), g_sample)
    for g, m in zip(multi, Moments.from_rows(rows)):
        out[g] = m
    for i in np.flatnonzero(g_count == 0).tolist():  # nothing finite in the group
        out[multi[i]] = Moments.empty(bins, n[i], na[i], nf[i])
    return out


def merge(parts: Sequence[Moments]) -> Moments:
    """One Moments for the union of `parts` (any number; all with the same bin count)."""
    if not parts:
        raise ValueError("merge() needs at least one Moments")
    bins = parts[0].bins
    if any(p.bins != bins for p in parts):
        raise ValueError(f"cannot merge histograms with different bin counts: {sorted({p.bins for p in parts})}")
    if len(parts) == 1:
        return parts[0]
    filled = [p for p in parts if p.count]
    numel = sum(p.numel for p in parts)
    nan = sum(p.nan for p in parts)
    inf = sum(p.inf for p in parts)
    if not filled:
        return Moments.empty(bins, numel, nan, inf)
    count = sum(p.count for p in filled)
    mean = math.fsum(p.count * p.mean for p in filled) / count
    m2 = math.fsum([p.m2 for p in filled] + [p.count * (p.mean - mean) ** 2 for p in filled])
    lo = min(p.hist_lo for p in filled)
    hi = max(p.hist_hi for p in filled)
    hist = rebin_sum(
        np.stack([p.hist for p in filled]),
        np.array([p.hist_lo for p in filled]),
        np.array([p.hist_hi for p in filled]),
        lo,
        hi,
    )
    return Moments(
        numel=numel,
        count=count,
        mean=mean,
        m2=m2,
        abs_sum=math.fsum(p.abs_sum for p in filled),
        min=min(p.min for p in filled),
        max=max(p.max for p in filled),
        zeros=sum(p.zeros for p in parts),
        nan=nan,
        inf=inf,
        hist=hist,
        hist_lo=lo,
        hist_hi=hi,
        hist_sample=sum(p.hist_sample for p in filled),
    )
