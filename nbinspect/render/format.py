"""Human-readable numbers, shared by every text renderer."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

__all__ = ["format_bytes", "format_count", "format_flops", "format_shape", "is_missing", "trainable_status"]

_UNITS = ("B", "KB", "MB", "GB", "TB")


def is_missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_count(n: Any) -> str:
    """12345678 -> '12,345,678'; missing -> ''."""
    return "" if is_missing(n) else f"{int(n):,}"


def format_bytes(n: Any) -> str:
    """Bytes in binary units labelled B/KB/MB/GB/TB (1 KB = 1024 B): 1536 -> '1.5 KB'."""
    if is_missing(n):
        return ""
    n = float(n)
    for unit in _UNITS:
        if abs(n) < 1024 or unit == _UNITS[-1]:
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def format_flops(n: Any) -> str:
    """FLOPs with a decimal prefix: 1_234_567 -> '1.23 M'; below 1000 as is; missing -> ''."""
    if is_missing(n):
        return ""
    n = int(n)
    for value, prefix in ((10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= value:
            return f"{n / value:.2f} {prefix}"
    return str(n)


def format_shape(shape: Any) -> str:
    """(2, 16, 64) -> '[2, 16, 64]'; a list of shapes -> '[2, 16] [2, 16]'."""
    if is_missing(shape):
        return ""
    if isinstance(shape, (list, tuple)) and shape and all(isinstance(s, (list, tuple)) for s in shape):
        return " ".join(format_shape(s) for s in shape)
    return "[" + ", ".join(str(d) for d in shape) + "]"


def trainable_status(trainable: int, frozen: int) -> str:
    """'trainable', 'frozen', 'partial', or '' for a module with no parameters."""
    if trainable and frozen:
        return "partial"
    if trainable:
        return "trainable"
    return "frozen" if frozen else ""
