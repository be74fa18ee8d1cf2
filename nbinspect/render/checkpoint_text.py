"""Text for what a checkpoint holds besides its tree: metadata, load report, tensor listing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_bytes, format_count, format_shape, is_missing
from .text import table

__all__ = ["metadata_text", "tensor_listing"]


def _short(value: Any, limit: int = 100) -> str:
    """A carried config (a dict, possibly long) in at most `limit` characters; other values as they are."""
    if not isinstance(value, (Mapping, list, tuple)):
        return str(value)
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def metadata_text(metadata: Mapping[str, Any]) -> str:
    """The checkpoint's non-weight entries (epoch, optimizer, ...) and the load report."""
    rows = [[str(k), _short(v)] for k, v in metadata.items() if k != "load_report"]
    title = "Model" if set(metadata) <= {"model"} else "Checkpoint"  # a model built from a config alone
    parts = [table([title, ""], rows, [False, False])] if rows else []
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
