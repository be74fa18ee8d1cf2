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

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["Moments", "histogram_edges", "merge", "rebin", "rebin_sum", "spread"]


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
    def empty(cls, bins: int, numel: int = 0, nan: int = 0, inf: int = 0) -> Moments:
        """No finite values (an empty tensor, or one that is all NaN/Inf)."""
        nan_ = math.nan
        return cls(numel, 0, nan_, 0.0, 0.0, nan_, nan_, 0, nan, inf, np.zeros(bins, np.int64), nan_, nan_, 0)


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
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    empty = np.isnan(lo)
    lo, hi = np.where(empty, 0.0, lo), np.where(empty, 1.0, hi)
    point = lo == hi
    lo, hi = np.where(point, lo - 0.5, lo), np.where(point, hi + 0.5, hi)
    edges = np.arange(bins + 1, dtype=np.float64) * ((hi - lo) / bins)[..., None] + lo[..., None]
    edges[..., -1] = hi
    return edges


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
    bins = counts.shape[1]
    out = np.zeros(bins, np.int64)
    same = (lo == new_lo) & (hi == new_hi)
    out += counts[same].sum(axis=0, dtype=np.int64)
    new_edges = histogram_edges(new_lo, new_hi, bins)
    point = ~same & (lo == hi)
    if point.any():
        index = np.clip(np.searchsorted(new_edges, lo[point], side="right") - 1, 0, bins - 1)
        np.add.at(out, index, counts[point].sum(axis=1))
    rest = ~same & ~point
    if rest.any():
        edges = histogram_edges(lo[rest], hi[rest], bins).reshape(-1, bins + 1)
        cumulative = np.zeros(edges.shape)
        np.cumsum(counts[rest], axis=1, out=cumulative[:, 1:])
        at_new = np.stack([np.interp(new_edges, e, c) for e, c in zip(edges, cumulative)])
        out += np.diff(np.rint(at_new), axis=1).astype(np.int64).sum(axis=0)
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
