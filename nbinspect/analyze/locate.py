"""``locate()``: where a model's NaN, ±Inf, outliers and dead rows/columns are, exactly
(issue 28). Each tensor is read band by band (``Backend.plane_bands``), never converted
whole; tensors the statistics already clear are not read at all.

Rows are the tensor's output units (its first axis; for a 3-D expert stack ``E × out × in``
the pairs (expert, output)), columns everything after them: a zero row is a dead output
unit, a zero column a dead input feature. A NaN row is not a zero row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..core.plane import Plane, default_plane
from ..schema import LOCATE
from .values import BAND_ELEMENTS, OUTLIER_SIGMA

__all__ = ["KINDS", "Bands", "locate_frame", "locate_sharded"]

KINDS = {
    "nan": ("nan",),
    "inf": ("posinf", "neginf"),
    "posinf": ("posinf",),
    "neginf": ("neginf",),
    "outliers": ("outlier",),
    "zero_rows": ("zero_row",),
    "zero_columns": ("zero_column",),
    "dead": ("zero_row", "zero_column"),
}

# (tensor name, plane, band rows) -> bands of the whole tensor on that plane
Bands = Callable[[str, Plane, int], Iterator[tuple[int, np.ndarray]]]


def _kinds(what: str | Iterable[str]) -> list[str]:
    asked = [what] if isinstance(what, str) else list(what)
    out: list[str] = []
    for w in asked:
        if w not in KINDS:
            raise ValueError(f"locate: unknown {w!r} (one of {', '.join(KINDS)})")
        out += [k for k in KINDS[w] if k not in out]
    return out


class _Hits:
    """The first `first` hits of one kind in index order, and the exact total."""

    def __init__(self, first: int):
        self.first = first
        self.total = 0
        self.items: list[tuple[tuple[int, ...], float]] = []

    def add(self, n: int, found: Callable[[int], list[tuple[tuple[int, ...], float]]]) -> None:
        if n and len(self.items) < self.first:
            self.items += found(self.first - len(self.items))
        self.total += n


def _needs(kinds: list[str], row: Any, k: float) -> list[str]:
    """The kinds this tensor's statistics row cannot rule out (all of them without statistics)."""
    if row is None:
        return kinds
    out = []
    for kind in kinds:
        if kind == "nan" and not row["nan"] > 0:
            continue
        if kind in ("posinf", "neginf") and not row["inf"] > 0:
            continue
        if kind == "outlier" and not (row["std"] > 0 and max(abs(row["min"]), abs(row["max"])) > k * row["std"]):
            continue
        if kind in ("zero_row", "zero_column") and not row["zeros"] > 0:
            continue
        out.append(kind)
    return out


def _std(bands: Iterator[tuple[int, np.ndarray]]) -> float:
    """Population std of the finite values (float64), one pass of sums around the first value."""
    n, s, sq, shift = 0, 0.0, 0.0, None
    for _, x in bands:
        f = x[np.isfinite(x)].astype(np.float64)
        if not f.size:
            continue
        shift = float(f[0]) if shift is None else shift
        f -= shift
        n, s, sq = n + f.size, s + float(f.sum()), sq + float((f * f).sum())
    return math.sqrt(max(sq / n - (s / n) ** 2, 0.0)) if n else math.nan


def _scan(
    name: str, shape: tuple[int, ...], bands: Bands, kinds: list[str], first: int, std: float | None, k: float
) -> dict[str, _Hits]:
    plane = default_plane(shape)
    _n_rows, n_cols = plane.size(shape)
    per_band = max(1, BAND_ELEMENTS // max(1, n_cols))
    hits = {kind: _Hits(first) for kind in kinds}
    if "outlier" in kinds and std is None:
        std = _std(bands(name, plane, per_band))
    limit = k * std if std is not None and math.isfinite(std) and std > 0 else math.inf  # a constant tensor has none
    alive = np.zeros(n_cols, bool) if "zero_column" in kinds else None
    row_axes = bool(plane.rows)

    def cells(x: np.ndarray, mask: np.ndarray, r0: int) -> Callable[[int], list[tuple[tuple[int, ...], float]]]:
        def found(m: int) -> list[tuple[tuple[int, ...], float]]:
            rr, cc = np.nonzero(mask)  # row-major: index order
            return [(plane.index(shape, r0 + int(r), int(c)), float(x[r, c])) for r, c in zip(rr[:m], cc[:m])]

        return found

    for r0, x in bands(name, plane, per_band):
        if {"nan", "posinf", "neginf"} & hits.keys() and not np.isfinite(x.sum(dtype=np.float64)):
            for kind, test in (("nan", np.isnan), ("posinf", np.isposinf), ("neginf", np.isneginf)):
                if kind in hits:
                    mask = test(x)
                    hits[kind].add(int(np.count_nonzero(mask)), cells(x, mask, r0))
        if "outlier" in hits and limit < math.inf:
            with np.errstate(invalid="ignore"):
                mask = (np.abs(x) > limit) & np.isfinite(x)  # ±Inf are listed as such, not as outliers
            hits["outlier"].add(int(np.count_nonzero(mask)), cells(x, mask, r0))
        if "zero_row" in hits and row_axes:
            dead = np.flatnonzero(~np.any(x != 0, axis=1))
            hits["zero_row"].add(dead.size, _rows_found(shape, plane.rows, dead, r0))
        if alive is not None:
            alive |= np.any(x != 0, axis=0)
    if alive is not None and row_axes:
        dead = np.flatnonzero(~alive)
        hits["zero_column"].add(
            dead.size, lambda m: [(_unravel(shape, plane.cols, int(i)), math.nan) for i in dead[:m]]
        )
    return hits


def _rows_found(
    shape: tuple[int, ...], axes: tuple[int, ...], dead: np.ndarray, r0: int
) -> Callable[[int], list[tuple[tuple[int, ...], float]]]:
    return lambda m: [(_unravel(shape, axes, r0 + int(i)), math.nan) for i in dead[:m]]


def _unravel(shape: tuple[int, ...], axes: tuple[int, ...], flat: int) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, [shape[a] for a in axes])) if axes else ()


def locate_frame(
    tensors: Sequence[tuple[str, tuple[int, ...]]],
    bands: Bands,
    what: str | Iterable[str],
    *,
    first: int = 10,
    stats: pd.DataFrame | None = None,
    k: float = OUTLIER_SIGMA,
) -> pd.DataFrame:
    """schema.LOCATE for `tensors` ((name, shape) with values; `bands` reads them). `what`:
    "nan", "inf", "outliers" (|x| > k·std), "zero_rows", "zero_columns", "dead" (both), or a
    list. `stats`: a per-tensor stats frame; tensors it clears are not read."""
    if not (isinstance(first, int) and first >= 0):
        raise ValueError(f"locate: first must be a non-negative int, not {first!r}")
    kinds = _kinds(what)
    by_name = {} if stats is None else {r["name"]: r for r in stats.to_dict("records")}
    records = []
    for name, shape in tensors:
        row = by_name.get(name)
        needed = _needs(kinds, row, k)
        if not needed or math.prod(shape) == 0:
            continue
        std = None if row is None or not math.isfinite(row["std"]) else float(row["std"])
        for kind, h in _scan(name, shape, bands, needed, first, std, k).items():
            for rank, (index, value) in enumerate(h.items):
                records.append(
                    {"tensor": name, "what": kind, "index": index, "value": value, "rank": rank, "total": h.total}
                )
    return LOCATE.build(records)


def locate_sharded(
    source: Any,
    what: str | Iterable[str],
    bands_of: Callable[[Any], Bands],
    *,
    first: int = 10,
    k: float = OUTLIER_SIGMA,
) -> pd.DataFrame | None:
    """schema.LOCATE of a source spread over ranks (a collective: every rank calls it). Each
    rank scans only its own block of each tensor; indices are made global with the block's
    offsets, the first `first` by index are kept and the totals added; a row (column) is dead
    when every rank holding part of it finds its part all zero. 1-D and 2-D tensors (what
    sharding splits: weights, embeddings, biases); others are listed as skipped. `bands_of`
    gives the bands of one local block (a tensor) like :data:`Bands`."""
    kinds = _kinds(what)
    ranks = source.collective
    mine: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    std_sums: list[float] = []
    entries = list(source.unique_tensors().values())
    locals_ = []
    for entry in entries:
        part = ranks.part(entry.name)
        local = entry.values()
        held = part is not None and part.owner and local.numel() > 0
        locals_.append((entry, part, local if held else None))
        n = s = sq = 0.0
        if held and "outlier" in kinds:
            x = local.detach().double().flatten()
            x = x[x.isfinite()]
            n, s, sq = float(x.numel()), float(x.sum()), float((x * x).sum())
        std_sums += [n, s, sq]
    totals = ranks.add_up(std_sums, [])[0] if "outlier" in kinds else std_sums
    for i, (entry, part, local) in enumerate(locals_):
        shape = tuple(entry.shape or ())
        if len(shape) > 2:
            skipped[entry.name] = "a sharded tensor of more than 2 axes: locate it on each rank's block"
            continue
        if local is None:
            continue
        n, s, sq = totals[3 * i : 3 * i + 3]
        std = math.sqrt(max(sq / n - (s / n) ** 2, 0.0)) if n else None
        local_shape = tuple(local.shape)
        cells = [kind for kind in kinds if kind not in ("zero_row", "zero_column")]
        lines = [kind for kind in kinds if kind in ("zero_row", "zero_column")]
        hits = _scan(entry.name, local_shape, bands_of(local), cells, first, std, k) if cells else {}
        if lines:  # every dead line of the block: a line is dead only if all its parts are
            hits.update(_scan(entry.name, local_shape, bands_of(local), lines, math.prod(local_shape), std, k))
        off = part.offsets
        mine[entry.name] = {
            "rows": (off[0], off[0] + local_shape[0]) if local_shape else (0, 1),
            "cols": (off[1], off[1] + local_shape[1]) if len(local_shape) == 2 else (0, 1),
            "hits": {
                kind: (
                    [(_shift(kind, index, off), value) for index, value in h.items],
                    h.total,
                )
                for kind, h in hits.items()
            },
        }
    gathered = ranks.gather((mine, skipped))
    if not ranks.receives():
        return None
    records = []
    names = [e.name for e in entries]
    skipped_all = {name: why for _, sk in gathered for name, why in sk.items()}
    for name in names:
        parts = [g[0][name] for g in gathered if name in g[0]]
        for kind in kinds:
            found = [p["hits"][kind] for p in parts if kind in p["hits"]]
            if not found:
                continue
            if kind in ("zero_row", "zero_column"):
                axis = "rows" if kind == "zero_row" else "cols"
                sets = [({index for index, _ in p["hits"][kind][0]}, p[axis]) for p in parts if kind in p["hits"]]
                candidates = sorted(set().union(*(found_set for found_set, _ in sets)))
                dead = [  # dead in every block that holds part of the line
                    index
                    for index in candidates
                    if all(index in got or not lo <= index[0] < hi for got, (lo, hi) in sets)
                ]
                items, total = [(index, math.nan) for index in dead[:first]], len(dead)
            else:
                items = sorted((hit for h, _ in found for hit in h), key=lambda hit: hit[0])[:first]
                total = sum(t for _, t in found)
            for rank, (index, value) in enumerate(items):
                records.append(
                    {"tensor": name, "what": kind, "index": index, "value": value, "rank": rank, "total": total}
                )
    frame = LOCATE.build(records)
    frame.attrs["skipped"] = skipped_all
    return frame


def _shift(kind: str, index: tuple[int, ...], offsets: tuple[int, ...]) -> tuple[int, ...]:
    """A block's index made global: cells by every offset, a row by the first, a column by the second."""
    if kind == "zero_row":
        return (index[0] + offsets[0],)
    if kind == "zero_column":
        return (index[0] + offsets[1],)
    return tuple(i + o for i, o in zip(index, offsets))
