"""A standalone HTML page of the widget: the bundle and the payload inlined, no network.

The page imports the inlined bundle through a blob URL (as anywidget does in a notebook)
and renders it against a small in-page model that holds the payload.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .graph_svg import graph_svg
from .payload import payload_text

__all__ = ["standalone_html"]

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>{title}</title>
<style>
:root {{
  --jp-layout-color0: #ffffff; --jp-layout-color1: #ffffff; --jp-layout-color2: #eeeeee;
  --jp-layout-color3: #bdbdbd; --jp-ui-font-color0: #000000de; --jp-ui-font-color1: #000000de;
  --jp-ui-font-color2: #0000008a; --jp-ui-font-color3: #00000061; --jp-border-color1: #bdbdbd;
  --jp-border-color2: #e0e0e0; --jp-brand-color1: #1976d2; --jp-brand-color3: #bbdefb;
  --jp-warn-color1: #f57c00; --jp-error-color1: #d32f2f;
}}
@media (prefers-color-scheme: dark) {{
  :root {{
    --jp-layout-color0: #111111; --jp-layout-color1: #212121; --jp-layout-color2: #424242;
    --jp-layout-color3: #616161; --jp-ui-font-color0: #ffffff; --jp-ui-font-color1: #ffffffde;
    --jp-ui-font-color2: #ffffff8a; --jp-ui-font-color3: #ffffff61; --jp-border-color1: #616161;
    --jp-border-color2: #424242; --jp-brand-color1: #42a5f5; --jp-brand-color3: #0d47a1;
    --jp-warn-color1: #ffb74d; --jp-error-color1: #ef5350;
  }}
}}
body {{ margin: 16px; background: var(--jp-layout-color0); color: var(--jp-ui-font-color1);
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
pre.nbinspect-text {{ margin-top: 16px; font-size: 12px; overflow-x: auto; }}
</style>
</head>
<body>
<div id="nbinspect-root"></div>
{static}{appendix}<script type="application/json" id="nbinspect-payload">{payload}</script>
<script type="text/plain" id="nbinspect-bundle">{bundle}</script>
<script type="module">
const text = (id) => document.getElementById(id).textContent;
const state = {{ payload: JSON.parse(text("nbinspect-payload")), selected: null }};
const handlers = new Map();
const model = {{
  get: (key) => state[key],
  set: (key, value) => {{ state[key] = value; }},
  save_changes: () => {{}},
  send: () => {{}},
  on: (name, fn) => {{ handlers.set(name, fn); }},
  off: (name) => {{ handlers.delete(name); }},
  // what a kernel changing a trait does (a page has none: tests and embedders feed live payloads)
  update: (key, value) => {{ state[key] = value; handlers.get(`change:${{key}}`)?.(); }},
}};
const url = URL.createObjectURL(new Blob([text("nbinspect-bundle")], {{ type: "text/javascript" }}));
const widget = (await import(url)).default;
widget.render({{ model, el: document.getElementById("nbinspect-root") }});
window.nbinspectModel = model;
</script>
</body>
</html>
"""


_CLOSE = re.compile(r"</(script)", re.IGNORECASE)


def _script_safe(text: str) -> str:
    """Text that cannot close the <script> element it sits in."""
    return _CLOSE.sub(r"<\\/\1", text).replace("<!--", "<\\!--")


def standalone_html(
    payload: Mapping[str, Any],
    bundle: str,
    title: str,
    appendix: Sequence[str] = (),
    figures: Sequence[tuple[bytes, str]] = (),
) -> str:
    """The page: `payload` (JSON-safe, see :mod:`nbinspect.render.payload`) rendered by `bundle`,
    then the `appendix` texts (memory plan, flow) as preformatted blocks and the `figures`
    (PNG, label: the value view's heatmaps last shown in the notebook) as images."""
    data = payload_text(payload).replace("<", "\\u003c")
    blocks = "".join(f'<pre class="nbinspect-text">{html.escape(text)}</pre>\n' for text in appendix)
    blocks += "".join(
        f'<figure class="nbinspect-heatmap"><img src="data:image/png;base64,{base64.b64encode(png).decode()}"'
        f' alt="{html.escape(label)}" style="image-rendering:pixelated;max-width:100%">'
        f"<figcaption>{html.escape(label)}</figcaption></figure>\n"
        for png, label in figures
    )
    graph = payload.get("graph")
    static = f"<noscript>{graph_svg(graph, title)}</noscript>\n" if graph else ""  # no JavaScript: the graph's picture
    return _PAGE.format(
        title=html.escape(title), payload=data, bundle=_script_safe(bundle), appendix=blocks, static=static
    )
