"""The widget's payload: the frames of one inspection as compact, JSON-safe columns, with
the fields :mod:`nbinspect.payload_schema` declares.

Built from the frames only (``layers``, ``params`` and, when present, ``stats`` (tensor
rows, and module roll-up rows with ``kind == "module"``, here or in a ``stats_by_module``
frame) and ``compare``); nothing here looks at a model. Tables travel as
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

from ..payload_schema import MODULE_FIELDS, PAYLOAD_VERSION, TENSOR_FIELDS, Field, check_payload
from .format import is_missing
from .json_export import jsonable

__all__ = ["INLINE_BINS", "STAT_FIELDS", "build_payload", "histogram", "timeline"]

STAT_FIELDS = ("numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf")
"""Stats columns sent per row, in this order, when a stats frame is present."""
INLINE_BINS = 16
"""Most bins an embedded histogram keeps; finer ones are fetched on demand."""

_MODULE_STATS = "stats_by_module"  # a key of schema.FRAME_KEYS


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


def _compare_rows(frame: pd.DataFrame | None, names: list[str]) -> list | None:
    if frame is None or "name" not in frame.columns:
        return None
    by_name = {row["name"]: row for row in frame.to_dict("records")}
    out = []
    for name in names:
        row = by_name.get(name)
        out.append(None if row is None else [jsonable(row.get("status")), _round(jsonable(row.get("rel_change")))])
    return out


def _copied(frame: pd.DataFrame, fields: tuple[Field, ...], when: str | None) -> dict[str, list]:
    """The fields copied as is from frame columns, of those present `when`."""
    return {f.name: _column(frame, f.source) for f in fields if f.source is not None and f.when == when}


def build_payload(
    name: str,
    framework: str,
    totals: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    timeline: Mapping[str, Any] | None = None,
) -> dict:
    """The widget payload of one inspection (its fields: :mod:`nbinspect.payload_schema`).
    `frames` needs ``layers`` and ``params``; the ``stats``, module stats and ``compare``
    frames and the layers' trace columns are used when present and left out when absent.
    `timeline` (metrics over training steps, see :func:`timeline`) is added when given."""
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
    compare = _compare_rows(frames.get("compare"), tensor_names)
    if compare is not None:
        tensors["compare"] = compare

    payload = {
        "version": PAYLOAD_VERSION,
        "model": {"name": name, "framework": framework},
        "totals": jsonable(dict(totals)),
        "stat_fields": list(STAT_FIELDS),
        "modules": modules,
        "tensors": tensors,
    }
    if timeline is not None:
        payload["timeline"] = dict(timeline)
    check_payload(payload)
    return payload


def timeline(history: pd.DataFrame, keys: list[str], title: str = "") -> dict:
    """Metrics over training steps for the widget's small plots: ``steps`` and one
    ``{"key", "values"}`` series per key (missing values as null)."""
    steps = [int(s) for s in history["step"]] if len(history) else []
    series = [{"key": k, "values": [_round(jsonable(v)) for v in history[k].tolist()]} for k in keys if k in history]
    return {"title": title, "steps": steps, "series": series}


def histogram(frames: Mapping[str, pd.DataFrame], name: str, kind: str = "tensor") -> dict | None:
    """The full-resolution histogram of one tensor (``kind="tensor"``) or module, or None."""
    frame = _split_stats(frames)[0 if kind == "tensor" else 1]
    if frame is None or "hist_counts" not in frame.columns:
        return None
    rows = frame[frame["name"] == name]
    return None if rows.empty else _full_histogram(rows.iloc[0].to_dict())
