"""Plain-text renderings of the frames: tables and the summary `print(inspection)` shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..schema import UNKNOWN_TYPE
from ..terminal import safe_text
from .format import (
    format_bytes,
    format_count,
    format_flops,
    format_percent,
    format_shape,
    is_missing,
    trainable_status,
)

__all__ = ["health_block", "layer_tree", "summary", "table"]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """Columns padded to their widest cell; `right` says which are right-aligned. Cells are
    shown with control characters escaped (a name from a file stays on its row)."""
    rows = [[safe_text(c) for c in r] for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def _tree_prefixes(layers: pd.DataFrame) -> list[str]:
    """Box-drawing prefixes ('├─ ', '│  └─ ', ...) for rows in pre-order."""
    last_child: dict[str, str] = {}
    names, parents, depths = (layers[c].tolist() for c in ("name", "parent", "depth"))
    for name, parent in zip(names, parents):
        if not is_missing(parent):
            last_child[parent] = name
    open_levels: dict[int, bool] = {}  # depth -> does that ancestor have siblings still to come
    prefixes = []
    for name, parent, depth in zip(names, parents, depths):
        if depth == 0:
            prefixes.append("")
            continue
        is_last = last_child[parent] == name
        open_levels[depth] = not is_last
        bars = "".join("│  " if open_levels.get(d) else "   " for d in range(1, depth))
        prefixes.append(bars + ("└─ " if is_last else "├─ "))
    return prefixes


def layer_tree(
    layers: pd.DataFrame, total_params: int, depth: int | None = None, title: str = "", folds: Any = None
) -> str:
    """The module tree as a table, down to `depth` (None: all levels). Repeated blocks fold
    into one row (``0–11 ×12``, their total) over the first block's rows; `folds` (from
    ``analyze.fold.fold_repeats``) says which."""
    folds, hidden = (folds.first, folds.hidden) if folds is not None else ({}, set())
    positions = [i for i in range(len(layers)) if i not in hidden]
    shown = layers.iloc[positions]
    prefixes = _tree_prefixes(shown)
    traced = layers["output_shapes"].notna().any()
    header = ["Module", "Type"] + (["Output shape"] if traced else []) + ["Params", "Share", "Trainable"]
    rows, folded = [], False
    for position, prefix, row in zip(positions, prefixes, shown.itertuples(index=False)):
        if depth is not None and row.depth > depth:
            continue
        fold = folds.get(position)
        folded = folded or fold is not None
        count = fold.members if fold else 1
        # the name below its parent, as registered: a child named "a.b" shows as "a.b"
        local = row.name[len(row.parent) + 1 :] if not is_missing(row.parent) and row.parent else row.name
        key = fold.label if fold else local
        label = prefix + (key if row.name else title or row.type)
        kind = row.type if is_missing(row.alias_of) else f"{row.type} (same as {row.alias_of})"
        params = row.params * count
        share = format_percent(params, total_params)
        cells = [label, kind] + ([format_shape(row.output_shapes)] if traced else [])
        cells += [format_count(params), share, trainable_status(row.trainable_params, row.frozen_params)]
        rows.append(cells)
    right = [False, False] + ([False] if traced else []) + [True, True, False]
    note = (
        "\n(×N: N consecutive blocks of equal structure, their total; the rows under it show the first)"
        if folded
        else ""
    )
    return table(header, rows, right) + note


def _summary_block(totals: Mapping[str, int]) -> str:
    unique, by_path = totals["total_params"], totals["total_params_by_path"]
    lines = [
        ("Parameters", format_count(unique), format_bytes(totals["param_bytes"])),
        ("  trainable", format_count(totals["trainable_params"]), ""),
        ("  non-trainable", format_count(totals["non_trainable_params"]), ""),
    ]
    activated = totals.get("activated_params")
    if activated is not None:
        share = f"{format_percent(activated, unique)} of them: top-k routed experts and all the rest" if unique else ""
        lines.insert(1, ("  activated per token", format_count(activated), share))
    if by_path != unique:
        lines.append(("  counted by path", format_count(by_path), "shared tensors counted at every path"))
    lines += [
        ("Buffers", format_count(totals["buffer_numel"]), format_bytes(totals["buffer_bytes"])),
        ("Modules", format_count(totals["num_modules"]), ""),
    ]
    flops = totals.get("flops")
    if flops is not None:  # after a traced forward pass
        lines.append(("FLOPs (forward)", format_flops(flops), "a multiply-add is 2"))
    if totals.get("backward_flops") is not None:
        lines.append(("FLOPs (backward)", format_flops(totals["backward_flops"]), ""))
    if totals.get("activation_bytes") is not None:
        lines.append(("Activations", "", f"{format_bytes(totals['activation_bytes'])} saved for backward"))
    return table(["Summary", "", ""], lines, [False, True, False])


def _by_type_block(by_type: pd.DataFrame) -> str:
    rows = [
        [
            r.type,
            format_count(r.modules),
            format_count(r.params),
            format_percent(r.share, 100),
            format_bytes(r.param_bytes),
        ]
        for r in by_type.itertuples(index=False)
    ]
    return table(
        ["Parameters by module type", "Modules", "Params", "Share", "Memory"], rows, [False, True, True, True, True]
    )


def health_block(tensors: pd.DataFrame, counts: Mapping[str, int], limit: int = 12) -> str:
    """'Problems: 2 tensors with NaN, 1 with all zero' and the first `limit` of `tensors`
    (the health rows of the tensors with a problem)."""
    parts = [f"{n:,} {'tensor' if n == 1 else 'tensors'} with {label}" for label, n in counts.items()]
    rows = [
        [r.name, r.problems, format_count(r.nan) if r.nan else "", format_count(r.inf) if r.inf else ""]
        for r in tensors.head(limit).itertuples(index=False)
    ]
    more = f"\n... and {len(tensors) - limit:,} more (insp.health lists them all)" if len(tensors) > limit else ""
    listing = table(["Tensor", "Problem", "NaN", "Inf"], rows, [False, False, True, True])
    return "Problems: " + "; ".join(parts) + "\n" + listing + more


def summary(
    title: str,
    framework: str,
    totals: Mapping[str, int],
    layers: pd.DataFrame,
    by_type: pd.DataFrame,
    depth: int | None = 3,
    problems: str | None = None,
    folds: Any = None,
) -> str:
    """The text `print(inspection)` shows: problems first (when any), summary, layer tree to
    `depth` (repeated blocks folded as `folds` says), parameters by type."""
    deepest = int(layers["depth"].max()) if len(layers) else 0
    shown = "all levels" if depth is None or depth >= deepest else f"depth <= {depth} of {deepest}"
    heading = f"{title} ({framework})"
    parts = [
        heading + "\n" + "=" * len(heading),
        *([problems] if problems else []),
        _summary_block(totals),
        f"Layers ({shown})\n" + layer_tree(layers, totals["total_params"], depth, title, folds),
    ]
    if len(by_type) and set(by_type["type"]) != {UNKNOWN_TYPE}:  # a checkpoint alone has no types
        parts.append(_by_type_block(by_type))
    return "\n\n".join(parts)
