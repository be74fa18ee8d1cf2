"""Widget benchmarks: payload size for a GPT-2-sized model, and the front-end on a
10,000-module tree in headless chromium (first render, sort, expand-all, search).

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_widget.py
    ... bench_widget.py --baseline old/widget.js   # the same runs on another bundle, interleaved

Browser figures are wall-clock milliseconds from the action to the end of the next
rendered frame (requestAnimationFrame, then a task), median of several runs. With
``--baseline`` both bundles render the same payload in the same page, run after run in
turn, so load from other processes hits both alike; the ratio is this bundle's median over
the baseline's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from _measure import launch_chromium
from torch import nn

import nbinspect
from nbinspect.examples import TinyLM
from nbinspect.inspection import Inspection
from nbinspect.render.widget import bundle_source

# Runs in the page: renders each bundle (the inlined one when `sources` is empty) into a fresh
# element in turn, times the first render and then each of `steps` in order; one result
# object per bundle (ms per run for each step, and the row count after "expand_all").
HARNESS = """
async ({ runs, sources, steps }) => {
  document.getElementById("nbinspect-root").remove();
  const texts = sources.length ? sources : [document.getElementById("nbinspect-bundle").textContent];
  const widgets = [];
  for (const text of texts) widgets.push((await import(URL.createObjectURL(new Blob([text], { type: "text/javascript" })))).default);
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const time = async (action) => { const t0 = performance.now(); action(); await frame(); return performance.now() - t0; };
  const button = (el, text) => [...el.querySelectorAll(".nbi-button")].find((b) => b.textContent === text);
  const sortBy = (el, column) => el.querySelector(`[role=columnheader][data-column="${column}"] button`).click();
  const search = (el, text) => { const box = el.querySelector(".nbi-search"); box.value = text; box.dispatchEvent(new Event("input")); };
  const actions = {
    sort: (el) => sortBy(el, "params"),
    expand_all: (el) => button(el, "Expand all").click(),
    sort_expanded: (el) => sortBy(el, "memory"),
    search: (el) => search(el, "blocks.1234"),
    collapse_all: (el) => button(el, "Collapse all").click(),
  };
  const results = widgets.map(() => Object.fromEntries(["first_render", ...steps].map((s) => [s, []])));
  const order = widgets.map((_, w) => w);
  for (let i = 0; i < runs; i++) for (const w of i % 2 ? [...order].reverse() : order) {  // who goes first alternates
    const widget = widgets[w];
    const out = results[w];
    const el = document.createElement("div");
    document.body.append(el);
    let cleanup;
    out.first_render.push(await time(() => { cleanup = widget.render({ model: window.nbinspectModel, el }); }));
    for (const step of steps) {
      out[step].push(await time(() => actions[step](el)));
      if (step === "expand_all") out.rows = Number(el.querySelector("[role=treegrid]").getAttribute("aria-rowcount")) - 1;
      if (step === "search") { search(el, ""); await frame(); }
    }
    cleanup();
    el.remove();
    await frame();
  }
  return results;
}
"""
STEPS = ("sort", "expand_all", "sort_expanded", "search", "collapse_all")


def wide_tree(blocks: int = 2500) -> nn.Module:
    """1 + 4 * blocks modules; neighbouring blocks differ in width, so nothing folds."""
    return nn.Sequential(
        *[nn.Sequential(nn.Linear(8, 8 + i % 2), nn.ReLU(), nn.LayerNorm(8 + i % 2)) for i in range(blocks)]
    )


def payload_bytes(insp: Inspection) -> tuple[int, int, float]:
    t0 = time.perf_counter()
    text = json.dumps(insp._payload(), separators=(",", ":"), allow_nan=False)  # what the widget is sent
    seconds = time.perf_counter() - t0
    return len(text.encode()), len(gzip.compress(text.encode())), seconds


def gpt2_payload() -> None:
    torch.manual_seed(0)
    model = TinyLM(vocab_size=50257, d_model=768, n_layer=12, n_head=12, context=1024)
    plain = nbinspect.inspect(model, stats=False)
    full = nbinspect.inspect(model)
    print(
        f"GPT-2-sized model: {plain.totals['total_params']:,} parameters, {len(plain.layers)} modules, {len(plain.params)} tensors"
    )
    for label, insp in (("structure only", plain), ("with stats (tensor + module rows)", full)):
        raw, packed, seconds = payload_bytes(insp)
        print(f"  payload {label}: {raw:,} bytes JSON, {packed:,} gzipped, built in {seconds * 1000:.0f} ms")


def render_times(
    insp: Inspection, runs: int, steps: tuple[str, ...] = STEPS, sources: list[str] | None = None
) -> tuple[float, list[dict]]:
    """`insp`'s standalone page in headless chromium: (ms from navigation to the first rows,
    HARNESS's result for each bundle of `sources`, or for the page's own)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "page.html"
        insp.to_html(page_path)
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            t0 = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_selector(".nbi-body [role=row]")
            load = (time.perf_counter() - t0) * 1000
            results = page.evaluate(HARNESS, {"runs": runs, "sources": sources or [], "steps": list(steps)})
            browser.close()
    return load, results


def browser_bench(runs: int, baseline: Path | None = None) -> None:
    insp = nbinspect.inspect(wide_tree())
    raw, packed, _ = payload_bytes(insp)
    print(
        f"10,000-module tree: {len(insp.layers):,} modules, {len(insp.params):,} tensors; payload {raw:,} bytes ({packed:,} gzipped)"
    )
    sources = None if baseline is None else [bundle_source(), baseline.read_text(encoding="utf-8")]
    load, (result, *base) = render_times(insp, runs, sources=sources)
    print(f"  page load to first rows (file://, includes JSON parse and bundle import): {load:.0f} ms")
    print(f"  rows after expand-all: {result.pop('rows'):,}; median (min–max) of {runs} runs, ms:")
    if base:
        print(f"  {'':14s} {'this bundle':>22s}   {'baseline ' + baseline.name:>22s}   ratio")
    for name, values in result.items():
        line = f"    {name:14s} {statistics.median(values):7.1f} ({min(values):5.1f}–{max(values):6.1f})"
        if base:
            ref = base[0][name]
            ratio = statistics.median(values) / statistics.median(ref)
            line += f"   {statistics.median(ref):7.1f} ({min(ref):5.1f}–{max(ref):6.1f})   {ratio:.2f}"
        print(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--skip-gpt2", action="store_true")
    parser.add_argument("--baseline", type=Path, help="another widget.js to time alongside, e.g. main's")
    args = parser.parse_args(argv)
    browser_bench(args.runs, args.baseline)
    if not args.skip_gpt2:
        gpt2_payload()


if __name__ == "__main__":
    sys.exit(main())
