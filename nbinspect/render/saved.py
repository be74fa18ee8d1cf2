"""What a notebook keeps of a widget: one HTML output that reads well wherever the notebook
is opened later.

After the live widget's output, a notebook front-end gets a second output, written here:

- a static block first in reading order: an optional image (a training run's curves) and the
  text summary, preformatted in a monospace font. Renderers without JavaScript (GitHub,
  JupyterLab on an untrusted notebook) show this and nothing else: scripts and styles are
  stripped, and the data the view needs sits in attributes, never as text;
- the widget's bundle and payload in attributes, and a small module script that renders the
  same view as the widget, offline, where scripts run (nbconvert/nbviewer HTML, JupyterLab on
  a trusted notebook without a kernel); the static block then folds into a <details>;
- a style that, in JupyterLab and Notebook 7 (and nbconvert's lab template), hides this output
  while the live widget beside it renders, and hides the widget's output where it cannot
  render ("Error displaying widget: model not found", or nbconvert's widget placeholder
  whose scripts come from a CDN), so exactly one view shows.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from typing import Any

from .display import saved_view
from .graph_svg import graph_svg

__all__ = ["offline_view", "widget_placeholder"]

# One output area child per output: JupyterLab, Notebook 7 and nbconvert's lab template all
# use .jp-OutputArea-child; the widget's root element is .nbi (js/src/widget.ts).
_STYLE = """<style>
.jp-OutputArea-child:has(#{key}):has(+ .jp-OutputArea-child .nbi),
.jp-OutputArea-child:has(.nbi) + .jp-OutputArea-child:has(#{key}) {{ display: none; }}
.jp-OutputArea-child:has(+ .jp-OutputArea-child #{key}):has(.jupyter-widgets):not(:has(.nbi)),
.jp-OutputArea-child:has(#{key}) + .jp-OutputArea-child:has(.jupyter-widgets):not(:has(.nbi)) {{ display: none; }}
#{key} > details > summary {{ cursor: pointer; font-size: 12px; opacity: 0.7; }}
</style>"""

# Runs where scripts run: the widget's bundle from the attribute, through a blob URL (as
# anywidget does), against an in-page model holding the payload. Skipped where the live
# widget shows the view (JupyterLab or Notebook 7 with a kernel).
_LOADER = """<script type="module">
const root = document.getElementById("{key}");
const cell = root && root.closest(".jp-OutputArea-child");
const before = cell && cell.previousElementSibling;  // the widget's own output
// JupyterLab / Notebook 7 show "Loading widget..." there (or nothing yet, under load) until
// the widget renders (the live widget shows: nothing to draw here) or fails (no kernel: an
// error or the text fallback; draw the saved view).
const live = async () => {{
  for (let waited = 0; before && waited < 15000; waited += 100) {{
    if (before.querySelector(".nbi")) return true;
    const text = before.textContent.trim();
    if (text && !/Loading widget/.test(text)) return false;
    await new Promise((r) => setTimeout(r, 100));
  }}
  return false;
}};
if (root && !root.dataset.rendered && !(await live())) {{
  root.dataset.rendered = "1";
  const data = root.querySelector(".nbinspect-data");
  const state = {{ payload: JSON.parse(data.getAttribute("data-payload")), selected: null }};
  const model = {{
    get: (key) => state[key], set: (key, value) => {{ state[key] = value; }},
    save_changes: () => {{}}, send: () => {{}}, on: () => {{}}, off: () => {{}},
  }};
  const url = URL.createObjectURL(new Blob([data.getAttribute("data-bundle")], {{ type: "text/javascript" }}));
  const view = root.querySelector(".nbinspect-view");
  try {{
    const widget = (await import(url)).default;
    widget.render({{ model, el: view }});
    const fold = document.createElement("details");
    fold.innerHTML = "<summary>Text summary</summary>";
    const block = root.querySelector(".nbinspect-static");
    block.replaceWith(fold);
    fold.append(block);
  }} catch (error) {{
    view.remove();  // the static block stays
    console.error("nbinspect: the offline view did not render", error);
  }}
}}
</script>"""


def widget_placeholder(name: str) -> str:
    """The widget output's text/plain: what a reader without the widget sees in its place
    (one line; the summary sits in the output beside it)."""
    return f"nbinspect: {name} (the interactive view needs Jupyter; the summary is in the output below)"


def offline_view(
    key: str,
    payload: Mapping[str, Any],
    payload_json: str,
    bundle: str,
    text: str,
    image_png: bytes | None = None,
    alt: str = "",
    figures: Sequence[tuple[bytes, str]] = (),
) -> str:
    """The saved output's HTML: static block (`image_png` above `text`), the offline view
    of `payload` (written as `payload_json`) rendered by `bundle` where scripts run, and the
    style pairing it with the live widget. `key` is unique per output (an HTML id: letters,
    digits, '-')."""
    image = ""
    if image_png is not None:
        encoded = base64.b64encode(image_png).decode("ascii")
        image = f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}" style="max-width:100%">'
    if payload.get("graph"):  # the top-level dataflow, as a picture renderers without JavaScript show
        svg = base64.b64encode(graph_svg(payload["graph"], alt).encode()).decode("ascii")
        image += (
            f'<img src="data:image/svg+xml;base64,{svg}" alt="dataflow of {html.escape(alt)}" style="max-width:100%">'
        )
    for png, label in figures:  # the value view's heatmaps that were open, as last drawn
        encoded = base64.b64encode(png).decode("ascii")
        image += (
            f'<figure class="nbinspect-heatmap"><img src="data:image/png;base64,{encoded}" alt="{html.escape(label)}"'
            f' style="max-width:100%;image-rendering:pixelated"><figcaption>{html.escape(label)}</figcaption></figure>'
        )
    return (
        f'<div id="{key}" class="nbinspect-saved">'
        + _STYLE.format(key=key)
        + '<div class="nbinspect-view"></div>'
        + f'<div class="nbinspect-static">{image}{saved_view(text)}</div>'
        + f'<div class="nbinspect-data" hidden data-payload="{html.escape(payload_json)}"'
        + f' data-bundle="{html.escape(bundle)}"></div>'
        + _LOADER.format(key=key)
        + "</div>"
    )
