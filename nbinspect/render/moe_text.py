"""Text of a mixture-of-experts summary: totals, then one row per run of equal MoE layers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_count, format_percent, is_missing
from .text import table

__all__ = ["moe_text"]

_NUMBER = re.compile(r"\d+")


def _pattern(name: str) -> tuple[str, list[int]]:
    """'model.layers.3.mlp.experts' -> ('model.layers.#.mlp.experts', [3])."""
    return _NUMBER.sub("#", name), [int(n) for n in _NUMBER.findall(name)]


def _equal(a: Any, b: Any) -> bool:
    return (is_missing(a) and is_missing(b)) or (not is_missing(a) and not is_missing(b) and a == b)


def _runs(frame: pd.DataFrame) -> list[tuple[str, pd.Series, int]]:
    """(label, first row, count) per run of consecutive rows equal but for one layer number."""
    values = ["layout", "experts", "top_k", "expert_params", "shared_params"]
    runs: list[tuple[str, pd.Series, int]] = []
    rows = list(frame.iterrows())
    i = 0
    while i < len(rows):
        first = rows[i][1]
        shape, numbers = _pattern(first["name"])
        j = i + 1
        while j < len(rows):
            row = rows[j][1]
            other_shape, other = _pattern(row["name"])
            same = other_shape == shape and all(_equal(row[v], first[v]) for v in values)
            differ = [k for k, (x, y) in enumerate(zip(numbers, other)) if x != y]
            if not (same and len(differ) == 1 and other[differ[0]] == numbers[differ[0]] + (j - i)):
                break
            j += 1
        label = first["name"]
        if j - i > 1:
            last = _pattern(rows[j - 1][1]["name"])[1]
            k = next(k for k, (x, y) in enumerate(zip(numbers, last)) if x != y)
            parts = _NUMBER.split(first["name"])
            pieces = [str(n) if m != k else f"{n}–{last[k]}" for m, n in enumerate(numbers)]
            label = "".join(p + (pieces[m] if m < len(pieces) else "") for m, p in enumerate(parts)) + f" ×{j - i}"
        runs.append((label, first, j - i))
        i = j
    return runs


def _share(part: Any, whole: Any) -> str:
    share = format_percent(part, whole)
    return f" ({share})" if share else ""


def moe_text(name: str, totals: Mapping[str, Any], frame: pd.DataFrame) -> str:
    """The summary `print(nbinspect.moe(model))` shows."""
    heading = f"{name}: mixture of experts"
    total, activated = totals["total_params"], totals["activated_params"]
    ks = "/".join(map(str, totals["top_k"])) or "?"
    experts = "/".join(map(str, totals["experts_per_layer"]))
    if not totals["moe_layers"]:
        how = "no routed experts found: every parameter is used"
    elif activated is None:
        how = "unknown: the router's top-k was not found; pass top_k="
    else:
        layers = totals["moe_layers"]
        how = f"top-{ks} of {experts} routed experts in each of {layers} MoE layers, plus all other parameters"
    lines = [
        ("Parameters", format_count(total), ""),
        ("Activated per token", format_count(activated) + _share(activated, total), how),
        ("Routed experts", format_count(totals["routed_params"]) + _share(totals["routed_params"], total), ""),
        ("Everything else", format_count(totals["dense_params"]) + _share(totals["dense_params"], total), ""),
    ]
    parts = [heading + "\n" + "=" * len(heading), table(["Summary", "", ""], lines, [False, True, False])]
    if len(frame):
        header = ["MoE layer", "Layout", "Experts", "Top-k", "Per expert", "Routed", "Activated", "Shared"]
        rows = [
            [
                label,
                row["layout"],
                format_count(row["experts"]),
                format_count(row["top_k"]),
                format_count(row["expert_params"]),
                format_count(row["routed_params"] * count) if count > 1 else format_count(row["routed_params"]),
                format_count(row["activated_params"] * count) if not is_missing(row["activated_params"]) else "",
                format_count(row["shared_params"] * count),
            ]
            for label, row, count in _runs(frame)
        ]
        note = "(rows ×N: N layers alike; their routed, activated and shared columns are totals over the N)"
        parts.append(table(header, rows, [False, False, True, True, True, True, True, True]) + "\n" + note)
    return "\n\n".join(parts)
