"""InspectWidget: the anywidget that shows an inspection's frames as an interactive tree.

It is handed frames (never a model, never an analyzer): :mod:`nbinspect.render.payload`
turns them into the synced ``payload``; the front-end is one bundled ES module built from
``js/`` into ``nbinspect/static/widget.js``.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

import anywidget
import traitlets
from anywidget.experimental import command

from .payload import histogram

__all__ = ["InspectWidget", "bundle_source"]

_BUNDLE = "widget.js"


def bundle_source() -> str:
    """The built front-end (one ES module). A checkout builds it with ``make js``."""
    path = resources.files("nbinspect") / "static" / _BUNDLE
    if not path.is_file():
        raise FileNotFoundError(
            f"the nbinspect front-end bundle {path} is missing: build it with `make js` "
            "(npm ci && npm run build in js/), or install a built wheel"
        )
    return path.read_text(encoding="utf-8")


class InspectWidget(anywidget.AnyWidget):
    """The module tree of one inspection. ``selected`` holds the dotted path of the row the
    user selected (a module, '' for the root, or a parameter/buffer), None for none; setting
    it from Python selects that row."""

    _esm = traitlets.Unicode().tag(sync=True)
    payload = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(self, payload: Mapping[str, Any], views: Any = None, **kwargs: Any):
        """`payload`: :func:`~nbinspect.render.payload.build_payload`'s; `views`: what it was
        built with (``analyze.views.view_data``), for the full histograms asked for later."""
        self._views = views
        super().__init__(_esm=bundle_source(), payload=dict(payload), **kwargs)

    @command
    def _histogram(self, msg: Mapping[str, Any], buffers: list[bytes]) -> tuple[dict | None, list[bytes]]:
        """The full-resolution histogram of one row, fetched when the detail panel opens."""
        if self._views is None:
            return None, []
        return histogram(self._views, str(msg.get("name", "")), str(msg.get("kind", "tensor"))), []

    def __repr__(self) -> str:
        model = self.payload.get("model", {})
        modules = len(self.payload.get("modules", {}).get("key", []))
        return f"<InspectWidget {model.get('name', '')}: {modules:,} modules, selected={self.selected!r}>"
