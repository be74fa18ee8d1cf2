"""The `dump_model_info` report as lines: SUMMARY, LAYER DETAILS, WEIGHT STATISTICS.

One function per section, each returning ``list[str]`` (the caller emits one log record per
line, so every line keeps the logger's prefix). The rows are plain records (mappings with
the `LayerInfo` fields); bytes are shown in MiB (2**20 bytes, as the original utility's "MB"
already was: its rows say 0.50 MB for 524,288 bytes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .format import format_count

__all__ = ["RULE", "layer_details", "summary", "weight_statistics"]

RULE = "=" * 60
_MIB = 2**20


def _title(name: str) -> list[str]:
    return [RULE, name, RULE]


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def summary(model: str, totals: Mapping[str, Any], buffers: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    lines = [*_title("SUMMARY"), f"  Model:                {model}"]
    lines += [
        f"  Total parameters:     {format_count(totals['total_params'])}",
        f"  Trainable params:     {format_count(totals['trainable_params'])}",
        f"  Non-trainable params: {format_count(totals['non_trainable_params'])}",
        f"  Total memory:         {totals['total_memory_mb']:.2f} MiB",
        f"  Total layers:         {totals['num_layers']}",
    ]
    if buffers:
        size = sum(b["memory_mb"] for b in buffers)
        lines.append(f"  Buffers:              {len(buffers)} tensors, {size:.2f} MiB (not parameters)")
    return lines


def layer_details(layers: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [*_title("LAYER DETAILS"), f"{'Layer Name':<40} {'Shape':<20} {'Params':<12} {'Memory':>11}  Grad"]
    for row in layers:
        grad = "✓" if row["requires_grad"] else "✗"
        if row.get("tied_to"):
            grad += f" tied to {row['tied_to']}"
        lines.append(
            f"{row['name']:<40} {_shape(row['shape']):<20} {format_count(row['num_params']):<12} "
            f"{row['memory_mb']:>7.2f} MiB  {grad:>4}"
        )
    return lines


def _num(x: float | None) -> str:
    return f"{'n/a':>12}" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:>12.6f}"


def weight_statistics(layers: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [*_title("WEIGHT STATISTICS"), f"{'Layer':<40} {'Mean':>12} {'Std':>12} {'Min':>12} {'Max':>12}"]
    for row in layers:
        if row.get("tied_to"):
            continue
        lines.append(f"{row['name']:<40} {_num(row['mean'])} {_num(row['std'])} {_num(row['min'])} {_num(row['max'])}")
        if row.get("nan") or row.get("inf"):
            lines.append(f"{'':<40} {row.get('nan', 0)} NaN, {row.get('inf', 0)} Inf")
    return lines
