"""The widget's payload: the frames of one inspection as compact, JSON-safe columns, with
the fields :mod:`nbinspect.payload_schema` declares.

Built from the frames only (``layers``, ``params`` and, when present, ``stats`` (tensor
rows, and module roll-up rows with ``kind == "module"``, here or in a ``stats_by_module``
frame), ``health``, ``compare`` with the two sides'
tensor statistics ``stats_a``/``stats_b``); nothing here looks at a model. Tables travel as
column arrays (one list per field) so a 10,000-module tree costs one key per field, not per
row. Histograms are embedded coarse (a few integer counts); :func:`histogram` gives the
full-resolution one on request. Missing values, NaN and infinities become ``null``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..payload_schema import (
    ALL_VALUES,
    COMPONENT_FIELDS,
    MATRICES,
    MODULE_FIELDS,
    PAYLOAD_VERSION,
    TENSOR_FIELDS,
    Field,
    check_payload,
)
from ..schema import histogram_groups, is_array, is_missing
from .json_export import column_values, jsonable
from .rounding import significant

__all__ = ["INLINE_BINS", "STAT_FIELDS", "build_payload", "histogram", "payload_text", "timeline"]

STAT_FIELDS = ("numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf")
"""Stats columns sent per row, in this order, when a stats frame is present."""
INLINE_BINS = 16
"""Most bins an embedded histogram keeps; finer ones are fetched on demand."""


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


def _coarse_rows(counts: list, edges: list, bins: int = INLINE_BINS) -> list[dict | None]:
    """Per row: its histogram with adjacent bins merged down to at most `bins`, edges as
    [lo, hi] when they are uniform (widths equal to the first within 1e-6), or None."""
    out: list[dict | None] = [None] * len(counts)
    for rows, c, e in histogram_groups(counts, edges).values():
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
    if not is_array(counts) or not is_array(edges):
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


def _compare_rows(frames: Mapping[str, pd.DataFrame], names: list[str], views: Any) -> dict[str, list] | None:
    """Per tensor: [status, rel change], the delta columns copied as is, and before/after
    histograms over one range."""
    frame = frames.get("compare")
    if frame is None or "name" not in frame.columns:
        return None
    status, change = _aligned(frame, "status", names), _aligned(frame, "change", names, number=True)
    where = _positions(frame["name"], names)
    out: dict[str, list] = {"compare": [None if i < 0 else [s, c] for i, s, c in zip(where, status, change)]}
    out["hist_a"], out["hist_b"] = (_coarse_rows(*side) for side in views.shared)
    delta = frames.get("delta_hist")
    out["hist_delta"] = [None] * len(names)
    if delta is not None and len(delta):
        coarse = _coarse_rows(delta["hist_counts"].tolist(), delta["hist_edges"].tolist())
        out["hist_delta"] = _picked(coarse, _positions(delta["name"], names))
    aligned = frame.set_index("name").reindex(names).reset_index()
    out.update({f.name: _numbers(aligned[f.source]) for f in TENSOR_FIELDS if f.source and f.when == "compare"})
    return out


def _copied(frame: pd.DataFrame, fields: tuple[Field, ...], when: str | None) -> dict[str, list]:
    """The fields copied as is from frame columns, of those present `when`."""
    return {f.name: column_values(frame[f.source]) for f in fields if f.source is not None and f.when == when}


def build_payload(
    name: str,
    framework: str,
    totals: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    sides: tuple[str, str] | None = None,
    timeline: Mapping[str, Any] | None = None,
    *,
    views: Any,
    graph: Mapping[str, Any] | None = None,
) -> dict:
    """The widget payload of one inspection (its fields: :mod:`nbinspect.payload_schema`).
    `frames` needs ``layers`` and ``params``; the ``stats``, module stats, ``health`` and
    ``compare`` frames and the layers' trace columns are used when present and left out when
    absent. `views` is what ``analyze.views.view_data(frames)`` decided (health, module
    histograms, a comparison's shared ranges and roll-ups). `sides` names a comparison's
    two sides. `timeline` (metrics over training steps, see :func:`timeline`) and `graph` (the
    dataflow, ``analyze.graph.graph_view``) are added when given."""
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
    tensor_stats, module_stats = views.tensor_stats, views.module_stats
    tensors.update(_stats_rows(tensor_stats, tensor_names) or {})
    modules.update(_stats_rows(module_stats, module_names) or {})
    if "stats" in modules or "stats" in tensors:
        _add_health(modules, tensors, views.health, module_names, tensor_names)
        matrices = views.matrices
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
    compare = _compare_rows(frames, tensor_names, views) if views.compared else None
    comparison = None
    if compare is not None:
        tensors.update(compare)
        rolled = views.by_module
        for f in MODULE_FIELDS:
            if f.when == "compare":
                modules[f.name] = _aligned(rolled, f.name, module_names, key="group", number=True)
        components = views.by_component
        a, b = sides or ("a", "b")
        comparison = {
            "a": a,
            "b": b,
            "components": {f.name: _numbers(components[f.source]) for f in COMPONENT_FIELDS if f.source},
        }

    payload = {
        "version": PAYLOAD_VERSION,
        "model": {"name": name, "framework": framework},
        "totals": jsonable({**totals, **_plan_totals(frames.get("memory"))}),
        "stat_fields": list(STAT_FIELDS),
        "modules": modules,
        "tensors": tensors,
        "folds": _folds(views, "stats" in modules, compare is not None),
        **({"comparison": comparison} if comparison else {}),
    }
    if timeline is not None:
        payload["timeline"] = dict(timeline)
    if graph is not None:
        payload["graph"] = dict(graph)
    check_payload(payload)
    return payload


def payload_text(payload: Mapping[str, Any]) -> str:
    """`payload` as the compact JSON the widget's message, the saved view and the standalone
    page carry (NaN refused: the payload writes missing numbers as null)."""
    return json.dumps(payload, allow_nan=False, separators=(",", ":"))


def _plan_totals(memory: pd.DataFrame | None) -> dict[str, Any]:
    """A memory plan's total (``plan_bytes``) and what it assumed (``plan_options``), for the
    header; {} without a plan."""
    if memory is None or "component" not in memory.columns:
        return {}
    whole = memory[memory["layer"].isna()].set_index("component")
    if "total" not in whole.index or is_missing(whole.at["total", "bytes"]):
        return {}
    assumed = [whole.at[c, "note"] for c in ("optimizer_state", "activations") if c in whole.index]
    return {"plan_bytes": int(whole.at["total", "bytes"]), "plan_options": "; ".join(str(a) for a in assumed)}


def _folds(views: Any, with_stats: bool, compared: bool = False) -> dict[str, list]:
    """The folds table: each fold's path, label and member rows, and `with_stats` what its
    row shows (pooled statistics, histogram, health), as ``views.fold_groups`` decided them;
    `compared`: each fold's change over its members as one (``views.by_fold``)."""
    groups = views.fold_groups
    paths = groups["name"].tolist()
    out: dict[str, list] = {
        "path": paths,
        "label": groups["label"].tolist(),
        "rows": [[int(r) for r in rows] for rows in groups["rows"]],
    }
    if with_stats:
        shown = _stats_rows(groups, paths) if len(groups) else None
        out["stats"] = shown["stats"] if shown else []
        out["hist"] = shown["hist"] if shown else []
        out["hist_scope"] = column_values(groups["hist_scope"]) if len(groups) else []
        for f in ("problems", "problem_tensors"):
            out[f] = column_values(groups[f]) if f in groups.columns else [None] * len(paths)
    if compared:
        out["change"] = _aligned(views.by_fold, "change", paths, key="group", number=True)
    return out


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


def timeline(history: pd.DataFrame, keys: list[str], title: str = "", offered: list[str] | None = None) -> dict:
    """Metrics over training steps for the widget's charts: ``steps`` and one ``{"key",
    "values"}`` series per key (missing values as null), `keys` first (drawn: ``shown`` of
    them), then the other `offered` keys (in the widget's metric picker)."""
    steps = [int(s) for s in history["step"]] if len(history) else []
    drawn = [k for k in keys if k in history]
    more = [k for k in offered or [] if k in history and k not in drawn]
    series = [{"key": k, "values": _numbers(history[k])} for k in drawn + more]
    return {"title": title, "steps": steps, "series": series, "shown": len(drawn)}


def histogram(views: Any, name: str, kind: str = "tensor") -> dict | None:
    """The full-resolution histogram of one tensor (``kind="tensor"``) or module (of its weight
    matrices when it has any, as in the payload) or fold (by its path), or None."""
    if kind != "tensor" and name in views.matrices:
        counts, edges = views.matrices[name]
        return _full_histogram({"hist_counts": counts, "hist_edges": edges})
    folds = views.fold_groups
    if kind != "tensor" and "hist_counts" in folds.columns and name in set(folds["name"]):
        return _full_histogram(folds[folds["name"] == name].iloc[0].to_dict())
    frame = views.tensor_stats if kind == "tensor" else views.module_stats
    if frame is None or "hist_counts" not in frame.columns:
        return None
    rows = frame[frame["name"] == name]
    return None if rows.empty else _full_histogram(rows.iloc[0].to_dict())
