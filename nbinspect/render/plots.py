"""Matplotlib renderings of the frames: a grid of weight histograms from the stats frame.

matplotlib is imported only when a figure is drawn, and figures are built with
``matplotlib.figure.Figure`` directly: no pyplot state, no global backend change. In a
notebook the figure shows itself once, as a PNG, in the cell that drew it, whether it is
the cell's value or assigned (``fig = ...``), the way pandas and seaborn plots do.
"""

from __future__ import annotations

import functools
import io
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ..schema import STATS
from .format import format_count

__all__ = ["distribution_figure", "figure_png", "select_rows"]

_NAME_WIDTH = 36  # characters of a panel title; longer paths keep their tail


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("plot_distributions needs matplotlib: pip install matplotlib") from exc
    return _shown_subclass(Figure)


@functools.cache
def _shown_subclass(figure: type) -> Any:
    class ShownFigure(figure):  # matplotlib's Figure, imported lazily
        """A Figure that a notebook shows as a PNG: at once when drawn in a cell, and not
        again as that cell's value; displaying it in a later cell shows it again."""

        def _repr_png_(self) -> bytes:
            buffer = io.BytesIO()
            self.savefig(buffer, format="png")
            return buffer.getvalue()

        def _ipython_display_(self) -> None:
            if id(self) in _SHOWN_THIS_CELL:
                return
            from IPython.display import Image, display

            display(Image(self._repr_png_()))

    return ShownFigure


def figure_png(fig: Any, dpi: int = 72) -> bytes:
    """`fig` as PNG bytes (for a saved notebook's static view), at `dpi`, drawn on a light
    card: rounded, a grey border, transparent around it.

    An image cannot follow the reader's theme. Light charts on a transparent image lose
    their dark text on a dark page, and light text would be lost on GitHub's white one; a
    light card keeps every number at its light-theme contrast wherever the notebook is read,
    and its border and rounded corners show a dark theme's page around it, so it reads as a
    chart card (as the widget draws its charts) rather than a white rectangle pasted in."""
    from matplotlib.patches import FancyBboxPatch

    width, height = fig.get_size_inches()
    inset = 0.02  # inches: the border's stroke stays inside the image
    card = FancyBboxPatch(
        (inset, inset),
        width - 2 * inset,
        height - 2 * inset,
        boxstyle="round,pad=0,rounding_size=0.12",
        transform=fig.dpi_scale_trans,
        facecolor="white",
        edgecolor="#c4c4c4",
        linewidth=1,
        zorder=-1,  # under the axes
    )
    fig.add_artist(card)
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):  # constrained layout: the titles clear of the border
        engine.set(w_pad=0.1, h_pad=0.1)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="none")
    card.remove()
    return buffer.getvalue()


# Figures shown in the running cell (ids), emptied after each cell by an IPython event.
_SHOWN_THIS_CELL: set[int] = set()


def _show_in_notebook(fig: Any) -> None:
    """Display `fig` now when IPython runs this code in a kernel (not in a terminal)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or "Terminal" in type(shell).__name__:
        return
    fig._ipython_display_()
    if not _SHOWN_THIS_CELL:
        shell.events.register("post_run_cell", _forget_shown)
    _SHOWN_THIS_CELL.add(id(fig))


def _forget_shown(*_: Any) -> None:
    from IPython import get_ipython

    _SHOWN_THIS_CELL.clear()
    get_ipython().events.unregister("post_run_cell", _forget_shown)


def select_rows(
    frame: pd.DataFrame,
    pattern: str | re.Pattern | None = None,
    buffers: bool = False,
    top: int | None = None,
) -> pd.DataFrame:
    """The rows to draw: parameters and module rows (buffers too if asked) whose name
    matches the regular expression `pattern`, then the `top` largest by numel."""
    rows = frame if buffers else frame[frame["kind"] != "buffer"]
    if pattern is not None:
        regex = re.compile(pattern)
        rows = rows[[bool(regex.search(name)) for name in rows["name"]]]
    if top is not None:
        if top < 1:
            raise ValueError(f"top={top}: need at least 1 panel")
        rows = rows.sort_values("numel", ascending=False, kind="stable").head(top)
    return rows


def _short(name: str) -> str:
    name = name or "(model)"
    return name if len(name) <= _NAME_WIDTH else "…" + name[-(_NAME_WIDTH - 1) :]


def _panel(ax: Any, row: Any, log: bool) -> None:
    ax.set_title(_short(row.name), fontsize=8, loc="left")
    ax.tick_params(labelsize=6)
    if row.hist_counts is None:
        ax.text(
            0.5, 0.5, row.note or "no values", ha="center", va="center", fontsize=7, wrap=True, transform=ax.transAxes
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return
    ax.stairs(row.hist_counts, row.hist_edges, fill=True, color="#4c72b0", alpha=0.85)
    if not pd.isna(row.mean):
        ax.axvline(row.mean, color="#c44e52", linewidth=0.8)
    if log:
        ax.set_yscale("log")
    # the statistics go on one line above the axes, under the title: never over the bars
    text = " · ".join(
        f"{k} {v:.3g}" for k, v in (("mean", row.mean), ("std", row.std), ("min", row.min), ("max", row.max))
    )
    ax.annotate(
        text,
        xy=(0, 1),
        xycoords="axes fraction",
        xytext=(0, 2),
        textcoords="offset points",
        ha="left",
        va="bottom",
        fontsize=5.5,
        family="monospace",
    )
    ax.set_title(_short(row.name), fontsize=8, loc="left", pad=10)
    finite = int(row.numel) - int(row.nan) - int(row.inf)
    detail = f"{row.dtype}, {format_count(row.numel)} values"
    if row.hist_sample < finite:
        detail += f"; histogram of a {format_count(row.hist_sample)} sample"
    if row.nan or row.inf:
        detail += f"; {format_count(row.nan)} NaN, {format_count(row.inf)} Inf"
    ax.set_xlabel(detail, fontsize=6)


def distribution_figure(
    frame: pd.DataFrame,
    *,
    pattern: str | re.Pattern | None = None,
    buffers: bool = False,
    top: int | None = None,
    page: int = 1,
    per_page: int = 16,
    cols: int = 4,
    log: bool = False,
    title: str = "Weight distributions",
    path: str | Path | None = None,
    dpi: int = 100,
) -> Any:
    """A matplotlib Figure with one histogram panel per row of a stats frame (mean line,
    mean/std/min/max on a line above the panel), `per_page` panels per page; also saved to `path`
    (format from its suffix, PNG by default) when given. See :func:`select_rows` for the
    choice of rows; `page` (from 1) walks through the rest."""
    Figure = _figure_class()
    STATS.validate(frame)
    if per_page < 1 or cols < 1:
        raise ValueError(f"per_page={per_page}, cols={cols}: both must be at least 1")
    rows = select_rows(frame, pattern, buffers, top)
    if rows.empty:
        raise ValueError(
            f"no rows to plot: {len(frame)} in the frame, none left after pattern={pattern!r}, buffers={buffers}"
        )
    pages = math.ceil(len(rows) / per_page)
    if not 1 <= page <= pages:
        raise ValueError(f"page={page}: there are {pages} page(s) of {per_page} panels for {len(rows)} rows")
    shown = rows.iloc[(page - 1) * per_page : page * per_page]
    ncols = min(cols, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig = Figure(figsize=(3.2 * ncols, 2.5 * nrows + 0.4), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, row in zip(axes, shown.itertuples(index=False)):
        _panel(ax, row, log)
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    first = (page - 1) * per_page + 1
    heading = f"{title}: {first}–{first + len(shown) - 1} of {len(rows)}"
    if pages > 1:
        heading += f" (page {page} of {pages}; choose with page=, pattern= or top=)"
    fig.suptitle(heading, fontsize=10)
    if path is not None:
        fig.savefig(path, dpi=dpi)
    _show_in_notebook(fig)
    return fig
