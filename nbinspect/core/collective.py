"""Sources whose values are spread over processes (a DTensor-sharded model; a vLLM engine's
tensor-parallel ranks): what the analyzers ask of them, and the one merge of per-rank
statistics both use.

Every rank reduces its own share of each tensor to :class:`~.moments.Moments`; the merge
then runs in two rounds: the ranks' moments are merged exactly (Chan's formula), the ranks
agree on each tensor's range (global min and max), and each bins its share on those edges,
so the summed histogram is exact. How a round reaches the ranks (a collective, an RPC) is
the caller's `ask`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from .moments import Moments, merge
from .source import ModelSource, TensorEntry

__all__ = ["Collective", "Results", "merge_ranks", "with_histogram"]

Results = dict[Hashable, tuple[Moments | None, str | None]]
"""Per tensor key: its Moments (None when it has no values) and a note."""


class Collective(Protocol):
    """What an analyzer asks of a source spread over ranks (``source.collective``)."""

    def receives(self) -> bool:
        """Whether this rank receives the frames."""
        ...

    def combine(self, results: Results, bins: int) -> Results:
        """Global Moments per storage key from this rank's Moments of its share."""
        ...

    def shares(self, a: TensorEntry, b: TensorEntry, other: ModelSource) -> tuple[Any, Any]:
        """This rank's share of `a` (of this source) and of `b` (of `other`) over the same elements."""
        ...

    def add_up(self, sums: list[float], maxima: list[float]) -> tuple[list[float], list[float]]:
        """`sums` added and `maxima` maxed over the ranks (NaN wins a max)."""
        ...


def with_histogram(total: Moments, counts: np.ndarray, lo: float, hi: float) -> Moments:
    """`total` (merged from every rank's part) with the exact counts binned on [lo, hi]."""
    return total._replace(hist=np.asarray(counts, np.int64), hist_lo=lo, hist_hi=hi, hist_sample=total.count)


def merge_ranks(
    ranks: Sequence[Mapping[Hashable, tuple[Moments | None, str | None]]],
    histograms: Callable[[dict[Hashable, tuple[float, float]]], Mapping[Hashable, np.ndarray]],
) -> Results:
    """The global Moments of every key from each rank's (`ranks`, round one);
    `histograms(ranges)` runs round two: every rank bins its share of each key on the agreed
    range, and it returns the counts summed over the ranks, by key."""
    merged: Results = {}
    for key in ranks[0]:
        parts = [r[key] for r in ranks]
        notes = [note for _, note in parts if note]
        note = notes[0] if notes else None
        if any(m is None for m, _ in parts):
            merged[key] = (None, note or "no values on some rank")
        else:
            merged[key] = (merge([m for m, _ in parts if m is not None]), note)
    ranges = {k: (float(m.min), float(m.max)) for k, (m, _) in merged.items() if m is not None and m.count}
    counts = histograms(ranges)
    for key, (lo, hi) in ranges.items():
        total, note = merged[key]
        assert total is not None
        merged[key] = (with_histogram(total, counts[key], lo, hi), note)
    return merged
