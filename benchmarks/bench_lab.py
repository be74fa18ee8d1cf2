"""``%inspect_model`` to the rendered widget in JupyterLab, against ``torchinfo.summary`` of the
same model to its printed table, in the same notebook, kernel and browser.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_lab.py [--rounds 3]

Starts JupyterLab (tests/browser/jupyterlab_server.py) on a temporary folder holding one
notebook, opens it in headless Chromium (tests/support/chromium.py) and runs its setup cell:
GPT-2 small (``GPT2Config()``) and an 8-layer Llama (``LlamaConfig``), random init, no
download, ``%load_ext nbinspect``, the same models as ``bench_notebook.py``. Then for each
case it runs the torchinfo cell and the magic cell with Ctrl+Enter (the cell selected in
command mode), first the first call of each (torchinfo's first, then the magic's: the
magic's first call also pays the front-end's first load of the widget's bundle), then
`rounds` rounds in turn (best and median).

Every time is measured in the page, from the keydown of the run command:

- **visible**: until the output is on screen: the magic's live widget (``.nbi``, js/src/view.ts)
  in the cell's output area with a table row (``.nbi-body [role=row]``) laid out, or
  torchinfo's printed table ("Total params"); then the end of the next frame (a
  ``requestAnimationFrame``, then a task): the frame that paints it. The ratio is the
  magic's over torchinfo's.
- **reply**: until the prompt shows the execution count: JupyterLab sets it when the
  kernel's execute reply (and its idle status) arrives. The kernel side as a user sees it.
- **kernel**: the cell's own run inside the kernel (IPython's ``pre_run_cell`` to
  ``post_run_cell``, display included), read from the kernel at the end; **run command to
  cell start** (the kernel's ``time.time()`` at ``pre_run_cell`` minus the page's clock at
  the keydown: one machine, one clock) and **cell end to reply** (in the page) are the rest
  of **reply**: the request's way in, and the reply's way out and its handling in a page
  that may be busy rendering the widget.
- **first output**: until the cell's first output (not a printed stream: a warning) is in
  the page (the display message has arrived and JupyterLab made its output area); **front-end** is visible minus this, in two
  parts: **output to widget root**, until a MutationObserver sees the widget's root element
  in the output (the widget manager, anywidget's import of the bundle and the widget's
  render call, which inserts it), and **widget root to painted** (the frame's style, layout
  and paint).
- **the widget's render**: its own first render (``performance.measure("nbinspect:first-render")``
  around the TreeView constructor: payload to DOM, the forced style and layout reads in it
  included, not the frame's style, layout and paint after it).
- **visible - reply**: negative when the widget shows before the reply arrives (the display
  message goes out before the cell ends: what the kernel does after it, and the way back).

Each part's best and median are over its own rounds. **websocket MB** is what the page received
over the kernel's websocket during the run (every message of the cell: the widget's state,
its bundle, the saved view). The load average is printed with each case. torchinfo is the
``bench`` extra (``pip install -e .[bench]``); the kernel inherits this process's
environment, PYTHONPATH included. ``--json FILE`` keeps every run's times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from _measure import LAB_TOKEN, compile_sources, jupyterlab, launch_chromium
from bench_notebook import CASES as NOTEBOOK_CASES
from bench_notebook import MODELS

SETUP = (
    """\
import json, time, torch, torchinfo, transformers
from IPython import get_ipython
_bench_log = []  # [first line, start, end] of every cell run, in order

def _bench_pre(info):
    _bench_log.append([info.raw_cell.strip().splitlines()[0], time.time(), None])

def _bench_post(result):
    if _bench_log and _bench_log[-1][2] is None:
        _bench_log[-1][2] = time.time()

get_ipython().events.register("pre_run_cell", _bench_pre)
get_ipython().events.register("post_run_cell", _bench_post)
"""
    + MODELS
    + """\
time.sleep(2)  # the kernels' background warm-up, as while a user reads the first cell
import nbinspect; print("nbinspect from", nbinspect.__file__)
"""
)
REPORT = "print('BENCH=' + json.dumps([e for e in _bench_log if e[2] is not None]))"
CASES = NOTEBOOK_CASES  # the same cells as bench_notebook.py, timed to the painted widget
# Settings beside the server's own (jupyterlab_server writes its files, leaves others).
_SETTINGS = {
    # no saves while the cells run: the run is the only work the server does
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}

# Runs in the page before the run command: watches cell `index` until its new output
# (`kind` "magic": the live widget with a laid-out row; else torchinfo's table) is painted
# and its prompt shows the execution count; window.__bench resolves to the times (ms since
# the run command's keydown) and the widget's own first-render measures made meanwhile.
WATCH = """
({ index, kind }) => {
  const cell = document.querySelectorAll(".jp-Notebook .jp-Cell")[index];
  for (const el of cell.querySelectorAll(".jp-OutputArea-child, .jp-OutputArea-output, .nbi")) el.dataset.benchOld = "1";
  const measures = performance.getEntriesByName("nbinspect:first-render").length;
  const prompt = cell.querySelector(".jp-InputPrompt");
  window.__bench = new Promise((resolve, reject) => {
    const r = { t0: null, reply: null, output: null, appear: null, laid: null, visible: null };
    let running = false;
    const newOutput = () => {
      if (kind === "magic")
        return [...cell.querySelectorAll(".jp-OutputArea-output .nbi")].find(
          (e) => !e.dataset.benchOld && !e.closest(".nbinspect-saved"));
      return [...cell.querySelectorAll(".jp-OutputArea-output")].find(
        (e) => !e.dataset.benchOld && e.textContent.includes("Total params"));
    };
    const shown = (out) => {
      const row = kind === "magic" ? out.querySelector(".nbi-body [role=row]") : out;
      return row && out.checkVisibility() && row.getBoundingClientRect().height > 0;
    };
    const waits = kind === "magic" || kind === "torchinfo";  // else the reply is all (setup, report)
    const done = () => {
      if ((waits && r.visible === null) || r.reply === null) return;
      observer.disconnect();
      clearTimeout(timer);
      const since = (t) => (t === null ? null : t - r.t0);
      resolve({
        epoch: performance.timeOrigin + r.t0,
        reply: since(r.reply), output: since(r.output), appear: since(r.appear), laid: since(r.laid), visible: since(r.visible),
        render: performance.getEntriesByName("nbinspect:first-render").slice(measures).map((m) => m.duration),
      });
    };
    const check = () => {
      if (r.t0 === null) return;
      const now = performance.now();
      if (prompt.textContent.includes("*")) running = true;
      else if (running && r.reply === null && /\\d/.test(prompt.textContent)) {
        r.reply = now;
        const error = cell.querySelector('[data-mime-type="application/vnd.jupyter.error"]');
        if (error) {
          observer.disconnect();
          clearTimeout(timer);
          reject(new Error(`cell ${index} failed: ${error.textContent.slice(-2000)}`));
          return;
        }
      }
      const shownOutput = (e) => !e.dataset.benchOld && !e.querySelector('[data-mime-type^="application/vnd.jupyter.std"]');
      if (r.output === null && [...cell.querySelectorAll(".jp-OutputArea-child")].some(shownOutput)) r.output = now;
      const out = newOutput();
      if (out && r.appear === null) r.appear = now;
      done();
    };
    // each frame: laid out now, so painted by the end of this frame (a task after it)
    const frame = () => {
      if (!waits) return;
      if (r.t0 !== null && r.laid === null) {
        const out = newOutput();
        if (out && shown(out)) {
          r.laid = performance.now();
          setTimeout(() => { r.visible = performance.now(); check(); }, 0);
          return;
        }
      }
      requestAnimationFrame(frame);
    };
    const observer = new MutationObserver(check);
    observer.observe(cell, { subtree: true, childList: true, characterData: true });
    document.addEventListener("keydown", () => { r.t0 = performance.now(); check(); requestAnimationFrame(frame); },
                              { capture: true, once: true });
    const timer = setTimeout(() => reject(new Error(`cell ${index} not shown in 15 minutes`)), 900_000);
  });
}
"""


def notebook(cells: list[str]) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c} for c in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


class Lab:
    """The notebook open in JupyterLab: runs a cell and times it in the page."""

    def __init__(self, page) -> None:
        self.page = page
        self.received = 0  # bytes from the kernel's websocket
        page.on("websocket", self._watch)

    def _watch(self, ws) -> None:
        if "/api/kernels/" in ws.url:
            ws.on("framereceived", self._count)

    def _count(self, frame: str | bytes) -> None:
        self.received += len(frame.encode() if isinstance(frame, str) else frame)

    def cell(self, index: int):
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def wait_idle(self) -> None:
        from playwright.sync_api import expect

        expect(self.page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first).to_be_visible(timeout=900_000)

    def run(self, index: int, kind: str) -> dict:
        """Runs cell `index` and returns its times in seconds (see the module docstring) and
        the websocket's bytes."""
        from playwright.sync_api import expect

        self.wait_idle()
        cell = self.cell(index)
        cell.locator(".jp-InputPrompt").click()
        expect(cell).to_have_class(_ACTIVE)
        expect(self.page.locator(".jp-Notebook.jp-mod-commandMode")).to_have_count(1)
        self.page.evaluate(WATCH, {"index": index, "kind": kind})
        before = self.received
        self.page.keyboard.press("Control+Enter")
        out = self.page.evaluate("() => window.__bench")
        self.wait_idle()
        # in seconds; "epoch": the run command's keydown since 1970, as the kernel's time.time()
        times = {k: (v / 1000 if isinstance(v, (int, float)) else v) for k, v in out.items() if k != "render"}
        times["render"] = sum(out["render"]) / 1000 if out["render"] else None
        times["renders"] = len(out["render"])
        times["bytes"] = self.received - before
        return times

    def output_text(self, index: int) -> str:
        return self.cell(index).locator(".jp-OutputArea-output").last.inner_text()


_ACTIVE = re.compile(r"\bjp-mod-active\b")


def _fmt(v: float | None, unit: str = "") -> str:
    return "     -" if v is None else f"{v:6.2f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write every run's times to FILE")
    args = parser.parse_args()
    compile_sources()  # as installed: the first calls do not compile nbinspect
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    from playwright.sync_api import sync_playwright

    print(f"load average {os.getloadavg()[0]:.1f}; PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
    cells = [SETUP]
    slots: dict[str, tuple[int, int]] = {}  # case -> (torchinfo cell, magic cell)
    for label, (magic, baseline) in CASES.items():
        slots[label] = (len(cells), len(cells) + 1)
        cells += [baseline, magic]
    report = len(cells)
    cells.append(REPORT)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        (root / "bench.ipynb").write_text(json.dumps(notebook(cells)))
        settings = Path(tmp) / "jupyter-home" / "settings"
        for rel, content in _SETTINGS.items():
            (settings / rel).parent.mkdir(parents=True, exist_ok=True)
            (settings / rel).write_text(json.dumps(content))
        with jupyterlab(root, timeout=300) as url, sync_playwright() as p:
            browser = launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                lab = Lab(page)
                page.goto(f"{url}/lab/tree/bench.ipynb?reset&token={LAB_TOKEN}")
                from playwright.sync_api import expect

                expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(len(cells), timeout=300_000)
                start = time.perf_counter()
                lab.run(0, "setup")
                print(f"  setup cell {time.perf_counter() - start:.1f} s; {lab.output_text(0).strip()}")
                runs: list[tuple[str, str, dict]] = []  # (case, which, times) in the order run
                for label, (base_cell, magic_cell) in slots.items():
                    runs.append((label, "first torchinfo", lab.run(base_cell, "torchinfo")))
                    runs.append((label, "first magic", lab.run(magic_cell, "magic")))
                    for _ in range(args.rounds):
                        runs.append((label, "torchinfo", lab.run(base_cell, "torchinfo")))
                        runs.append((label, "magic", lab.run(magic_cell, "magic")))
                    runs[-1][2]["load"] = os.getloadavg()[0]
                lab.run(report, "report")
                text = lab.output_text(report)
                log = json.loads(text[text.index("BENCH=") + 6 :])
            finally:
                browser.close()
    # the kernel's log: one entry per run in order (the hooks came with the setup cell)
    if len(log) != len(runs):
        raise RuntimeError(f"{len(runs)} runs but the kernel logged {len(log)}: {log}")
    for (_, _, times), (_, start, end) in zip(runs, log):
        times["kernel"] = end - start
        times["queue"] = start - times["epoch"]  # the same machine's clock on both sides
        times["back"] = times["reply"] - (end - times["epoch"])
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    report_table(runs)


def report_table(runs: list[tuple[str, str, dict]]) -> None:
    for label in CASES:
        mine = [(which, t) for case, which, t in runs if case == label]
        load = next(t["load"] for which, t in reversed(mine) if "load" in t)

        def pick(which: str, key: str, mine=mine) -> list[float]:
            return [t[key] for w, t in mine if w == which and t.get(key) is not None]

        print(f"\n%inspect_model {label}   (load {load:.1f})")
        print("                                    first     best   median   (seconds)")
        rows = [
            ("torchinfo, table visible", "torchinfo", "visible"),
            ("magic, widget visible", "magic", "visible"),
        ]
        for name, which, key in rows:
            first, rest = pick(f"first {which}", key), pick(which, key)
            print(f"  {name:32s} {_fmt(first[0])}   {_fmt(min(rest))}   {_fmt(statistics.median(rest))}")
        bf, bs = pick("first torchinfo", "visible"), pick("torchinfo", "visible")
        mf, ms = pick("first magic", "visible"), pick("magic", "visible")
        print(
            f"  {'ratio magic / torchinfo':32s} {mf[0] / bf[0]:6.2f}x   {min(ms) / min(bs):6.2f}x   "
            f"{statistics.median(ms) / statistics.median(bs):6.2f}x"
        )
        parts = [
            ("magic: run command to cell start", "magic", "queue"),
            ("magic: kernel (cell's own run)", "magic", "kernel"),
            ("magic: cell end to reply in page", "magic", "back"),
            ("magic: execute reply in page", "magic", "reply"),
            ("magic: first output in page", "magic", "output"),
            ("magic: front-end (vis. - output)", "magic", "front"),
            ("magic:   output to widget root", "magic", "mount"),
            ("magic:     the widget's render", "magic", "render"),
            ("magic:   widget root to painted", "magic", "paint"),
            ("magic: visible - reply", "magic", "after"),
            ("torchinfo: run command to start", "torchinfo", "queue"),
            ("torchinfo: kernel", "torchinfo", "kernel"),
            ("torchinfo: cell end to reply", "torchinfo", "back"),
            ("torchinfo: execute reply", "torchinfo", "reply"),
            ("torchinfo: front-end", "torchinfo", "front"),
        ]
        for _, t in mine:
            t["after"] = t["visible"] - t["reply"]
            t["front"] = t["visible"] - t["output"]
            t["mount"] = t["appear"] - t["output"]
            t["paint"] = t["visible"] - t["appear"]
        for name, which, key in parts:
            first, rest = pick(f"first {which}", key), pick(which, key)
            head = _fmt(first[0]) if first else "     -"
            print(
                f"  {name:32s} {head}   {_fmt(min(rest) if rest else None)}   "
                f"{_fmt(statistics.median(rest) if rest else None)}"
            )
        mb = {w: statistics.median(pick(w, "bytes")) / 1e6 for w in ("torchinfo", "magic")}
        renders = {t["renders"] for w, t in mine if "magic" in w}
        print(
            f"  websocket MB per run: torchinfo {mb['torchinfo']:.3f}, magic {mb['magic']:.3f}; "
            f"widget first renders per run: {sorted(renders)}"
        )


if __name__ == "__main__":
    main()
