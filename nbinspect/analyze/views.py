"""What the views show, decided once from the frames: the health frame (when the statistics
allow it), each module's histogram of its weight matrices, the folds of repeated blocks with
their pooled statistics, histograms and health, a comparison's before/after histograms on one
shared range, and the comparison's roll-ups. The payload, the standalone page and the
on-demand histograms read these; no renderer (nor the front-end) computes them again."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..core.moments import Moments, histogram_edges, merge, rebin_rows, spread
from ..core.source import ancestors
from ..payload_schema import ALL_VALUES, MATRICES
from ..schema import PARAMETER, STATS, histogram_groups, is_array, is_missing
from . import compare as _compare
from .fold import Folds, fold_repeats
from .health import PROBLEMS, health_frame

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
    tensor_stats: pd.DataFrame | None,
    params: pd.DataFrame,
    only: str | None = None,
    groups: Mapping[int, Sequence[str]] | None = None,
) -> dict[Any, tuple]:
    """Per module path: (counts, edges) of its subtree's weight matrices (parameters with 2+
    dims, a tied path once), merged onto the range that holds them all. With `only`, the
    module `only` alone (one merge, of its subtree's rows: what a histogram request needs).
    With `groups` (an int key -> module paths), also under each key the matrices of all those
    modules taken together (a fold's members: the rule of a module applied to their union)."""
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
    by_bins = histogram_groups(*_hists(frame))
    bins, slot = [0] * len(frame), np.full(len(frame), -1)  # per frame row: bin count, row in its group
    kept = []
    for n, (rows, counts, edges) in by_bins.items():
        slot[rows] = np.arange(len(rows))
        for i in rows.tolist():
            bins[i] = n
        kept += _uniform(rows, counts, edges)
    modules = frame["module"].tolist()
    members: dict[Any, list[int]] = {}
    for i in sorted(kept):  # in frame order, as each path's members were always gathered
        for path in ancestors(modules[i]) if only is None else (only,):
            members.setdefault(path, []).append(i)
    for key, paths in (groups or {}).items():
        if union := [i for p in paths for i in members.get(p, ())]:
            members[key] = union
    size = {p: found.pop() for p, rows in members.items() if len(found := {bins[i] for i in rows}) == 1}
    out: dict[Any, tuple] = {}
    for n, (_, counts, edges) in by_bins.items():
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


# the schema.STATS columns a fold pools
_POOLED = ("numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf")


def _row_moments(stats: pd.DataFrame, rows: list[int], binned: set[int]) -> dict[int, Moments]:
    """Per row (a position in the tensor `stats` frame) with statistics: the Moments it was
    written from. count = numel - nan - inf, m2 = std² · count (std is the population std),
    abs_sum = abs_mean · count, zeros = the zero fraction · numel; the histogram's range is
    its edges' ends, or [min, max] for a point mass (histogram_edges widens lo == hi by 0.5
    each way). Rows not in `binned`, and a row whose histogram is missing or malformed, get
    one bin holding their count: their moments still pool, at no cost of re-binning
    (:func:`_pooled` then shows no histogram)."""
    if not rows or not set(_POOLED) <= set(stats.columns):
        return {}
    at = np.asarray(rows, dtype=np.int64)
    numel, mean, std, low, high, abs_mean, _, zeros, nan, inf = (
        stats[c].to_numpy(dtype=np.float64, na_value=np.nan)[at] for c in _POOLED
    )
    has = ~(np.isnan(numel) | np.isnan(nan) | np.isnan(inf))  # without: no statistics (meta, skipped)
    count = numel - nan - inf
    one_bin: dict[int, np.ndarray] = {}  # read only: rows of one count share one
    hists = []
    for c in np.nan_to_num(count).astype(np.int64).tolist():
        if (h := one_bin.get(c)) is None:
            h = one_bin[c] = np.array([c], np.int64)
        hists.append(h)
    lo, hi = low.copy(), high.copy()
    wanted = [k for k, row in enumerate(rows) if row in binned]
    counts, edges = _hists(stats.iloc[at[wanted]])
    for _, (found, c, e) in histogram_groups(list(counts), list(edges)).items():
        where = np.asarray(wanted, dtype=np.int64)[found]
        lo[where], hi[where] = e[:, 0], e[:, -1]
        for k, h in zip(where.tolist(), c):
            hists[k] = h
    point = low == high
    lo[point] = hi[point] = low[point]
    sample = stats["hist_sample"].to_numpy(dtype=np.float64, na_value=np.nan)[at] if "hist_sample" in stats else count
    sample = np.where(np.isnan(sample), count, sample)
    ints = (
        np.nan_to_num(v).astype(np.int64).tolist() for v in (numel, count, np.rint(zeros * numel), nan, inf, sample)
    )
    n, c, z, na, nf, taken = ints
    floats = (v.tolist() for v in (mean, std * std * count, abs_mean * count, low, high, lo, hi))
    mean_, m2, abs_sum, low_, high_, lo_, hi_ = floats
    fields = zip(n, c, mean_, m2, abs_sum, low_, high_, z, na, nf, hists, lo_, hi_, taken)
    out = {}
    for row, keep, m in zip(rows, has.tolist(), Moments.from_rows(fields)):
        if keep:
            out[row] = m if m.count else Moments.empty(m.bins, m.numel, m.nan, m.inf)
    return out


def _pooled(parts: list[Moments], bins_shown: bool) -> tuple[Moments | None, bool]:
    """``merge(parts)`` (None without parts), and whether its histogram is one to show: all
    parts binned alike. Parts of different bin counts pool their moments on one bin each."""
    if not parts:
        return None, False
    sizes = {p.bins for p in parts}
    if len(sizes) > 1:
        parts = [p._replace(hist=np.array([p.count], np.int64)) for p in parts]
    return merge(parts), bins_shown and len(sizes) == 1


def _fold_groups(
    layers: pd.DataFrame,
    params: pd.DataFrame,
    folds: Folds,
    tensor_stats: pd.DataFrame | None,
    module_stats: pd.DataFrame | None,
    health: pd.DataFrame | None,
    matrices: Mapping[Any, tuple],
) -> pd.DataFrame:
    """One row per fold, in the order of its first member: ``name`` (the fold row's path: its
    parent's path and the members' range, 'blocks.0–11'), ``label`` ('0–11 ×12'), ``first`` and ``rows`` (the
    members' module rows); with module statistics, the schema.STATS columns of all the
    members' parameters pooled exactly (:func:`core.moments.merge` of the tensors' Moments, a
    storage shared by paths once, as each module's own row counts them); ``hist_counts`` /
    ``hist_edges`` / ``hist_scope``: what the row shows, the members' weight matrices taken
    together when they have some (as a module's row shows its own), else all pooled values;
    with health, ``problems`` (the union, in PROBLEMS order) and ``problem_tensors``."""
    names = layers["name"].tolist()
    order = sorted(folds.first)
    records: dict[str, list] = {
        "name": [],
        "label": [folds.first[f].label for f in order],
        "first": order,
        "rows": [folds.first[f].rows for f in order],
    }
    parents = layers["parent"].tolist()
    for f in order:
        parent = "" if is_missing(parents[f]) else parents[f]
        fold_range = folds.first[f].label.partition(" ×")[0]
        records["name"].append(f"{parent}.{fold_range}" if parent else fold_range)
    frame = pd.DataFrame(records)
    if frame.empty:
        return frame
    members = [[names[r] for r in frame.at[j, "rows"]] for j in range(len(frame))]
    if module_stats is not None and tensor_stats is not None:
        _pool_statistics(frame, layers, params, folds, tensor_stats, module_stats, matrices)
    hist_counts, hist_edges = (
        list(frame.pop(c)) if c in frame else [None] * len(frame) for c in ("hist_counts", "hist_edges")
    )
    scope: list[str | None] = [ALL_VALUES if h is not None else None for h in hist_counts]
    for j, f in enumerate(order):
        if f in matrices:
            hist_counts[j], hist_edges[j] = matrices[f]
            scope[j] = MATRICES
    frame["hist_counts"], frame["hist_edges"], frame["hist_scope"] = hist_counts, hist_edges, scope
    if health is not None:
        rolled = health[health["kind"] == "module"].drop_duplicates("name", keep="last").set_index("name")
        problems, tensors = [], []
        for paths in members:
            known = rolled.reindex(paths)
            labels = {x for p in known["problems"].dropna() for x in str(p).split(", ") if x}
            problems.append(", ".join(x for x in PROBLEMS if x in labels))
            # health counts a storage at its first path only: the members' counts add up to distinct tensors
            tensors.append(int(known["problem_tensors"].fillna(0).sum()))
        frame["problems"], frame["problem_tensors"] = problems, tensors
    return frame


def _pool_statistics(
    frame: pd.DataFrame,
    layers: pd.DataFrame,
    params: pd.DataFrame,
    folds: Folds,
    tensor_stats: pd.DataFrame,
    module_stats: pd.DataFrame,
    matrices: Mapping[Any, tuple],
) -> None:
    """Add to `frame` (see :func:`_fold_groups`) the pooled statistics of each fold's members,
    and their pooled histogram where the fold has no weight matrices in `matrices`."""
    row_of = {name: i for i, name in enumerate(layers["name"].tolist())}
    module_row = np.array([row_of.get(m, -1) for m in tensor_stats["module"].tolist()], dtype=np.int64)
    parameter = (tensor_stats["kind"] == PARAMETER).fillna(False).to_numpy(dtype=bool)  # as module roll-ups pool
    names = tensor_stats["name"]
    first = names.map(params.drop_duplicates("name", keep="last").set_index("name")["tied_to"])
    storage = pd.factorize(first.where(first.notna(), names).to_numpy(dtype=object))[0]  # a tied path: its first's
    held: list[np.ndarray] = []  # per fold: its tensor rows, a storage once (at its first row)
    for f in frame["first"].tolist():
        fold = folds.first[f]
        at = np.flatnonzero(parameter & (module_row >= f) & (module_row < fold.stop))
        held.append(at[np.sort(np.unique(storage[at], return_index=True)[1])])
    # the pooled histogram is shown where the members have no weight matrices (else theirs is)
    wanted = ["hist_counts" in module_stats.columns and f not in matrices for f in frame["first"]]
    binned = {i for at, want in zip(held, wanted) if want for i in at.tolist()}
    moments = _row_moments(tensor_stats, sorted({i for at in held for i in at.tolist()}), binned)
    numel = tensor_stats["numel"].to_numpy(dtype=np.float64, na_value=np.nan)
    nan_ = math.nan
    values: dict[str, list] = {c: [] for c in (*_POOLED, "hist_counts", "hist_edges")}
    for at, want in zip(held, wanted):
        values["numel"].append(int(np.nansum(numel[at])))  # left-out tensors too, as a module's own row
        m, shown = _pooled([moments[i] for i in at.tolist() if i in moments], want)
        if m is None:
            for c in _POOLED[1:]:
                values[c].append(nan_)
            values["hist_counts"].append(None)
            values["hist_edges"].append(None)
            continue
        std, l2, abs_mean = spread(m.count, m.mean, m.m2, m.abs_sum)
        row = (m.mean, float(std), m.min, m.max, float(abs_mean), float(l2), m.zeros / m.numel if m.numel else nan_)
        for c, v in zip(_POOLED[1:8], row):
            values[c].append(v)
        values["nan"].append(m.nan)
        values["inf"].append(m.inf)
        values["hist_counts"].append(m.hist if shown and m.count else None)
        values["hist_edges"].append(m.edges if shown and m.count else None)
    for c in _POOLED:
        if c in module_stats.columns:  # the fields the members' own rows have
            frame[c] = pd.array(values[c], dtype="Int64") if c in ("numel", "nan", "inf") else values[c]
    frame["hist_counts"], frame["hist_edges"] = values["hist_counts"], values["hist_edges"]


class ViewData:
    """What the views show besides the frames (see the module docstring)."""

    def __init__(self, frames: Mapping[str, pd.DataFrame], folds: Folds | None = None):
        params = frames.get("params")
        layers = frames.get("layers")
        tensor_stats, self.module_stats = split_stats(frames)
        self.tensor_stats = tensor_stats
        has_tree = params is not None and layers is not None
        self.health = _health_rows(frames, tensor_stats) if has_tree and tensor_stats is not None else None
        # which repeated blocks fold (analyze.fold), as the text tree folds them (its `folds`, when given)
        if folds is None:
            folds = fold_repeats(layers, params) if has_tree else Folds({}, set())
        self.folds: Folds = folds
        names = [] if layers is None else layers["name"].tolist()
        members = {f: [names[r] for r in fold.rows] for f, fold in self.folds.first.items()}
        # module path -> (counts, edges) of its subtree's weight matrices; a fold's first row -> its members'
        found = {} if params is None else _matrix_histograms(tensor_stats, params, groups=members)
        self.matrices: dict[str, tuple] = {k: v for k, v in found.items() if isinstance(k, str)}
        # one row per fold: its members, label, pooled statistics, histogram and health
        self.fold_groups = (
            _fold_groups(layers, params, self.folds, tensor_stats, self.module_stats, self.health, found)
            if has_tree and layers is not None and params is not None
            else pd.DataFrame({"name": [], "label": [], "first": [], "rows": []})
        )
        frame = frames.get("compare")
        self.compared = frame is not None and "name" in frame.columns
        self.shared: tuple[tuple, tuple] | None = None
        self.by_module = self.by_component = None
        self.by_fold: pd.DataFrame | None = None  # each fold's members rolled up as one (its row's change)
        if self.compared and frame is not None and params is not None:
            self.shared = _shared_range(frames.get("stats_a"), frames.get("stats_b"), params["name"].tolist())
            # a Comparison hands in the roll-ups it keeps; frames alone get them computed here
            self.by_module = frames.get("compare_by_module")
            self.by_component = frames.get("compare_by_component")
            if self.by_module is None:
                self.by_module = _compare.by_module(frame)
            if self.by_component is None:
                self.by_component = _compare.by_component(frame)
            fold_members = {
                name: [names[r] for r in rows]
                for name, rows in zip(self.fold_groups["name"].tolist(), self.fold_groups["rows"].tolist())
            }
            self.by_fold = _compare.by_subtrees(frame, fold_members)


def view_data(frames: Mapping[str, pd.DataFrame], folds: Folds | None = None) -> ViewData:
    """Everything the views show besides the frames, computed once; `folds`: those of the
    frames' ``layers`` and ``params`` (``fold_repeats``), when the caller has them already."""
    return ViewData(frames, folds)


def module_histogram(frames: Mapping[str, pd.DataFrame], name: str) -> tuple[Any, Any] | None:
    """(counts, edges) of the weight matrices under module `name` (one merge, of its subtree's rows)."""
    if "params" not in frames:
        return None
    return _matrix_histograms(split_stats(frames)[0], frames["params"], only=name).get(name)
