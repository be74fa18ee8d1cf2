"""Human-readable numbers: the one rule every renderer uses (text, HTML and the widget).

- counts: exact, with thousands separators (``12,345,678``);
- sizes in bytes: powers of 1024 with IEC units (``1.5 KiB``, ``463.0 KiB``, ``2.0 GiB``);
- compact counts and FLOPs: powers of 1000 with SI prefixes (``118.5 K``, ``7.6 M``);
- parameter counts: powers of 1000 as people say them (``124.4 M``, ``6.7 B``, ``1.2 T``);
- scaled values keep one decimal, below the first unit they print as an integer (``512 B``,
  ``999``), and a value that rounds up to the next unit moves to it (``1.0 M``, not ``1000.0 K``);
- shares of a whole: one decimal, ``<0.1%`` for a positive share that would round to zero.

The front-end implements the same rule in ``js/src/format.ts``; ``tests/format_cases.json`` holds
the cases both must agree on. Rounding is half up in double precision, written out so that
Python and JavaScript give the same digits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import schema

__all__ = [
    "format_bytes",
    "format_compact",
    "format_count",
    "format_flops",
    "format_params",
    "format_percent",
    "format_shape",
    "is_missing",
    "trainable_status",
]

is_missing = schema.is_missing  # re-exported: renderers read missing cells as the frames define them

_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SI_PREFIXES = ("", "K", "M", "G", "T", "P")
_COUNT_UNITS = ("", "K", "M", "B", "T")  # counts of things (parameters) as people say them


def _round_half_up(v: float) -> int:
    return math.floor(v + 0.5)


def _scaled(n: Any, base: int, units: Sequence[str]) -> str:
    """`n` in the largest unit of `units` (each `base` times the last) that keeps it at least 1."""
    if is_missing(n):
        return ""
    v = abs(float(n))
    sign = "-" if float(n) < 0 else ""
    whole = _round_half_up(v)
    if whole < base:
        return f"{sign if whole else ''}{whole}" + (f" {units[0]}" if units[0] else "")
    unit = 0
    while v >= base and unit < len(units) - 1:
        v /= base
        unit += 1
    tenths = _round_half_up(v * 10)
    if tenths >= base * 10 and unit < len(units) - 1:  # 999.96 K rounds to 1000.0 K: say 1.0 M
        v /= base
        unit += 1
        tenths = _round_half_up(v * 10)
    return f"{sign}{tenths // 10}.{tenths % 10} {units[unit]}"


def format_count(n: Any) -> str:
    """12345678 -> '12,345,678'; missing -> ''."""
    if is_missing(n):
        return ""
    whole = _round_half_up(abs(float(n))) if isinstance(n, float) else abs(int(n))
    return f"{'-' if n < 0 and whole else ''}{whole:,}"


def format_bytes(n: Any) -> str:
    """Bytes in powers of 1024: 512 -> '512 B', 1536 -> '1.5 KiB'; missing -> ''."""
    return _scaled(n, 1024, _BYTE_UNITS)


def format_compact(n: Any) -> str:
    """A count in powers of 1000: 118528 -> '118.5 K', 999 -> '999'; missing -> ''."""
    return _scaled(n, 1000, _SI_PREFIXES)


def format_params(n: Any) -> str:
    """A parameter count in thousands, millions, billions: 6_738_415_616 -> '6.7 B'; missing -> ''."""
    return _scaled(n, 1000, _COUNT_UNITS)


def format_flops(n: Any) -> str:
    """FLOPs are compact counts: 7_602_176 -> '7.6 M'."""
    return format_compact(n)


def format_percent(part: Any, whole: Any) -> str:
    """`part` as a share of `whole`: '84.3%', '<0.1%'; '' when either is missing or zero."""
    if is_missing(part) or is_missing(whole) or not part or not whole:
        return ""
    tenths = _round_half_up(1000 * float(part) / float(whole))
    return "<0.1%" if tenths == 0 else f"{tenths // 10}.{tenths % 10}%"


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
