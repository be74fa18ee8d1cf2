"""Plain-text rendering of a comparison: status counts, roll-ups, the most changed tensors."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from .format import format_count, format_shape, is_missing
from .text import table

__all__ = ["CHANGE_DEFINITION", "comparison_text", "groups_table"]

_VALUE_HEADER = ["Elements", "Change", "L2 delta", "Max |delta|", "Cosine", "Mean drift"]
CHANGE_DEFINITION = (
    "Change = ||b - a|| / max(||a||, ||b||): 0 (same) to 2 (sign flipped), defined for tensors that start at zero; "
    "groups: over all their elements as one tensor"
)


def _g(x: Any, digits: int = 3) -> str:
    if is_missing(x):
        return ""
    return "inf" if math.isinf(x) else f"{x:.{digits}g}"


def _fractions(values: Any, k: int) -> list[str]:
    return [""] * k if is_missing(values) else [f"{100 * f:.2f}%" for f in values]


def _values(row: Any, k: int) -> list[str]:
    cosine = "" if is_missing(row.cosine) else f"{row.cosine:.6f}"
    deltas = [_g(row.change), _g(row.l2_delta), _g(row.max_abs_delta), cosine, _g(row.mean_drift)]
    return [format_count(row.numel), *deltas, *_fractions(row.frac_above, k)]


def _threshold_header(thresholds: Sequence[float]) -> list[str]:
    return [f"|delta|>{t:g}" for t in thresholds]


def groups_table(groups: pd.DataFrame, title: str, thresholds: Sequence[float]) -> str:
    """A compare_groups frame as a table; module paths are indented by depth."""
    k = len(thresholds)
    rows = []
    for row in groups.itertuples(index=False):
        label = (
            row.group
            if title != "Module"
            else ("  " * row.group.count(".") + (row.group.rsplit(".", 1)[-1] if row.group else "(all)"))
        )
        if not is_missing(row.layer) and title != "Layer":
            label = f"{row.layer}: {label}"
        rows.append([label or "(none)", format_count(row.tensors), format_count(row.differ), *_values(row, k)])
    header = [title, "Tensors", "Differ", *_VALUE_HEADER, *_threshold_header(thresholds)]
    return table(header, rows, [False] + [True] * (len(header) - 1))


def comparison_text(
    title: str,
    frame: pd.DataFrame,
    overall: pd.DataFrame,
    components: pd.DataFrame,
    thresholds: Sequence[float],
    top: int = 10,
) -> str:
    """The text ``print(comparison)`` shows."""
    heading = f"Compare {title}"
    counts = frame["status"].value_counts()
    status = ", ".join(f"{int(n)} {s}" for s, n in counts.items())
    parts = [heading + "\n" + "=" * len(heading), f"{len(frame):,} tensors: {status}" if len(frame) else "no tensors"]
    if frame["change"].notna().any():
        parts.append(CHANGE_DEFINITION)
    if len(overall) and overall["numel"].iloc[0]:
        parts.append(groups_table(overall.assign(group="(all)"), "Overall", thresholds))
    if len(components):
        parts.append("By component\n" + groups_table(components, "Component", thresholds))
    compared = frame[frame["change"].notna() & (frame["status"] != "same")]
    if len(compared):
        most = compared.sort_values("change", ascending=False, kind="stable").head(top)
        rows = [
            [r.name, r.status, format_shape(r.shape_a), *_values(r, len(thresholds))]
            for r in most.itertuples(index=False)
        ]
        header = ["Tensor", "Status", "Shape", *_VALUE_HEADER, *_threshold_header(thresholds)]
        parts.append(
            f"Most changed tensors (top {len(most)} by change)\n"
            + table(header, rows, [False, False, False] + [True] * (len(header) - 3))
        )
    for status, describe in (
        ("added", lambda r: f"{r.name} {format_shape(r.shape_b)} {r.dtype_b}"),
        ("removed", lambda r: f"{r.name} {format_shape(r.shape_a)} {r.dtype_a}"),
        ("reshaped", lambda r: f"{r.name} {format_shape(r.shape_a)} -> {format_shape(r.shape_b)}"),
        ("dtype_changed", lambda r: f"{r.name} {r.dtype_a} -> {r.dtype_b}"),
    ):
        rows = frame[frame["status"] == status]
        if len(rows):
            lines = [describe(r) for r in rows.head(top).itertuples(index=False)]
            more = f"\n  ... and {len(rows) - top} more" if len(rows) > top else ""
            parts.append(f"{status.replace('_', ' ').capitalize()} ({len(rows)})\n  " + "\n  ".join(lines) + more)
    return "\n\n".join(parts)
