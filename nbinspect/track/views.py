"""What a person looks at: the history as a matplotlib figure, and the live widget.

The live widget is the inspection widget itself (:class:`~nbinspect.render.widget.InspectWidget`)
fed with the last interval's change as its ``compare`` frame, so the module tree is
coloured by how much each part moved, plus a ``timeline`` of the chosen metrics over steps
drawn as small plots above the tree. The manager refreshes it after every measurement,
so it moves while the training loop runs.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from torch import nn

from ..analyze.structure import layers, params, totals
from ..analyze.views import view_data
from ..backends import as_source
from ..render.payload import build_payload, timeline
from ..render.plots import _figure_class, _show_in_notebook, figure_png
from ..render.text import table
from ..render.widget import InspectWidget
from ..schema import TRACK_HISTORY

if TYPE_CHECKING:
    from .manager import ModelAnalysisManager

__all__ = ["TrackWidget", "default_keys", "plot_history", "select_keys"]

_PREFERRED = ("param_change/norm_l2", "param_change/relative_change", "param_change/changed_ratio_at_1e-06",
              "gradient/norm", "sparse/kl_at_1e-06", "sparse/kl_at_1e-06_random")  # fmt: skip


_OFFERED = 40  # metrics the widget's picker offers: the model-wide ones first (payload size per update)


def default_keys(keys: Sequence[str], most: int = 6) -> list[str]:
    """The model-wide metrics worth a first look: the preferred ones present, then other
    keys without a per-module or per-layer part."""
    chosen = [k for k in _PREFERRED if k in keys]
    chosen += [k for k in keys if k.count("/") == 1 and k not in chosen]
    return chosen[:most]


def select_keys(keys: Sequence[str], metrics: Sequence[str] | str | None) -> list[str]:
    """Keys matching `metrics` (exact keys or glob patterns such as ``"sparse/kl_*"``), in
    the order asked; None picks :func:`default_keys`."""
    if metrics is None:
        return default_keys(keys)
    patterns = [metrics] if isinstance(metrics, str) else list(metrics)
    out: list[str] = []
    for pattern in patterns:
        found = [k for k in keys if fnmatch.fnmatchcase(k, pattern)]
        if not found:
            raise ValueError(
                f"no metric matches {pattern!r}; measured: {', '.join(keys[:12])}{' …' if len(keys) > 12 else ''}"
            )
        out += [k for k in found if k not in out]
    return out


def plot_history(
    history: pd.DataFrame,
    metrics: Sequence[str] | str | None = None,
    *,
    cols: int = 3,
    logy: bool | None = None,
    show: bool = True,
) -> Any:
    """A matplotlib Figure: one small panel per metric over steps (shown once in the
    notebook cell that drew it, like plot_distributions; `show=False` does not). `logy`
    draws a log scale (default: for a positive metric that spans more than a factor of 20)."""
    Figure = _figure_class()
    keys = [c for c in history.columns if c not in TRACK_HISTORY.names]
    if history.empty:
        raise ValueError("nothing to plot yet: no measurement has been made (see AnalysisConfig.interval)")
    chosen = select_keys(keys, metrics)
    ncols = min(cols, len(chosen))
    nrows = math.ceil(len(chosen) / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.4 * nrows + 0.3), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    steps = history["step"].to_numpy(dtype=float)
    for ax, key in zip(axes, chosen):
        values = history[key].to_numpy(dtype=float)
        ax.plot(steps, values, marker="." if len(values) < 40 else None, linewidth=1.2)
        known = values[~pd.isna(values)]
        wide = len(known) > 0 and bool((known > 0).all()) and known.max() > 20 * known.min()
        if logy if logy is not None else wide:
            ax.set_yscale("log")
        ax.set_title(key, fontsize=8)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes[len(chosen) :]:
        ax.set_visible(False)
    fig.suptitle("Training dynamics", fontsize=10)
    if show:
        _show_in_notebook(fig)
    return fig


def _with_tied_paths(change: pd.DataFrame, params_frame: pd.DataFrame) -> pd.DataFrame:
    """The change frame with a row for every path tied to a measured tensor (a tied head
    moves with its embedding; the snapshot holds shared storage once)."""
    tied = params_frame[params_frame["tied_to"].notna() & params_frame["tied_to"].isin(change["name"])]
    if tied.empty:
        return change
    rows = change.set_index("name").loc[tied["tied_to"]].reset_index()
    rows["name"], rows["module"] = tied["name"].to_numpy(), tied["module"].to_numpy()
    return pd.concat([change, rows], ignore_index=True)


class TrackWidget(InspectWidget):
    """The inspection widget of the tracked model, coloured by the last interval's change
    (the Change column: ‖Δ‖ / max(‖W_before‖, ‖W_now‖) per tensor, a module over its whole
    subtree) with charts of the chosen metrics over steps. Refreshed by the manager after every
    measurement."""

    def __init__(self, manager: ModelAnalysisManager, model: nn.Module, metrics: Sequence[str] | str | None = None):
        self._manager = manager
        self._metrics = metrics
        self._name = type(model).__name__
        source = as_source(model)  # the model read once, for the three structure frames
        self._structure = {"layers": layers(source), "params": params(source)}
        self._totals = totals(source)
        frames, timeline = self._state()
        views = view_data(frames)
        super().__init__(
            build_payload(self._name, "torch", self._totals, frames, timeline=timeline, views=views),
            views,
            saved=self._saved_view,
        )

    def _saved_view(self) -> tuple[str, bytes | None]:
        """What a saved notebook shows without the widget: the chosen curves at their last
        measurement as a PNG, the last values and the model's parameter totals as text."""
        history = self._manager.history
        title = self.payload.get("timeline", {}).get("title", "")
        heading = f"{self._name}: training dynamics"
        # the title's parts a line each: the block is read unwrapped (GitHub), one line was
        # wider than a 700 px page
        lines = [heading, "=" * len(heading), *title.split(" · ")]
        chosen = self._chosen(history)
        image = None
        if not history.empty and chosen:
            rows = []
            for key in chosen:  # each metric's last measured value and its step
                known = history[key].dropna()
                value = f"{float(known.iloc[-1]):.4g}" if len(known) else ""
                step = f"{int(history['step'].loc[known.index[-1]])}" if len(known) else ""
                rows.append([key, value, step])
            lines += ["", table(["Last values", "Value", "Step"], rows, [False, True, True])]
            fig = plot_history(history, chosen, show=False)
            image = figure_png(fig)
        t = self._totals
        lines += [
            "",
            f"Parameters {t['total_params']:,} ({t['trainable_params']:,} trainable), {t['num_modules']:,} modules",
        ]
        return "\n".join(lines), image

    def _chosen(self, history: pd.DataFrame) -> list[str]:
        keys = [c for c in history.columns if c not in TRACK_HISTORY.names]
        try:
            return select_keys(keys, self._metrics) if keys else []
        except ValueError:  # asked-for metrics not measured yet
            return [
                k for k in ([self._metrics] if isinstance(self._metrics, str) else self._metrics or []) if k in keys
            ]

    def _state(self) -> tuple[dict[str, pd.DataFrame], dict]:
        frames = dict(self._structure)
        change = self._manager.last_change
        if change is not None:
            frames["compare"] = _with_tied_paths(change, self._structure["params"])
        history = self._manager.history
        chosen = self._chosen(history)
        rows = self._manager._rows
        every = f"measured every {self._manager.config.interval} steps"
        if rows:
            first, last = rows[0], rows[-1]
            span = f"steps {first['since_step']}→{last['step']}, {every}"
            title = f"{span} · Change: the last interval, steps {last['since_step']}→{last['step']}"
        else:
            title = f"waiting for the first measurement ({every})"
        keys = [c for c in history.columns if c not in TRACK_HISTORY.names]
        offered = sorted(keys, key=lambda k: k.count("/") != 1)  # model-wide first, then per layer or component
        return frames, timeline(history, chosen, title, offered[: _OFFERED + len(chosen)])

    def __repr__(self) -> str:
        title = self.payload.get("timeline", {}).get("title", "")
        return f"<TrackWidget {self._name}: {title}, selected={self.selected!r}>"

    def refresh(self) -> None:
        """Show the manager's latest measurement."""
        frames, line = self._state()
        self._views = view_data(frames)
        self.payload = build_payload(self._name, "torch", self._totals, frames, timeline=line, views=self._views)
        self._update_saved()  # the saved output follows: a notebook saved now shows this measurement
