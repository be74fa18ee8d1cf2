"""Frontier-sized configs on the meta device, and the widget on a many-module MoE tree.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_moe.py [--runs 5]

1. transformers configs with their defaults (DeepSeek-V3, Mixtral, Qwen2-MoE) built on
   meta: seconds for the MoE summary, per-expert rows (``split_experts`` + ``inspect``), the
   training-memory plan without and with a traced input; a Llama-70B-shaped config traced.
2. An old-style model with one ``nn.Linear`` per expert (32 layers x 160 experts: 20,000+
   modules) and DeepSeek-V3 split into per-expert rows: payload size and first render in
   headless chromium, against the 10,000-module tree of ``bench_widget.py`` as the baseline.

Wall-clock seconds on a 2-core machine shared with other jobs: figures vary between runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from bench_widget import CHROMIUM, FLAGS, payload_bytes, wide_tree  # noqa: E402  (needs the sys.path line above)

import nbinspect  # noqa: E402  (imported after the path setup, like the helpers)
from tests.moe_models import LLAMA_70B, LinearExpertsLM, hf_moe  # noqa: E402  (needs the sys.path line above)

RENDER = """
async ({ runs }) => {
  document.getElementById("nbinspect-root").remove();
  const text = document.getElementById("nbinspect-bundle").textContent;
  const widget = (await import(URL.createObjectURL(new Blob([text], { type: "text/javascript" })))).default;
  const frame = () => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  const out = { first_render: [], expand_all: [] };
  for (let i = 0; i < runs; i++) {
    const el = document.createElement("div");
    document.body.append(el);
    let cleanup;
    let t0 = performance.now();
    cleanup = widget.render({ model: window.nbinspectModel, el });
    await frame();
    out.first_render.push(performance.now() - t0);
    t0 = performance.now();
    [...el.querySelectorAll(".nbi-button")].find((b) => b.textContent === "Expand all").click();
    await frame();
    out.expand_all.push(performance.now() - t0);
    cleanup();
    el.remove();
    await frame();
  }
  return out;
}
"""


def timed(action):
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def configs() -> None:
    import transformers

    print("Configs on the meta device (transformers defaults), seconds:")
    for name in ("DeepseekV3Config", "MixtralConfig", "Qwen2MoeConfig"):
        model, build = timed(lambda n=name: hf_moe(getattr(transformers, n), dtype=torch.bfloat16))
        report, summary = timed(lambda m=model: nbinspect.moe(m))
        split, per_expert = timed(lambda m=model: nbinspect.inspect(nbinspect.split_experts(m), stats=False))
        _, plan = timed(lambda m=model: nbinspect.memory(m, optimizer="adamw", precision="bf16"))
        _, traced_plan = timed(
            lambda m=model: nbinspect.memory(
                m, input=(1, 128), input_dtype=torch.long, batch_size=1, optimizer="adamw", precision="bf16"
            )
        )
        t = report.totals
        print(
            f"  {name:17s} {t['total_params'] / 1e9:7.1f} B params, {t['activated_params'] / 1e9:5.1f} B activated; "
            f"build {build:.2f}, moe() {summary:.2f}, "
            f"per-expert tree ({len(split.layers):,} modules) {per_expert:.2f}, "
            f"memory plan {plan:.2f}, with activations of [1, 128] {traced_plan:.2f}"
        )
    llama = hf_moe(transformers.LlamaConfig, **LLAMA_70B)
    traced, seconds = timed(lambda: nbinspect.trace(llama, (1, 128), input_dtype=torch.long))
    print(
        f"  Llama-70B shape     {traced.totals['total_params'] / 1e9:.1f} B params: traced [1, 128] on meta in "
        f"{seconds:.2f} s ({traced.totals['flops'] / 1e12:.1f} TFLOPs, {len(traced.layers)} modules)"
    )


def render(insp, runs: int) -> dict:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "page.html"
        insp.to_html(page_path)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            start = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_selector(".nbi-body [role=row]")
            load = (time.perf_counter() - start) * 1000
            result = page.evaluate(RENDER, {"runs": runs})
            browser.close()
    return {"load": load, **{k: statistics.median(v) for k, v in result.items()}}


def widget(runs: int) -> None:
    import transformers

    print("Widget (headless chromium; median of runs, ms; payload JSON bytes, gzipped):")
    with torch.device("meta"):
        old_style = LinearExpertsLM(layers=32, experts=160, d=64, ffn=128, top_k=4)
    deepseek = nbinspect.split_experts(hf_moe(transformers.DeepseekV3Config))
    cases = [
        ("10,000-module tree (baseline)", nbinspect.inspect(wide_tree())),
        ("nn.Linear experts, 32 x 160", nbinspect.inspect(old_style, stats=False)),
        ("DeepSeek-V3, per-expert rows", nbinspect.inspect(deepseek, stats=False)),
    ]
    base = None
    for label, insp in cases:
        raw, packed, build = payload_bytes(insp)
        r = render(insp, runs)
        base = base or r
        print(
            f"  {label:30s} {len(insp.layers):6,} modules {len(insp.params):6,} tensors  payload {raw / 2**20:5.1f} MB "
            f"({packed / 2**10:5.0f} KB gz, built {build * 1000:4.0f} ms)  page load {r['load']:5.0f}  "
            f"first render {r['first_render']:5.0f} ({r['first_render'] / base['first_render']:.2f}x)  "
            f"expand all {r['expand_all']:5.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-widget", action="store_true")
    args = parser.parse_args()
    configs()
    if not args.skip_widget:
        widget(args.runs)


if __name__ == "__main__":
    main()
