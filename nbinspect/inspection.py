"""Inspection: the frames of one model, and the ways it shows itself."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import pandas as pd

from .analyze import structure
from .render import json_export, text
from .render.html import standalone_html
from .render.payload import build_payload
from .sources import as_source
from .widget import InspectWidget, bundle_source

__all__ = ["Inspection", "inspect"]


class Inspection:
    """What nbinspect found in one model: DataFrames (``params``, ``layers``, ``by_type``, ...)
    and ``totals``. ``print()`` it for a text summary; export it with :meth:`to_json`."""

    def __init__(
        self,
        name: str,
        framework: str,
        frames: Mapping[str, pd.DataFrame],
        totals: Mapping[str, Any],
        io: Mapping[str, Any] | None = None,
    ):
        self.name = name
        self.framework = framework
        self.frames = MappingProxyType(dict(frames))
        self.totals = MappingProxyType(dict(totals))
        self.io = MappingProxyType(dict(io or {}))

    @property
    def params(self) -> pd.DataFrame:
        return self.frames["params"]

    @property
    def layers(self) -> pd.DataFrame:
        return self.frames["layers"]

    @property
    def by_type(self) -> pd.DataFrame:
        return self.frames["by_type"]

    def summary(self, depth: int | None = 3) -> str:
        """The text summary; `depth` limits the layer tree (None shows every level)."""
        return text.summary(self.name, self.framework, self.totals, self.layers, self.by_type, depth)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"<Inspection {self.name} ({self.framework}): {t['total_params']:,} parameters, "
            f"{t['num_modules']:,} modules, frames: {', '.join(self.frames)}>"
        )

    def to_dict(self) -> dict:
        """The export document as plain Python (see :func:`nbinspect.json_schema`)."""
        return json_export.inspection_dict(self.name, self.framework, self.totals, self.layers, self.params, self.io)

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        """The export document as JSON text; also written to `path` when given."""
        document = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            Path(path).write_text(document + "\n", encoding="utf-8")
        return document

    def widget(self) -> InspectWidget:
        """The interactive tree (an anywidget); its ``selected`` is the row picked in it."""
        return InspectWidget(self.frames, self.totals, name=self.name, framework=self.framework)

    def show(self) -> InspectWidget:
        """Display the widget in the notebook and return it."""
        from IPython.display import display

        w = self.widget()
        display(w)
        return w

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict:
        data, _ = self.widget()._repr_mimebundle_()
        return {**data, "text/plain": repr(self)}

    def to_html(self, path: str | Path | None = None) -> str:
        """A standalone HTML page of the widget (bundle and data inlined, works offline);
        also written to `path` when given."""
        payload = build_payload(self.name, self.framework, self.totals, self.frames)
        page = standalone_html(payload, bundle_source(), f"{self.name} — nbinspect")
        if path is not None:
            Path(path).write_text(page, encoding="utf-8")
        return page


def inspect(model: Any, *, name: str | None = None) -> Inspection:
    """Inspect `model` (a torch.nn.Module) without changing it."""
    source = as_source(model, name)
    frames = {
        "params": structure.params(source),
        "layers": structure.layers(source),
        "by_type": structure.by_type(source),
    }
    return Inspection(source.name, source.framework, frames, structure.totals(source))
