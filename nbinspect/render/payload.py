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
from ..analyze.health import health_frame
from ..analyze.moments import histogram_edges, rebin_sum
from ..payload_schema import COMPONENT_FIELDS, MODULE_FIELDS, PAYLOAD_VERSION, TENSOR_FIELDS, Field, check_payload
from ..schema import PARAMETER, STATS
from ..sources import ancestors
from .format import is_missing
from .json_export import jsonable

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


def _is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _column(frame: pd.DataFrame, name: str) -> list:
    return jsonable(frame[name].tolist())


def _coarse(counts: Any, edges: Any, bins: int = INLINE_BINS) -> dict | None:
    """Merge adjacent bins down to at most `bins`; edges as [lo, hi] when they are uniform."""
    if not _is_array(counts) or not _is_array(edges):
        return None
    c = np.asarray(counts, dtype=np.int64)
    e = np.asarray(edges, dtype=np.float64)
    if c.size == 0 or e.size != c.size + 1 or not np.isfinite(e).all():
        return None
    step = max(1, math.ceil(c.size / bins))
    starts = np.arange(0, c.size, step)
    merged = np.add.reduceat(c, starts)
    cut = np.append(e[starts], e[-1])
    widths = np.diff(cut)
    uniform = widths.size < 2 or np.allclose(widths, widths[0], rtol=1e-6, atol=0)
    kept = [cut[0], cut[-1]] if uniform else cut
    return {"e": [_round(x) for x in kept], "c": merged.tolist()}


def _full_histogram(row: Mapping[str, Any]) -> dict | None:
    counts, edges = row.get("hist_counts"), row.get("hist_edges")
    if not _is_array(counts) or not _is_array(edges):
        return None
    return {"e": [_round(x) for x in np.asarray(edges, dtype=np.float64)], "c": [int(x) for x in np.asarray(counts)]}


def _stats_rows(frame: pd.DataFrame | None, names: list[str]) -> dict[str, list] | None:
    """Per name: "stats" (STAT_FIELDS values), "hist" (coarse) and "note" lists aligned with
    `names`, or None without rows."""
    if frame is None or frame.empty or "name" not in frame.columns:
        return None
    by_name = {row["name"]: row for row in frame.to_dict("records")}
    out: dict[str, list] = {"stats": [], "hist": [], "note": []}
    for name in names:
        row = by_name.get(name, {})
        has_values = any(f in row for f in STAT_FIELDS)
        out["stats"].append([_round(jsonable(row.get(f))) for f in STAT_FIELDS] if has_values else None)
        out["hist"].append(_coarse(row.get("hist_counts"), row.get("hist_edges")))
        out["note"].append(jsonable(row.get("note")))
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


def _by_name(frame: pd.DataFrame | None, key: str = "name") -> dict[str, dict]:
    return {} if frame is None or key not in frame.columns else {row[key]: row for row in frame.to_dict("records")}


def _compare_rows(frames: Mapping[str, pd.DataFrame], names: list[str]) -> dict[str, list] | None:
    """Per tensor: [status, rel change], the delta columns copied as is, and before/after
    histograms over one range."""
    frame = frames.get("compare")
    if frame is None or "name" not in frame.columns:
        return None
    by_name = _by_name(frame)
    side_a, side_b = _by_name(frames.get("stats_a")), _by_name(frames.get("stats_b"))
    out: dict[str, list] = {"compare": [], "hist_a": [], "hist_b": []}
    for name in names:
        row = by_name.get(name)
        out["compare"].append(
            None if row is None else [jsonable(row.get("status")), _round(jsonable(row.get("rel_change")))]
        )
        a, b = _shared_range(side_a.get(name), side_b.get(name))
        out["hist_a"].append(a)
        out["hist_b"].append(b)
    aligned = frame.set_index("name").reindex(names).reset_index()
    out.update(
        {
            f.name: [_round(v) for v in _column(aligned, f.source)]
            for f in TENSOR_FIELDS
            if f.source and f.when == "compare"
        }
    )
    return out


def _shared_range(a: Mapping | None, b: Mapping | None) -> tuple[dict | None, dict | None]:
    """Two stats rows' histograms moved onto one range, so before and after line up."""
    hists = [None if r is None else _hist_of(r) for r in (a, b)]
    present = [h for h in hists if h is not None]
    if not present:
        return None, None
    lo = min(float(e[0]) for _, e in present)
    hi = max(float(e[-1]) for _, e in present)
    out: list[dict | None] = []
    for h in hists:
        if h is None:
            out.append(None)
            continue
        counts, edges = h
        moved = rebin_sum(counts[None, :], edges[:1], edges[-1:], lo, hi)
        out.append(_coarse(moved, histogram_edges(lo, hi, counts.size)))
    return out[0], out[1]


def _hist_of(row: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    counts, edges = row.get("hist_counts"), row.get("hist_edges")
    if not _is_array(counts) or not _is_array(edges):
        return None
    c, e = np.asarray(counts, dtype=np.int64), np.asarray(edges, dtype=np.float64)
    return (c, e) if c.size and e.size == c.size + 1 and np.isfinite(e).all() else None


def _uniform(edges: np.ndarray) -> bool:
    """Edges as numpy.histogram draws them (what rebin_sum assumes)."""
    span = float(edges[-1] - edges[0])
    return bool(np.allclose(edges, histogram_edges(edges[0], edges[-1], edges.size - 1), rtol=0, atol=1e-9 * span))


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
    matrices = {
        name
        for name, kind, shape, tied in zip(params["name"], params["kind"], params["shape"], params["tied_to"])
        if kind == PARAMETER and is_missing(tied) and _is_array(shape) and len(shape) >= 2
    }
    members: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    frame = tensor_stats[tensor_stats["name"].isin(matrices)]
    for module, counts, edges in zip(frame["module"], frame["hist_counts"], frame["hist_edges"]):
        hist = _hist_of({"hist_counts": counts, "hist_edges": edges})
        if hist is None or not _uniform(hist[1]):
            continue
        for path in ancestors(module) if only is None else (only,):
            members.setdefault(path, []).append(hist)
    out = {}
    for path, hists in members.items():
        if len({c.size for c, _ in hists}) != 1:
            continue
        lo = np.array([e[0] for _, e in hists])
        hi = np.array([e[-1] for _, e in hists])
        counts = rebin_sum(np.stack([c for c, _ in hists]), lo, hi, lo.min(), hi.max())
        out[path] = (counts, histogram_edges(lo.min(), hi.max(), counts.size))
    return out


def _health_rows(frames: Mapping[str, pd.DataFrame], tensor_stats: pd.DataFrame | None) -> pd.DataFrame | None:
    health = frames.get("health")
    complete = tensor_stats is not None and set(STATS.names) <= set(tensor_stats.columns)
    if health is None and complete and tensor_stats is not None and not tensor_stats.empty:
        health = health_frame(tensor_stats, frames["params"], frames["layers"]["name"].tolist())
    return health


def _copied(frame: pd.DataFrame, fields: tuple[Field, ...], when: str | None) -> dict[str, list]:
    """The fields copied as is from frame columns, of those present `when`."""
    return {f.name: _column(frame, f.source) for f in fields if f.source is not None and f.when == when}


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
        "attrs": [a if a else None for a in _column(layers, "attrs")],
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
        modules["hist"] = [_coarse(*matrices[n]) if n in matrices else h for n, h in zip(module_names, modules["hist"])]
        if "stats" not in modules:
            modules["stats"] = [None] * len(module_names)
    compare = _compare_rows(frames, tensor_names)
    comparison = None
    if compare is not None:
        tensors.update(compare)
        frame = frames["compare"]
        rolled = _by_name(_compare.by_module(frame), "group")
        for f in MODULE_FIELDS:
            if f.when == "compare":
                modules[f.name] = [_round(jsonable(rolled.get(n, {}).get(f.name))) for n in module_names]
        components = _compare.by_component(frame)
        a, b = sides or ("a", "b")
        comparison = {
            "a": a,
            "b": b,
            "components": {
                f.name: [_round(v) for v in _column(components, f.source)] for f in COMPONENT_FIELDS if f.source
            },
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
    rows = _by_name(None if health is None else health[health["kind"] != "module"])
    rolled = _by_name(None if health is None else health[health["kind"] == "module"])
    tensors["problems"] = [jsonable(rows.get(n, {}).get("problems")) for n in tensor_names]
    modules["problems"] = [jsonable(rolled.get(n, {}).get("problems")) for n in module_names]
    modules["problem_tensors"] = [jsonable(rolled.get(n, {}).get("problem_tensors")) for n in module_names]


def timeline(history: pd.DataFrame, keys: list[str], title: str = "") -> dict:
    """Metrics over training steps for the widget's small plots: ``steps`` and one
    ``{"key", "values"}`` series per key (missing values as null)."""
    steps = [int(s) for s in history["step"]] if len(history) else []
    series = [{"key": k, "values": [_round(jsonable(v)) for v in history[k].tolist()]} for k in keys if k in history]
    return {"title": title, "steps": steps, "series": series}


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
