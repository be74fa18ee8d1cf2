"""Text for what a checkpoint holds besides its tree: metadata, load report, tensor listing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_bytes, format_count, format_shape, is_missing
from .text import table

__all__ = ["metadata_text", "tensor_listing"]


MAX_ROWS = 60  # metadata rows shown without --verbose


def _rows(key: str, value: Any, depth: int = 0) -> list[list[str]]:
    """A plain dict flattened to ``a.b.c  value`` rows; every value in full (never cut)."""
    if isinstance(value, Mapping) and value and depth < 32:
        return [row for k, v in value.items() for row in _rows(f"{key}.{k}", v, depth + 1)]
    return [[key, " ".join(str(value).split())]]


def metadata_text(metadata: Mapping[str, Any], verbose: bool = False) -> str:
    """The checkpoint's non-weight entries (epoch, optimizer, the carried config and
    normalisation statistics flattened to one row per value, in full) and the load report;
    the first 60 rows unless `verbose`."""
    rows = [row for k, v in metadata.items() if k != "load_report" for row in _rows(str(k), v)]
    more = len(rows) - MAX_ROWS if not verbose and len(rows) > MAX_ROWS else 0
    if more:
        rows = rows[:MAX_ROWS]
    title = "Model" if set(metadata) <= {"model", "config"} else "Checkpoint"  # a model built from a config alone
    parts = [table([title, ""], rows, [False, False])] if rows else []
    if more:
        parts[0] += f"\n({more} more entries: --verbose shows them)"
    if "load_report" in metadata:
        parts.append("Loading into the model\n" + str(metadata["load_report"]))
    return "\n\n".join(parts)


def tensor_listing(params: pd.DataFrame) -> str:
    """Every tensor: name, shape, dtype, elements, bytes, and the path it shares storage with."""
    rows = [
        [
            r.name,
            format_shape(r.shape),
            r.dtype,
            format_count(r.numel),
            format_bytes(r.bytes),
            "" if is_missing(r.tied_to) else r.tied_to,
        ]
        for r in params.itertuples(index=False)
    ]
    return f"Tensors ({len(rows):,})\n" + table(
        ["Name", "Shape", "Dtype", "Elements", "Bytes", "Same storage as"],
        rows,
        [False, False, False, True, True, False],
    )
