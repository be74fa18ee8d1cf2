"""The dataflow graph (issue 29): what recording it costs the trace, and how fast the widget
draws it.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_graph.py [--repeat 5] [--no-browser]

1. Capture: a Llama-7B config (transformers) on the meta device, input [1, 128], traced with
   and without the dataflow (``run_trace(graph=...)``), interleaved, CPU time
   (``time.process_time``); the frames built from it (``analyze/graph.py``) timed apart.
   Target: graph + frames <= 1.3x the plain trace.
2. Drawing: the standalone page of Llama-7B and Llama-70B configs in chromium; the Graph
   mode's first view, then every layer unfolded and every call expanded (the largest view),
   each the time the page measured for view + layout + SVG build (``data-render-ms``, split
   into its parts), best and median of `repeat`. Target: <= 300 ms up to 2,000 nodes.

Reports ``os.getloadavg()`` beside the figures: on a shared machine they are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _measure import interleaved, launch_chromium

import nbinspect
from nbinspect.analyze.graph import graph_frames
from nbinspect.analyze.trace_frames import flow
from nbinspect.backends.torch.trace import run_trace

CONFIGS = {
    "llama-7b": {},
    "llama-70b": {
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
    },
}


def meta_llama(name: str) -> torch.nn.Module:
    import transformers

    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(transformers.LlamaConfig(**CONFIGS[name]))


def capture(repeat: int) -> dict:
    model = meta_llama("llama-7b")
    insp = nbinspect.inspect(model, stats=False)
    ids = (1, 128)
    kw = {"input_dtype": torch.long}
    times = interleaved(
        {
            "plain": lambda: run_trace(model, (ids,), graph=False, **kw),
            "graph": lambda: run_trace(model, (ids,), graph=True, **kw),
        },
        repeat,
    )
    result = run_trace(model, (ids,), **kw)
    calls = flow(result)
    start = time.process_time()
    for _ in range(repeat):
        graph_frames(result.dataflow, calls, insp.frames["layers"], insp.frames["params"])
    frames_s = (time.process_time() - start) / repeat
    plain, graph = times["plain"][1], times["graph"][1]
    return {
        "model": "llama-7b config on meta, input [1, 128]",
        "plain_trace_s": round(plain, 4),
        "trace_with_graph_s": round(graph, 4),
        "graph_frames_s": round(frames_s, 4),
        "capture_ratio": round(graph / plain, 3),
        "capture_and_frames_ratio": round((graph + frames_s) / plain, 3),
        "nodes": len(result.dataflow.kind),
        "edges": len(result.dataflow.src),
        "note": "median CPU seconds of interleaved runs",
    }


def drawing(repeat: int) -> dict:
    out = {}
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = launch_chromium(p)
        for name in CONFIGS:
            path = Path(tmp) / f"{name}.html"
            nbinspect.trace(meta_llama(name), (1, 128), input_dtype=torch.long).to_html(path)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(path.as_uri())
            page.select_option(".nbi-mode", "graph")
            graph = page.locator(".nbi-graph")
            first = float(graph.get_attribute("data-render-ms"))
            largest, parts = [], []
            for _ in range(repeat):
                page.get_by_role("button", name="Unfold repeats").click()
                largest.append(float(graph.get_attribute("data-render-ms")))
                parts.append(graph.get_attribute("data-parts"))
                page.locator(".nbi-toolbar").get_by_role("button", name="Collapse all").click()
            page.get_by_role("button", name="Unfold repeats").click()
            out[name] = {
                "first_view_ms": first,
                "largest_view": page.locator(".nbi-graph-status").text_content(),
                "largest_view_ms_best": min(largest),
                "largest_view_ms_median": statistics.median(largest),
                "parts_ms_view_layout_svg": parts,
            }
            page.close()
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    report = {"load_before": os.getloadavg(), "capture": capture(args.repeat)}
    if not args.no_browser:
        report["drawing"] = drawing(args.repeat)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
