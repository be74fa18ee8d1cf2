"""The widget's payload: the frames of one inspection as compact, JSON-safe columns, with
the fields :mod:`nbinspect.payload_schema` declares.

Built from the frames only (``layers``, ``params`` and, when present, ``stats`` (tensor
rows, and module roll-up rows with ``kind == "module"``, here or in a ``stats_by_module``
frame), ``health`` (computed from ``stats`` when absent), ``compare`` with the two sides'
tensor statistics ``stats_a``/``stats_b``); nothing here looks at a model. Tables travel as
column arrays (one list per field) so a 10,000-module tree costs one key per field, not per
row. Histograms are embedded coarse (a few integer counts); :func:`histogram` gives the
full-resolution one on request. Missing values, NaN and infinities become ``null``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..analyze import compare as _compare
from ..analyze.gc_pause import gc_paused
from ..analyze.health import health_frame
from ..analyze.moments import histogram_edges, rebin_rows
from ..payload_schema import COMPONENT_FIELDS, MODULE_FIELDS, PAYLOAD_VERSION, TENSOR_FIELDS, Field, check_payload
from ..schema import PARAMETER, STATS
from ..sources import ancestors
from .format import is_missing
from .json_export import column_values, jsonable
from .rounding import significant

__all__ = ["INLINE_BINS", "STAT_FIELDS", "build_payload", "histogram", "timeline"]

STAT_FIELDS = ("numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf")
"""Stats columns sent per row, in this order, when a stats frame is present."""
INLINE_BINS = 16
"""Most bins an embedded histogram keeps; finer ones are fetched on demand."""

_MODULE_STATS = "stats_by_module"  # a key of schema.FRAME_KEYS
MATRICES, ALL_VALUES = "weight matrices", "all values"  # what a module's histogram counts


def _round(value: Any, digits: int = 6) -> Any:
    """A float kept to `digits` significant digits (payload size); ints and None pass through."""
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return float(f"{v:.{digits}g}") if math.isfinite(v) else None
    return value


def _rounded(values: list) -> list:
    """``[_round(v) for v in values]`` for plain JSON values (floats, ints, None and others)."""
    return [float(f"{v:.6g}") if type(v) is float and math.isfinite(v) else _round(v) for v in values]


def _numbers(column: pd.Series) -> list:
    """``_round(jsonable(v))`` of each cell of `column`."""
    if column.dtype.kind in "iub":  # numpy or nullable integers and booleans: nothing to round
        return column_values(column)
    if isinstance(column.dtype, np.dtype) and column.dtype.kind == "f":
        values = column.to_numpy(dtype=np.float64)
        out = significant(values)
        for i in np.flatnonzero(~np.isfinite(values)).tolist():
            out[i] = None
        return out
    return _rounded(column_values(column))


def _is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _positions(keys: pd.Series, names: list[str]) -> list[int]:
    """For each of `names`, the position of the last of `keys` equal to it, or -1."""
    last = dict(zip(keys.tolist(), range(len(keys))))
    return [last.get(n, -1) for n in names]


def _picked(values: list | None, where: list[int]) -> list:
    """``values[i]`` for each position of `where`, None where it is -1 or without values."""
    if values is None:
        return [None] * len(where)
    return [None if i < 0 else values[i] for i in where]


def _aligned(
    frame: pd.DataFrame | None, column: str, names: list[str], key: str = "name", number: bool = False
) -> list:
    """Per name: the JSON value of `column` in the last row whose `key` is that name (None
    without one); rounded when `number`."""
    if frame is None or key not in frame.columns:
        return [None] * len(names)
    values = (_numbers if number else column_values)(frame[column]) if column in frame.columns else None
    return _picked(values, _positions(frame[key], names))


def _hist_groups(counts: list, edges: list) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The rows of (`counts`, `edges`) that make a histogram (arrays of n >= 1 counts and n + 1
    finite edges), by bin count n: n -> (row positions, counts (k, n) int64, edges (k, n + 1))."""
    arrays = _stackable(counts, edges)
    if arrays:  # as a stats frame holds them: stacked at once
        c = np.concatenate([counts[i] for i in arrays]).reshape(len(arrays), -1)  # np.stack, 4x faster
        e = np.concatenate([edges[i] for i in arrays]).reshape(len(arrays), -1)
        if c.shape[1] and e.shape[1] == c.shape[1] + 1:
            c, e = c.astype(np.int64, copy=False), e.astype(np.float64, copy=False)
            finite = np.isfinite(e).all(axis=1)
            return {c.shape[1]: (np.array(arrays)[finite], c[finite], e[finite])}
    rows: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for i, (c, e) in enumerate(zip(counts, edges)):
        if _is_array(c) and _is_array(e):
            c, e = np.asarray(c, dtype=np.int64), np.asarray(e, dtype=np.float64)
            if c.ndim == e.ndim == 1 and c.size and e.size == c.size + 1:
                rows.setdefault(c.size, []).append((i, c, e))
    groups = {}
    for n, found in rows.items():
        c, e = np.stack([r[1] for r in found]), np.stack([r[2] for r in found])
        finite = np.isfinite(e).all(axis=1)
        groups[n] = (np.array([r[0] for r in found])[finite], c[finite], e[finite])
    return groups


def _stackable(counts: list, edges: list) -> list[int]:
    """The rows whose counts and edges are 1-D numpy arrays, when those are of one shape and
    dtype each and no other row has a histogram (no list or tuple); else []."""
    rows = []
    for i, (c, e) in enumerate(zip(counts, edges)):
        if type(c) is np.ndarray and type(e) is np.ndarray:
            rows.append(i)
        elif _is_array(c) and _is_array(e):
            return []
    kinds = {(counts[i].shape, counts[i].dtype, edges[i].shape, edges[i].dtype) for i in rows}
    return rows if len(kinds) == 1 and counts[rows[0]].ndim == edges[rows[0]].ndim == 1 else []


def _coarse_rows(counts: list, edges: list, bins: int = INLINE_BINS) -> list[dict | None]:
    """Per row: its histogram with adjacent bins merged down to at most `bins`, edges as
    [lo, hi] when they are uniform (widths equal to the first within 1e-6), or None."""
    out: list[dict | None] = [None] * len(counts)
    for rows, c, e in _hist_groups(counts, edges).values():
        for i, hist in zip(rows.tolist(), _coarse_group(c, e, bins)):
            out[i] = hist
    return out


def _coarse_group(counts: np.ndarray, edges: np.ndarray, bins: int = INLINE_BINS) -> list[dict]:
    """:func:`_coarse_rows` of histograms of one bin count: counts (k, n), finite edges (k, n + 1)."""
    n = counts.shape[1]
    starts = np.arange(0, n, max(1, math.ceil(n / bins)))
    merged = np.add.reduceat(counts, starts, axis=1).tolist()
    cut = np.concatenate([edges[:, starts], edges[:, -1:]], axis=1)
    widths = np.diff(cut, axis=1)
    # np.allclose(row, row[0], rtol=1e-6, atol=0) is np.isclose(...).all(): the same test row by row
    close = np.isclose(widths, widths[:, :1], rtol=1e-6, atol=0)
    uniform: list[bool] = close.all(axis=1).tolist()  # type: ignore[assignment]  # numpy's stubs: a bool or an array
    ends = significant(cut[:, [0, -1]].ravel())
    return [
        {"e": ends[2 * j : 2 * j + 2] if uniform[j] else significant(cut[j]), "c": merged[j]}
        for j in range(len(merged))
    ]


def _full_histogram(row: Mapping[str, Any]) -> dict | None:
    counts, edges = row.get("hist_counts"), row.get("hist_edges")
    if not _is_array(counts) or not _is_array(edges):
        return None
    return {"e": [_round(x) for x in np.asarray(edges, dtype=np.float64)], "c": [int(x) for x in np.asarray(counts)]}


def _hists(frame: pd.DataFrame) -> tuple[list, list]:
    """The frame's histogram columns as lists (of None without them)."""
    if {"hist_counts", "hist_edges"} <= set(frame.columns):
        return frame["hist_counts"].tolist(), frame["hist_edges"].tolist()
    return [None] * len(frame), [None] * len(frame)


def _stats_rows(frame: pd.DataFrame | None, names: list[str]) -> dict[str, list] | None:
    """Per name: "stats" (STAT_FIELDS values), "hist" (coarse) and "note" lists aligned with
    `names`, or None without rows. A name in several rows takes the last."""
    if frame is None or frame.empty or "name" not in frame.columns:
        return None
    where = _positions(frame["name"], names)
    fields = [_numbers(frame[f]) if f in frame.columns else None for f in STAT_FIELDS]
    present = [f for f in fields if f is not None]
    rows = list(zip(*[f if f is not None else [None] * len(frame) for f in fields])) if present else None
    out: dict[str, list] = {
        "stats": [None if row is None else list(row) for row in _picked(rows, where)],
        "hist": _picked(_coarse_rows(*_hists(frame)), where),
        "note": _picked(column_values(frame["note"]) if "note" in frame.columns else None, where),
    }
    if not any(out["note"]):
        del out["note"]
    return out


def _split_stats(frames: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
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


def _compare_rows(frames: Mapping[str, pd.DataFrame], names: list[str]) -> dict[str, list] | None:
    """Per tensor: [status, rel change], the delta columns copied as is, and before/after
    histograms over one range."""
    frame = frames.get("compare")
    if frame is None or "name" not in frame.columns:
        return None
    status, change = _aligned(frame, "status", names), _aligned(frame, "rel_change", names, number=True)
    where = _positions(frame["name"], names)
    out: dict[str, list] = {"compare": [None if i < 0 else [s, c] for i, s, c in zip(where, status, change)]}
    out["hist_a"], out["hist_b"] = _shared_range(frames.get("stats_a"), frames.get("stats_b"), names)
    aligned = frame.set_index("name").reindex(names).reset_index()
    out.update({f.name: _numbers(aligned[f.source]) for f in TENSOR_FIELDS if f.source and f.when == "compare"})
    return out


def _side_hists(frame: pd.DataFrame | None, names: list[str]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The histograms of the last stats row of each name, by bin count: n -> (positions in
    `names`, counts (k, n), edges (k, n + 1))."""
    if frame is None or "name" not in frame.columns:
        return {}
    where = np.array(_positions(frame["name"], names), dtype=np.int64)
    out = {}
    for n, (rows, counts, edges) in _hist_groups(*_hists(frame)).items():
        slot = np.full(len(frame), -1)
        slot[rows] = np.arange(len(rows))
        picked = slot[where] if len(where) else where  # row of each name within this group, or -1
        at = np.flatnonzero((where >= 0) & (picked >= 0))
        out[n] = (at, counts[picked[at]], edges[picked[at]])
    return out


def _shared_range(
    side_a: pd.DataFrame | None, side_b: pd.DataFrame | None, names: list[str]
) -> tuple[list[dict | None], list[dict | None]]:
    """Per name, the two sides' histograms moved onto one range, so before and after line up:
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
    out: tuple[list[dict | None], list[dict | None]] = ([None] * len(names), [None] * len(names))
    for s, groups in enumerate(sides):
        for n, (at, counts, edges) in groups.items():
            moved = rebin_rows(counts, edges[:, 0], edges[:, -1], lo[at], hi[at])
            new_edges = histogram_edges(lo[at], hi[at], n).reshape(-1, n + 1)  # row by row the scalar call's
            finite = np.isfinite(new_edges).all(axis=1)
            for i, hist in zip(at[finite].tolist(), _coarse_group(moved[finite], new_edges[finite])):
                out[s][i] = hist
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
        if kind == PARAMETER and is_missing(tied) and _is_array(shape) and len(shape) >= 2
    }
    frame = tensor_stats[tensor_stats["name"].isin(matrices)]
    groups = _hist_groups(*_hists(frame))
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


def _copied(frame: pd.DataFrame, fields: tuple[Field, ...], when: str | None) -> dict[str, list]:
    """The fields copied as is from frame columns, of those present `when`."""
    return {f.name: column_values(frame[f.source]) for f in fields if f.source is not None and f.when == when}


@gc_paused()  # it allocates a few objects per module and tensor: the collector's passes cost more
def build_payload(
    name: str,
    framework: str,
    totals: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    sides: tuple[str, str] | None = None,
    timeline: Mapping[str, Any] | None = None,
) -> dict:
    """The widget payload of one inspection (its fields: :mod:`nbinspect.payload_schema`).
    `frames` needs ``layers`` and ``params``; the ``stats``, module stats, ``health`` and
    ``compare`` frames and the layers' trace columns are used when present and left out when
    absent. `sides` names a comparison's two sides. `timeline` (metrics over training steps,
    see :func:`timeline`) is added when given."""
    layers, params = frames["layers"], frames["params"]
    module_names = layers["name"].tolist()
    index = {n: i for i, n in enumerate(module_names)}
    modules: dict[str, list] = {
        "key": [n.rsplit(".", 1)[-1] for n in module_names],
        "parent": [-1 if is_missing(p) else index[p] for p in layers["parent"].tolist()],
        **_copied(layers, MODULE_FIELDS, None),
        "attrs": [a if a else None for a in column_values(layers["attrs"])],
    }
    if "flops" in layers.columns and layers["flops"].notna().any():
        modules.update(_copied(layers, MODULE_FIELDS, "trace"))

    tensor_names = params["name"].tolist()
    tensors: dict[str, list] = {
        "module": [index[m] for m in params["module"].tolist()],
        "key": [n.rsplit(".", 1)[-1] for n in tensor_names],
        **_copied(params, TENSOR_FIELDS, None),
    }
    tensor_stats, module_stats = _split_stats(frames)
    tensors.update(_stats_rows(tensor_stats, tensor_names) or {})
    modules.update(_stats_rows(module_stats, module_names) or {})
    if "stats" in modules or "stats" in tensors:
        _add_health(modules, tensors, _health_rows(frames, tensor_stats), module_names, tensor_names)
        matrices = _matrix_histograms(tensor_stats, params)
        if "hist" not in modules:
            modules["hist"] = [None] * len(module_names)
        modules["hist_scope"] = [
            MATRICES if n in matrices else (ALL_VALUES if h else None) for n, h in zip(module_names, modules["hist"])
        ]
        shown = [n for n in module_names if n in matrices]
        merged = dict(zip(shown, _coarse_rows([matrices[n][0] for n in shown], [matrices[n][1] for n in shown])))
        modules["hist"] = [merged.get(n, h) for n, h in zip(module_names, modules["hist"])]
        if "stats" not in modules:
            modules["stats"] = [None] * len(module_names)
    compare = _compare_rows(frames, tensor_names)
    comparison = None
    if compare is not None:
        tensors.update(compare)
        frame = frames["compare"]
        rolled = _compare.by_module(frame)
        for f in MODULE_FIELDS:
            if f.when == "compare":
                modules[f.name] = _aligned(rolled, f.name, module_names, key="group", number=True)
        components = _compare.by_component(frame)
        a, b = sides or ("a", "b")
        comparison = {
            "a": a,
            "b": b,
            "components": {f.name: _numbers(components[f.source]) for f in COMPONENT_FIELDS if f.source},
        }

    payload = {
        "version": PAYLOAD_VERSION,
        "model": {"name": name, "framework": framework},
        "totals": jsonable(dict(totals)),
        "stat_fields": list(STAT_FIELDS),
        "modules": modules,
        "tensors": tensors,
        **({"comparison": comparison} if comparison else {}),
    }
    if timeline is not None:
        payload["timeline"] = dict(timeline)
    check_payload(payload)
    return payload


def _add_health(
    modules: dict[str, list],
    tensors: dict[str, list],
    health: pd.DataFrame | None,
    module_names: list[str],
    tensor_names: list[str],
) -> None:
    rows = None if health is None else health[health["kind"] != "module"]
    rolled = None if health is None else health[health["kind"] == "module"]
    tensors["problems"] = _aligned(rows, "problems", tensor_names)
    modules["problems"] = _aligned(rolled, "problems", module_names)
    modules["problem_tensors"] = _aligned(rolled, "problem_tensors", module_names)


def timeline(history: pd.DataFrame, keys: list[str], title: str = "") -> dict:
    """Metrics over training steps for the widget's small plots: ``steps`` and one
    ``{"key", "values"}`` series per key (missing values as null)."""
    steps = [int(s) for s in history["step"]] if len(history) else []
    series = [{"key": k, "values": _numbers(history[k])} for k in keys if k in history]
    return {"title": title, "steps": steps, "series": series}


@gc_paused()
def histogram(frames: Mapping[str, pd.DataFrame], name: str, kind: str = "tensor") -> dict | None:
    """The full-resolution histogram of one tensor (``kind="tensor"``) or module (of its weight
    matrices when it has any, as in the payload), or None."""
    if kind != "tensor":
        matrices = (
            _matrix_histograms(_split_stats(frames)[0], frames["params"], only=name) if "params" in frames else {}
        )
        if name in matrices:
            counts, edges = matrices[name]
            return _full_histogram({"hist_counts": counts, "hist_edges": edges})
    frame = _split_stats(frames)[0 if kind == "tensor" else 1]
    if frame is None or "hist_counts" not in frame.columns:
        return None
    rows = frame[frame["name"] == name]
    return None if rows.empty else _full_histogram(rows.iloc[0].to_dict())
