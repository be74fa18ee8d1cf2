"""How a frame shows itself in a notebook: the same DataFrame, with bytes in KiB/MiB, FLOPs
with a prefix, shares in percent, shapes in brackets and histograms as one-line
sparklines, so a person can read it; for analysis it stays a plain pandas DataFrame."""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..schema import unit_of
from .format import format_bytes, format_count, format_flops, format_percent, format_shape, is_missing

__all__ = ["DisplayFrame", "html_table", "readable", "saved_view", "sparkline"]

_BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(counts: Any, width: int = 16) -> str:
    """A histogram as one line of at most `width` block characters (neighbouring bins added
    together; empty ones as spaces), narrow enough for a table cell."""
    values = np.asarray(counts, dtype=np.float64)
    if values.size > width:
        group = -(-values.size // width)  # ceil: bins per character
        values = np.add.reduceat(values, np.arange(0, values.size, group))
    top = values.max() if values.size else 0
    if top <= 0:
        return ""
    levels = np.ceil(values / top * len(_BLOCKS)).astype(int)
    return "".join(" " if n == 0 else _BLOCKS[n - 1] for n in levels)


def _number(x: Any) -> str:
    if is_missing(x):
        return ""
    if isinstance(x, (bool, np.bool_)):
        return str(x)
    if isinstance(x, (int, np.integer)):
        return format_count(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def _formatter(name: str, column: pd.Series) -> Callable[[Any], str] | None:
    unit = unit_of(name)
    if unit == "bytes":
        return format_bytes
    if unit == "flops":
        return format_flops
    if unit in ("percent", "fraction"):  # as the widget shows them: '84.3%', '<0.1%', blank for none
        whole = 100 if unit == "percent" else 1
        return lambda x: format_percent(x, whole)
    if name == "hist_counts":
        return lambda x: "" if x is None or is_missing(x) is True else sparkline(x)
    if name == "attrs":
        return lambda x: ", ".join(f"{k}={v}" for k, v in x.items()) if isinstance(x, dict) else ""
    if name == "hist_edges":
        return lambda x: "" if x is None or is_missing(x) is True else f"[{_number(x[0])}, {_number(x[-1])}]"
    if name.startswith("shape") or name.endswith("_shapes"):
        return format_shape
    if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        return _number
    return None


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose unit-bearing and bulky columns are strings for reading."""
    out = pd.DataFrame(frame).copy()
    for name in out.columns:
        fmt = _formatter(str(name), out[name])
        if fmt is not None:
            out[name] = [fmt(v) for v in out[name]]
    return out


class DisplayFrame(pd.DataFrame):
    """A DataFrame that a notebook shows readably (see :func:`readable`); anything derived
    from it (slicing, ``head``, arithmetic) is a plain DataFrame again."""

    @property
    def _constructor(self):
        return pd.DataFrame

    def _repr_html_(self) -> str | None:
        return readable(self)._repr_html_()


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool], title: str = "") -> str:
    """A small HTML table, the notebook twin of ``render.text.table``."""

    def cells(tag: str, values: Sequence[str]) -> str:
        return "".join(
            f'<{tag} style="text-align:{"right" if r else "left"}">{html.escape(str(v))}</{tag}>'
            for v, r in zip(values, right)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    caption = f"<caption style='text-align:left;font-weight:bold'>{html.escape(title)}</caption>" if title else ""
    return f"<table>{caption}<thead><tr>{cells('th', header)}</tr></thead><tbody>{body}</tbody></table>"


def saved_view(summary: str) -> str:
    """What a saved notebook shows where the widget was: the text summary, preformatted, and
    a line saying the interactive view needs a running kernel."""
    return (
        # a monospace font named: a notebook's HTML output may give <pre> its text font,
        # which breaks the columns (nbconvert's export did)
        '<div class="nbinspect-saved"><pre style="font-family:Menlo,Consolas,\'DejaVu Sans Mono\',monospace;'
        'font-size:12px;line-height:1.3">'
        + html.escape(summary)
        + "</pre><p><small>nbinspect: run the cell in Jupyter for the interactive tree.</small></p></div>"
    )
