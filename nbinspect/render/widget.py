"""InspectWidget: the anywidget that shows an inspection's frames as an interactive tree.

It is handed frames (never a model, never an analyzer): :mod:`nbinspect.render.payload`
turns them into the synced ``payload``; the front-end is one bundled ES module built from
``js/`` into ``nbinspect/static/widget.js``.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any, Protocol

import anywidget
import traitlets
from anywidget.experimental import command

from .payload import histogram, payload_text
from .png import palette_png
from .saved import offline_view, widget_placeholder


class Values(Protocol):
    """What answers the value view (``analyze.value_view.ValueAccess``)."""

    def region(self, request: Mapping[str, Any]) -> tuple[dict, list[bytes]]: ...

    def locate_rows(self, request: Mapping[str, Any]) -> list[dict]: ...


KEPT_PICTURES = 8  # heatmaps a saved notebook keeps as images (the last shown of each tensor)

__all__ = ["InspectWidget", "bundle_source", "in_kernel"]

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


def in_kernel() -> bool:
    """Whether IPython runs in a kernel (a notebook front-end shows the outputs)."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _json_bytes(payload: Mapping[str, Any], widget: InspectWidget) -> bytes:
    """The payload as one binary buffer of JSON. Sent as a dict, ipywidgets walks its ~10⁴
    values twice in Python (for widget references, then for buffers): ~25 ms of each display
    of GPT-2. The front-end parses the buffer once (``payloadOf`` in js/src/index.ts)."""
    return widget.payload_json(payload).encode()


class InspectWidget(anywidget.AnyWidget):
    """The module tree of one inspection. ``selected`` holds the dotted path of the row the
    user selected (a module, '' for the root, or a parameter/buffer), None for none; setting
    it from Python selects that row."""

    _esm = traitlets.Unicode().tag(sync=True)
    payload = traitlets.Dict().tag(sync=True, to_json=_json_bytes)
    selected = traitlets.Unicode(None, allow_none=True).tag(sync=True)

    def __init__(
        self,
        payload: Mapping[str, Any],
        views: Any = None,
        saved: Callable[[], tuple[str, bytes | None]] | None = None,
        values: Values | None = None,
        **kwargs: Any,
    ):
        """`payload`: :func:`~nbinspect.render.payload.build_payload`'s; `views`: what it was
        built with (``analyze.views.view_data``), for the full histograms asked for later;
        `saved`: the text summary (and an optional PNG) a saved notebook shows without the
        widget, asked for when the widget is displayed; `values`: answers the value view's
        requests (``analyze.value_view.ValueAccess``), None where there are no
        values to read."""
        self._views = views
        self._values = values
        # the last picture of each heatmap: (palette index, grid, palette, label), encoded as a PNG
        # only when the saved output is written (not on every request of a zoom)
        self._pictures: dict[tuple[str, str | None], tuple[bytes, tuple[int, int], list[str], str]] = {}
        self._saved_pending = False
        self._saved = saved
        self._saved_ids: list[str] = []
        self._json: tuple[Mapping[str, Any], str] | None = None
        super().__init__(_esm=bundle_source(), payload=dict(payload), **kwargs)

    def payload_json(self, payload: Mapping[str, Any] | None = None) -> str:
        """`payload` (the current one by default) as compact JSON, written once per payload:
        the widget's message and the saved view carry the same text."""
        payload = self.payload if payload is None else payload
        if self._json is None or self._json[0] is not payload:
            self._json = (payload, payload_text(payload))
        return self._json[1]

    def saved_bundle(self, key: str | None = None) -> dict[str, str]:
        """The output a notebook keeps beside the widget's: the offline view of the payload and
        the static summary as text/html (:func:`~nbinspect.render.saved.offline_view`), the
        summary as text/plain."""
        text, image = self._saved() if self._saved is not None else (repr(self), None)
        name = self.payload.get("model", {}).get("name", "")
        key = key or f"nbinspect-{uuid.uuid4().hex}"
        figures = list(self.pictures.values())  # PNGs made now, once per saved output
        return {
            "text/html": offline_view(
                key, self.payload, self.payload_json(), bundle_source(), text, image, alt=name, figures=figures
            ),
            "text/plain": text,
        }

    def _ipython_display_(self) -> None:
        """Two outputs in a notebook: the live widget and the saved view (read where the
        widget cannot render: GitHub, nbconvert/nbviewer, a notebook reopened without its
        kernel); a style in the second shows one of them. A terminal gets the text."""
        from IPython.display import display

        if not in_kernel():  # a terminal, or a shell without a front-end: the one bundle
            data, _ = self._repr_mimebundle_()  # type: ignore[misc]  # anywidget returns (data, metadata)
            display({**data, "text/plain": self._saved()[0] if self._saved else repr(self)}, raw=True)
            return
        # the widget first: the saved view's script, run when its output is inserted, finds
        # the widget's output beside it and draws nothing while the live widget renders
        data, _ = self._repr_mimebundle_()  # type: ignore[misc]  # anywidget returns (data, metadata)
        name = self.payload.get("model", {}).get("name", "")
        display({**data, "text/plain": widget_placeholder(name)}, raw=True)
        key = f"nbinspect-{uuid.uuid4().hex}"
        self._saved_ids.append(key)
        display(self.saved_bundle(key), raw=True, display_id=key)

    def _update_saved(self) -> None:
        """Rewrite the saved outputs of every display of this widget (after the payload changed)."""
        if not self._saved_ids:
            return
        from IPython.display import update_display

        for key in self._saved_ids:
            update_display(self.saved_bundle(key), raw=True, display_id=key)

    @command
    def _histogram(self, msg: Mapping[str, Any], buffers: list[bytes]) -> tuple[dict | None, list[bytes]]:
        """The full-resolution histogram of one row, fetched when the detail panel opens."""
        if self._views is None:
            return None, []
        return histogram(self._views, str(msg.get("name", "")), str(msg.get("kind", "tensor"))), []

    @command
    def _region(self, msg: Mapping[str, Any], buffers: list[bytes]) -> tuple[dict | None, list[bytes]]:
        """One region of a tensor's values at screen resolution (js/src/heatmap.ts asks)."""
        if self._values is None:
            return {"seq": msg.get("seq"), "state": "unavailable", "message": "no values behind this view"}, []
        header, out = self._values.region(msg)
        if header.get("state") == "ok" and msg.get("keep", True):
            self._keep_picture(header, out[0], str(msg.get("label") or header["tensor"]))
        return header, out

    @command
    def _locate(self, msg: Mapping[str, Any], buffers: list[bytes]) -> tuple[list | None, list[bytes]]:
        """The bad values of one tensor (NaN, ±Inf, outliers, zero rows and columns), first
        few of each kind: the list under its heatmap, each hit a button that shows it."""
        rows = self._values.locate_rows(msg) if self._values is not None else None
        return rows, []

    @property
    def pictures(self) -> dict[tuple[str, str | None], tuple[bytes, str]]:
        """(tensor, side) -> (PNG, label) of the last picture of each heatmap shown."""
        import numpy as np

        return {
            key: (palette_png(np.frombuffer(index, np.uint8).reshape(grid), palette), label)
            for key, (index, grid, palette, label) in self._pictures.items()
        }

    def _keep_picture(self, header: Mapping[str, Any], index: bytes, label: str) -> None:
        """Keep the picture for the saved notebook; rewrite the saved output soon (once per
        second at most: a zoom sends many requests)."""
        key = (str(header["tensor"]), header.get("side"))
        self._pictures.pop(key, None)
        self._pictures[key] = (index, tuple(header["grid"]), header["palette"], label)
        while len(self._pictures) > KEPT_PICTURES:
            self._pictures.pop(next(iter(self._pictures)))
        if not self._saved_ids or self._saved_pending:
            return
        self._saved_pending = True
        try:
            import asyncio

            asyncio.get_running_loop().call_later(1.0, self._flush_saved)
        except RuntimeError:  # no running event loop (a test calling the command): now
            self._flush_saved()

    def _flush_saved(self) -> None:
        self._saved_pending = False
        self._update_saved()

    def __repr__(self) -> str:
        model = self.payload.get("model", {})
        modules = len(self.payload.get("modules", {}).get("key", []))
        return f"<InspectWidget {model.get('name', '')}: {modules:,} modules, selected={self.selected!r}>"
