"""A widget page whose kernel is this Python process: the bundle renders an InspectWidget's
payload, and its model's ``send`` answers the widget's own commands (``_region``, ``_locate``,
``_histogram``, in anywidget's command protocol) through playwright, buffers and all. What a
notebook's comm does, without a Jupyter server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from nbinspect.render.widget import InspectWidget, bundle_source

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>body{{margin:8px;font-family:sans-serif}}
@media (prefers-color-scheme: dark) {{ body {{ background:#111; color:#eee; }} }}</style></head>
<body><div id="root"></div><script type="module">
const url = URL.createObjectURL(new Blob([document.getElementById("bundle").textContent], {{ type: "text/javascript" }}));
const widget = (await import(url)).default;
const state = {{ payload: {payload}, selected: null }};
const b64 = (s) => {{ const bin = atob(s); const a = new Uint8Array(bin.length); for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i); return new DataView(a.buffer); }};
const custom = new Set();  // msg:custom listeners: a command's reply goes to them, as a comm's does
const model = {{
  get: (k) => state[k], set: (k, v) => {{ state[k] = v; }}, save_changes() {{}},
  on(event, f) {{ if (event === "msg:custom") custom.add(f); }},
  off(event, f) {{ custom.delete(f); }},
  async send(content) {{  // anywidget's command protocol, answered by this Python process
    const [reply, buffers] = JSON.parse(await window.pyInvoke(content.name, JSON.stringify(content.msg)));
    const message = {{ id: content.id, kind: "anywidget-command-response", response: reply }};
    for (const f of [...custom]) f(message, buffers.map(b64));
  }},
}};
widget.render({{ model, el: document.getElementById("root"), experimental: {{}} }});
window.nbiReady = true;
</script><script id="bundle" type="text/plain">{bundle}</script></body></html>"""


def open_live(page, result, tmp_path: Path, name: str) -> InspectWidget:
    """Load `result`'s widget into `page`, answering its commands in this process."""
    widget = result.widget()

    def call(command: str, msg: str):
        reply, buffers = getattr(widget, f"_{command.lstrip('_')}")(json.loads(msg), [])
        return json.dumps([reply, [base64.b64encode(b).decode("ascii") for b in buffers]])

    page.expose_function("pyInvoke", call)
    path = tmp_path / f"{name}.html"
    bundle = bundle_source().replace("</script", "<\\/script")
    path.write_text(_PAGE.format(payload=json.dumps(widget.payload), bundle=bundle), encoding="utf-8")
    page.goto(path.as_uri())
    page.wait_for_function("window.nbiReady === true")
    return widget
