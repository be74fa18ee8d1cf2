"""The widget's payload: the frames of one inspection as compact, JSON-safe columns.

Built from the frames only (``layers``, ``params`` and, when present, ``stats``,
``stats_by_module`` and ``compare``); nothing here looks at a model. Tables travel as
column arrays (one list per field) so a 10,000-module tree costs one key per field, not per
row. Histograms are embedded coarse (a few integer counts); :func:`histogram` gives the
full-resolution one on request. Missing values, NaN and infinities become ``null``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .format import is_missing
from .json_export import jsonable

__all__ = ["PAYLOAD_VERSION", "STAT_FIELDS", "INLINE_BINS", "build_payload", "histogram"]

PAYLOAD_VERSION = 1
STAT_FIELDS = ("numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf")
"""Stats columns sent per row, in this order, when a stats frame is present."""
INLINE_BINS = 16
"""Most bins an embedded histogram keeps; finer ones are fetched on demand."""

_TRACE = ("output_shapes", "flops", "activation_bytes")
_MODULE_STATS_FRAMES = ("stats_by_module", "module_stats")


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
    return {"e": [_round(x) for x in np.asarray(edges, dtype=np.float64)], "c": [int(x) for x in counts]}


def _stats_rows(frame: pd.DataFrame | None, names: list[str]) -> tuple[list, list] | None:
    """(stats lists, coarse histograms) aligned with `names`, or None without a frame."""
    if frame is None or "name" not in frame.columns:
        return None
    fields = [f for f in STAT_FIELDS if f in frame.columns]
    by_name = {row["name"]: row for row in frame.to_dict("records")}
    values, hists = [], []
    for name in names:
        row = by_name.get(name)
        if row is None:
            values.append(None)
            hists.append(None)
            continue
        values.append([_round(jsonable(row[f])) if f in row else None for f in STAT_FIELDS] if fields else None)
        hist = None
        if "hist_counts" in row and "hist_edges" in row:
            hist = _coarse(row["hist_counts"], row["hist_edges"])
        hists.append(hist)
    return values, hists


def _compare_rows(frame: pd.DataFrame | None, names: list[str]) -> list | None:
    if frame is None or "name" not in frame.columns:
        return None
    by_name = {row["name"]: row for row in frame.to_dict("records")}
    out = []
    for name in names:
        row = by_name.get(name)
        out.append(None if row is None else [jsonable(row.get("status")), _round(jsonable(row.get("rel_change")))])
    return out


def _module_stats_frame(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame | None:
    for key in _MODULE_STATS_FRAMES:
        if key in frames:
            return frames[key]
    return None


def build_payload(
    name: str, framework: str, totals: Mapping[str, Any], frames: Mapping[str, pd.DataFrame]
) -> dict:
    """The widget payload of one inspection. `frames` needs ``layers`` and ``params``; the
    ``stats``, module stats and ``compare`` frames and the layers' trace columns are used
    when present and left out of the payload when absent."""
    layers, params = frames["layers"], frames["params"]
    module_names = layers["name"].tolist()
    index = {n: i for i, n in enumerate(module_names)}
    parents = [-1 if is_missing(p) else index[p] for p in layers["parent"].tolist()]
    keys = [n.rsplit(".", 1)[-1] for n in module_names]
    modules: dict[str, list] = {
        "key": keys,
        "parent": parents,
        "type": _column(layers, "type"),
        "alias_of": _column(layers, "alias_of"),
        "params": _column(layers, "params"),
        "trainable": _column(layers, "trainable_params"),
        "frozen": _column(layers, "frozen_params"),
        "param_bytes": _column(layers, "param_bytes"),
        "buffer_bytes": _column(layers, "buffer_bytes"),
        "attrs": [a if a else None for a in _column(layers, "attrs")],
    }
    traced = "flops" in layers.columns and layers["flops"].notna().any()
    if traced:
        for column in _TRACE:
            modules[column] = _column(layers, column)

    tensor_names = params["name"].tolist()
    tensors: dict[str, list] = {
        "module": [index[m] for m in params["module"].tolist()],
        "key": [n.rsplit(".", 1)[-1] for n in tensor_names],
        "kind": _column(params, "kind"),
        "shape": _column(params, "shape"),
        "dtype": _column(params, "dtype"),
        "numel": _column(params, "numel"),
        "bytes": _column(params, "bytes"),
        "requires_grad": _column(params, "requires_grad"),
        "tied_to": _column(params, "tied_to"),
    }
    stats = _stats_rows(frames.get("stats"), tensor_names)
    if stats is not None:
        tensors["stats"], tensors["hist"] = stats
    module_stats = _stats_rows(_module_stats_frame(frames), module_names)
    if module_stats is not None:
        modules["stats"], modules["hist"] = module_stats
    compare = _compare_rows(frames.get("compare"), tensor_names)
    if compare is not None:
        tensors["compare"] = compare

    return {
        "version": PAYLOAD_VERSION,
        "model": {"name": name, "framework": framework},
        "totals": jsonable(dict(totals)),
        "stat_fields": list(STAT_FIELDS),
        "modules": modules,
        "tensors": tensors,
    }


def histogram(frames: Mapping[str, pd.DataFrame], name: str, kind: str = "tensor") -> dict | None:
    """The full-resolution histogram of one tensor (``kind="tensor"``) or module, or None."""
    frame = frames.get("stats") if kind == "tensor" else _module_stats_frame(frames)
    if frame is None or "hist_counts" not in frame.columns:
        return None
    rows = frame[frame["name"] == name]
    return None if rows.empty else _full_histogram(rows.iloc[0].to_dict())
