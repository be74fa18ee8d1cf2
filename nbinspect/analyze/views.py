"""What the views show, decided once from the frames: the health frame (when the statistics
allow it), each module's histogram of its weight matrices, a comparison's before/after
histograms on one shared range, and the comparison's roll-ups. The payload, the standalone
page and the on-demand histograms read these; no renderer computes them again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..core.moments import histogram_edges, rebin_rows
from ..core.source import ancestors
from ..schema import PARAMETER, STATS, histogram_groups, is_array, is_missing
from . import compare as _compare
from .health import health_frame

__all__ = ["ViewData", "split_stats", "view_data"]

_MODULE_STATS = "stats_by_module"  # a key of schema.FRAME_KEYS


def _positions(keys: pd.Series, names: list[str]) -> list[int]:
    """For each of `names`, the position of the last of `keys` equal to it, or -1."""
    last = dict(zip(keys.tolist(), range(len(keys))))
    return [last.get(n, -1) for n in names]


def _hists(frame: pd.DataFrame) -> tuple[list, list]:
    """The frame's histogram columns as lists (of None without them)."""
    if {"hist_counts", "hist_edges"} <= set(frame.columns):
        return frame["hist_counts"].tolist(), frame["hist_edges"].tolist()
    return [None] * len(frame), [None] * len(frame)


def split_stats(frames: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """(tensor rows, module rows): a ``stats`` frame may hold both, told apart by ``kind``."""
    stats = frames.get("stats")
    modules = frames.get(_MODULE_STATS)
    if stats is not None and "kind" in stats.columns:
        is_module = (stats["kind"] == "module").fillna(False).to_numpy(dtype=bool)
        if is_module.any():
            own = stats[is_module]
            modules = own if modules is None else pd.concat([own, modules], ignore_index=True)
        stats = stats[~is_module]
    return stats, modules


def _side_hists(frame: pd.DataFrame | None, names: list[str]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The histograms of the last stats row of each name, by bin count: n -> (positions in
    `names`, counts (k, n), edges (k, n + 1))."""
    if frame is None or "name" not in frame.columns:
        return {}
    where = np.array(_positions(frame["name"], names), dtype=np.int64)
    out = {}
    for n, (rows, counts, edges) in histogram_groups(*_hists(frame)).items():
        slot = np.full(len(frame), -1)
        slot[rows] = np.arange(len(rows))
        picked = slot[where] if len(where) else where  # row of each name within this group, or -1
        at = np.flatnonzero((where >= 0) & (picked >= 0))
        out[n] = (at, counts[picked[at]], edges[picked[at]])
    return out


def _shared_range(side_a: pd.DataFrame | None, side_b: pd.DataFrame | None, names: list[str]) -> tuple[tuple, tuple]:
    """Per side, (counts, edges) per name: the two sides' histograms moved onto one range, so before and after line up:
    the least first edge and the greatest last edge of the two (a's on a tie, as Python's
    min and max give)."""
    sides = _side_hists(side_a, names), _side_hists(side_b, names)
    first, last = np.full((2, len(names)), np.nan), np.full((2, len(names)), np.nan)
    for s, groups in enumerate(sides):
        for at, _, edges in groups.values():
            first[s, at], last[s, at] = edges[:, 0], edges[:, -1]
    a_missing = np.isnan(first[0])
    lo = np.where(a_missing | (first[1] < first[0]), first[1], first[0])
    hi = np.where(a_missing | (last[1] > last[0]), last[1], last[0])
    none = [None] * len(names)
    out: tuple[tuple[list, list], tuple[list, list]] = (list(none), list(none)), (list(none), list(none))
    for s, groups in enumerate(sides):
        for n, (at, counts, edges) in groups.items():
            moved = rebin_rows(counts, edges[:, 0], edges[:, -1], lo[at], hi[at])
            new_edges = histogram_edges(lo[at], hi[at], n).reshape(-1, n + 1)  # row by row the scalar call's
            finite = np.isfinite(new_edges).all(axis=1)
            for i, c, e in zip(at[finite].tolist(), moved[finite], new_edges[finite]):
                out[s][0][i], out[s][1][i] = c, e
    return out


def _matrix_histograms(
    tensor_stats: pd.DataFrame | None, params: pd.DataFrame, only: str | None = None
) -> dict[str, tuple]:
    """Per module path: (counts, edges) of its subtree's weight matrices (parameters with 2+
    dims, a tied path once), merged onto the range that holds them all. With `only`, the
    module `only` alone (one merge, of its subtree's rows: what a histogram request needs)."""
    if tensor_stats is None or not {"name", "module", "hist_counts", "hist_edges"} <= set(tensor_stats.columns):
        return {}
    if only:  # "" is the root: every row is in its subtree
        owners = tensor_stats["module"]
        tensor_stats = tensor_stats[(owners == only) | owners.str.startswith(only + ".", na=False)]
        params = params[params["name"].isin(tensor_stats["name"])]
    columns = (params[c].tolist() for c in ("name", "kind", "shape", "tied_to"))
    matrices = {
        name
        for name, kind, shape, tied in zip(*columns)
        if kind == PARAMETER and is_missing(tied) and is_array(shape) and len(shape) >= 2
    }
    frame = tensor_stats[tensor_stats["name"].isin(matrices)]
    groups = histogram_groups(*_hists(frame))
    bins, slot = [0] * len(frame), np.full(len(frame), -1)  # per frame row: bin count, row in its group
    kept = []
    for n, (rows, counts, edges) in groups.items():
        slot[rows] = np.arange(len(rows))
        for i in rows.tolist():
            bins[i] = n
        kept += _uniform(rows, counts, edges)
    modules = frame["module"].tolist()
    members: dict[str, list[int]] = {}
    for i in sorted(kept):  # in frame order, as each path's members were always gathered
        for path in ancestors(modules[i]) if only is None else (only,):
            members.setdefault(path, []).append(i)
    size = {p: found.pop() for p, rows in members.items() if len(found := {bins[i] for i in rows}) == 1}
    out: dict[str, tuple] = {}
    for n, (_, counts, edges) in groups.items():
        paths = [p for p in members if size.get(p) == n]  # a path's matrices have one bin count, or none is shown
        if paths:
            out.update(zip(paths, _merged([members[p] for p in paths], counts, edges, slot)))
    return {p: out[p] for p in members if p in out}


def _merged(
    runs: list[list[int]], counts: np.ndarray, edges: np.ndarray, slot: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per run of frame rows (their histograms: rows `slot[i]` of `counts` and `edges`): their
    sum moved onto the range that holds them all, with rebin_sum's arithmetic, and its edges."""
    sizes = [len(r) for r in runs]
    at = slot[[i for r in runs for i in r]]
    first, last = edges[at, 0], edges[at, -1]
    lo, hi = _run_ranges(sizes, first, last)
    each = np.repeat(np.arange(len(runs)), sizes)
    moved = rebin_rows(counts[at], first, last, lo[each], hi[each])
    totals = np.add.reduceat(moved, np.cumsum([0, *sizes[:-1]]), axis=0)
    n = counts.shape[1]
    return list(zip(totals, histogram_edges(lo, hi, n).reshape(-1, n + 1)))


def _run_ranges(sizes: list[int], first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least of `first` and the greatest of `last` over each run of `sizes` values. Where
    that is zero, numpy's min and max of the run's own array decide between 0.0 and -0.0,
    as they always did; any other value has one spelling."""
    starts = np.cumsum([0, *sizes[:-1]])
    lo, hi = np.minimum.reduceat(first, starts), np.maximum.reduceat(last, starts)
    for k in np.flatnonzero((lo == 0) | (hi == 0)).tolist():
        run = slice(starts[k], starts[k] + sizes[k])
        lo[k], hi[k] = first[run].min(), last[run].max()
    return lo, hi


def _uniform(rows: np.ndarray, counts: np.ndarray, edges: np.ndarray) -> list[int]:
    """Those of `rows` (with these counts and edges) whose edges are as numpy.histogram draws
    them (what rebin_sum assumes): each within 1e-9 of the span of ``histogram_edges``."""
    n = counts.shape[1]
    drawn = histogram_edges(edges[:, 0], edges[:, -1], n).reshape(-1, n + 1)  # row by row the scalar call's
    span = (edges[:, -1] - edges[:, 0])[:, None]
    return rows[np.isclose(edges, drawn, rtol=0, atol=1e-9 * span).all(axis=1)].tolist()


def _health_rows(frames: Mapping[str, pd.DataFrame], tensor_stats: pd.DataFrame | None) -> pd.DataFrame | None:
    health = frames.get("health")
    complete = tensor_stats is not None and set(STATS.names) <= set(tensor_stats.columns)
    if health is None and complete and tensor_stats is not None and not tensor_stats.empty:
        health = health_frame(tensor_stats, frames["params"], frames["layers"]["name"].tolist())
    return health


class ViewData:
    """What the views show besides the frames (see the module docstring)."""

    def __init__(self, frames: Mapping[str, pd.DataFrame]):
        params = frames.get("params")
        tensor_stats, self.module_stats = split_stats(frames)
        self.tensor_stats = tensor_stats
        has_tree = params is not None and "layers" in frames
        self.health = _health_rows(frames, tensor_stats) if has_tree and tensor_stats is not None else None
        # module path -> (counts, edges) of its subtree's weight matrices
        self.matrices: dict[str, tuple] = {} if params is None else _matrix_histograms(tensor_stats, params)
        frame = frames.get("compare")
        self.compared = frame is not None and "name" in frame.columns
        self.shared: tuple[tuple, tuple] | None = None
        self.by_module = self.by_component = None
        if self.compared and frame is not None and params is not None:
            self.shared = _shared_range(frames.get("stats_a"), frames.get("stats_b"), params["name"].tolist())
            # a Comparison hands in the roll-ups it keeps; frames alone get them computed here
            self.by_module = frames.get("compare_by_module")
            self.by_component = frames.get("compare_by_component")
            if self.by_module is None:
                self.by_module = _compare.by_module(frame)
            if self.by_component is None:
                self.by_component = _compare.by_component(frame)


def view_data(frames: Mapping[str, pd.DataFrame]) -> ViewData:
    """Everything the views show besides the frames, computed once."""
    return ViewData(frames)


def module_histogram(frames: Mapping[str, pd.DataFrame], name: str) -> tuple[Any, Any] | None:
    """(counts, edges) of the weight matrices under module `name` (one merge, of its subtree's rows)."""
    if "params" not in frames:
        return None
    return _matrix_histograms(split_stats(frames)[0], frames["params"], only=name).get(name)
