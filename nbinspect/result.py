"""What an Inspection and a Comparison share: frames and totals of one tree, shown as text,
exported as JSON, displayed as the widget in a notebook or as a standalone page."""

from __future__ import annotations

import functools
import json
import os
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from .analyze.compare import by_module as compare_by_module
from .analyze.graph import graph_view
from .analyze.views import ViewData, view_data
from .core.gc_pause import gc_paused
from .core.output import check_not_input, write_output
from .render.html import standalone_html
from .render.payload import build_payload

if TYPE_CHECKING:
    from .render.widget import InspectWidget

__all__ = ["Result", "input_paths", "module_numbers"]


class Result:
    """Base of :class:`~nbinspect.Inspection` and :class:`~nbinspect.Comparison`. Subclasses
    set ``name``, ``framework``, ``frames`` and ``totals`` and write ``summary()`` and
    ``to_dict()``; the ways of showing and exporting them live here, once."""

    # the files or folders it was read from: an export never overwrites them (nor writes into them)
    inputs: tuple[str, ...] = ()

    name: str
    framework: str
    frames: Mapping[str, pd.DataFrame]
    totals: Mapping[str, Any]
    sides: tuple[str, str] | None = None  # a comparison's two sides, named in the widget's title
    _last_widget: weakref.ref | None = None  # the widget shown last (its heatmap pictures)

    def summary(self) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.summary()

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The export document as JSON text; also written to `path` when given."""
        document = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            self._write(path, document + "\n")
        return document

    def _write(self, path: str | Path, text: str) -> None:
        """Write an export atomically, refusing a path that is one of the inputs (or inside one)."""
        check_not_input(path, self.inputs)
        write_output(path, text)

    def framework_label(self) -> str:
        """What the widget shows beside the name (a subclass may say more than the framework)."""
        return self.framework

    def widget(self, colour_by: Mapping[str, Any] | None = None) -> InspectWidget:
        """The interactive tree (an anywidget); its ``selected`` is the row picked in it.
        `colour_by`: numbers the Graph mode can colour modules by, ``{label: value}`` where a
        value is a ``pandas.Series`` indexed by module path, a :class:`Comparison` (its
        per-module change) or a ``track.ModelAnalysisManager`` (each module's change over
        the last measured interval)."""
        from .render.widget import InspectWidget  # anywidget and ipywidgets load when a widget is made

        if colour_by and "graph" not in self.frames:
            raise ValueError(f"colour_by colours the Graph mode, and {self.name} was not traced: use nbinspect.trace")
        widget = InspectWidget(
            self._payload(colour_by),
            self._views,
            saved=lambda: (self._saved_summary(), None),
            values=self._value_access(),
        )
        self._last_widget = weakref.ref(widget)  # its heatmaps go into to_html's page
        return widget

    def show(self) -> InspectWidget:
        """Display the widget in the notebook and return it."""
        from IPython.display import display

        w = self.widget()
        display(w)
        return w

    def _value_access(self) -> Any:
        """What answers the value view's region requests (``analyze.value_view.ValueAccess``), or None."""
        return None

    def _widget_frames(self) -> Mapping[str, pd.DataFrame]:
        """The frames the widget and the standalone page show."""
        return self.frames

    @functools.cached_property
    def _views(self) -> ViewData:
        """What the views show besides the frames, decided once (``analyze.views``)."""
        return view_data(self._widget_frames())

    @gc_paused()  # a few objects per module and tensor: the collector's passes cost more than the build
    def _payload(self, colour_by: Mapping[str, Any] | None = None) -> dict:
        """The widget's payload (``render/payload.py``)."""
        frames = self._widget_frames()
        series = {label: module_numbers(label, value) for label, value in (colour_by or {}).items()}
        return build_payload(
            self.name,
            self.framework_label(),
            self.totals,
            frames,
            self.sides,
            views=self._views,
            graph=graph_view(frames, series),
        )

    def _ipython_display_(self) -> None:
        """In a notebook, two outputs: the saved view (offline view and text summary, read
        where the widget cannot render) and the live widget (``render/saved.py``). Outside a
        kernel, the one bundle of ``_repr_mimebundle_``."""
        from .render.widget import in_kernel

        if in_kernel():
            self.widget()._ipython_display_()
        else:
            from IPython.display import display

            display(self._repr_mimebundle_(), raw=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        """One bundle, for front-ends that do not call ``_ipython_display_``: the widget, the
        saved view as text/html (offline view and text summary), the repr as text/plain."""
        w = self.widget()
        data, _ = w._repr_mimebundle_()  # type: ignore[misc]  # anywidget returns (data, metadata)
        return {**data, "text/plain": repr(self), "text/html": w.saved_bundle()["text/html"]}

    def _display_(self) -> Any:
        """marimo shows the widget (an anywidget it renders natively)."""
        return self.widget()

    def _saved_summary(self) -> str:
        """The text a saved notebook shows in place of the widget."""
        return self.summary()

    def _appendix(self) -> list[str]:
        """Texts the standalone page shows under the widget (an Inspection's memory plan and flow)."""
        return []

    def to_html(self, path: str | Path | None = None) -> str:
        """A standalone HTML page of the widget (bundle and data inlined, works offline);
        also written to `path` when given."""
        from .render.widget import bundle_source

        widget = self._last_widget() if self._last_widget is not None else None
        figures = list(widget.pictures.values()) if widget is not None else []
        page = standalone_html(self._payload(), bundle_source(), f"{self.name} — nbinspect", self._appendix(), figures)
        if path is not None:
            self._write(path, page)
        return page


def input_paths(*objects: object) -> tuple[str, ...]:
    """The file-system paths among what a result was read from (models and state dicts are not)."""
    return tuple(os.fspath(o) for o in objects if isinstance(o, (str, os.PathLike)))


def module_numbers(label: str, value: Any) -> pd.Series:
    """A number per module path from what ``widget(colour_by=...)`` takes: a Series as it
    is; a Comparison's or a training run's compare frame rolled up per module (``change``,
    the same roll-up the comparison tree shows)."""
    if isinstance(value, pd.Series):
        return value
    frame = getattr(value, "last_change", None) if not hasattr(value, "frames") else value.frames.get("compare")
    if isinstance(frame, pd.DataFrame):
        modules = compare_by_module(frame)
        return pd.Series(modules["change"].to_numpy(), index=modules["group"].tolist())
    raise TypeError(
        f"colour_by[{label!r}]: a pandas.Series by module path, a Comparison or a ModelAnalysisManager "
        f"with a measurement, not {type(value).__name__}"
    )
