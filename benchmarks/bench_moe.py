"""Frontier-sized configs on the meta device, and the widget on a many-module MoE tree.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_moe.py [--repeat 5] [--runs 5]

1. transformers configs with their defaults (DeepSeek-V3, Mixtral, Qwen2-MoE) built on
   meta: the MoE summary, per-expert rows (``split_experts`` + ``inspect``), the
   training-memory plan without and with a traced input; a Llama-70B-shaped config traced.
   Each beside a baseline from the same run: a walk over ``named_modules`` and their
   parameters (the least any tool that reads the tree does) for the analyzers that read the
   tree, the bare forward pass on fake tensors for those that trace it. The functions run
   in turn `--repeat` times after one warm-up round; CPU seconds (``time.process_time``),
   best and median.
2. An old-style model with one ``nn.Linear`` per expert (32 layers x 160 experts: 20,000+
   modules) and DeepSeek-V3 split into per-expert rows: payload size and first render in
   headless chromium, against the 10,000-module tree of ``bench_widget.py`` as the baseline.

Measured on a 2-core machine shared with other jobs: figures vary between runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

import torch
from _measure import interleaved
from bench_widget import payload_bytes, render_times, wide_tree

import nbinspect
from tests.moe_models import LLAMA_70B, LinearExpertsLM, hf_moe

# The baselines, and how the ratio column names them.
WALK = "walk: named_modules + their own parameters"
FAKE = "bare forward on fake tensors, [1, 128]"
SHORT = {WALK: "walk", FAKE: "fake forward"}


def walk(model: torch.nn.Module) -> None:
    """Every module and its own parameters: what reading the tree costs before any analysis."""
    for _, module in model.named_modules():
        list(module.named_parameters(recurse=False))


def bare_fake_forward(model: torch.nn.Module) -> None:
    """The forward pass alone on fake stand-ins for the meta weights, token ids [1, 128]: what
    any shape trace of the model runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fakes = {n: mode.from_tensor(torch.empty(t.shape, dtype=t.dtype)) for n, t in model.state_dict().items()}
        ids = mode.from_tensor(torch.zeros(1, 128, dtype=torch.long))
        torch.func.functional_call(model, fakes, (ids,))


def report(title: str, rows: list[tuple[str, Callable[[], object], str | None]], repeat: int) -> None:
    """Runs the functions of `rows` (name, function, its baseline's name or None) in turn
    `repeat` times after one warm-up round; prints each one's best and median CPU seconds and
    its best over its baseline's."""
    fns = {name: fn for name, fn, _ in rows}
    for fn in fns.values():
        fn()
    results = interleaved(fns, repeat)
    print(f"  {title}")
    for name, _, base in rows:
        best, median = results[name]
        ratio = f"{best / results[base][0]:8.2f}x {SHORT[base]}" if base else ""
        print(f"    {name:55s} {best:7.3f} s {median:7.3f} s {ratio}")


def configs(repeat: int) -> None:
    import transformers

    print(
        f"Configs on the meta device (transformers defaults); CPU seconds, best and median of {repeat} runs "
        f"interleaved, and best / its baseline's best (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs):"
    )
    for name in ("DeepseekV3Config", "MixtralConfig", "Qwen2MoeConfig"):
        config = getattr(transformers, name)
        model = hf_moe(config, dtype=torch.bfloat16)
        t = nbinspect.moe(model).totals
        split = nbinspect.inspect(nbinspect.split_experts(model), stats=False)
        title = (
            f"{name}: {t['total_params'] / 1e9:.1f} B params, {t['activated_params'] / 1e9:.1f} B activated; "
            f"per-expert tree {len(split.layers):,} modules"
        )
        rows = [
            ("build on meta (transformers, for scale)", lambda c=config: hf_moe(c, dtype=torch.bfloat16), None),
            (WALK, lambda m=model: walk(m), None),
            ("moe()", lambda m=model: nbinspect.moe(m), WALK),
            (
                "per-expert tree: split_experts + inspect(stats=False)",
                lambda m=model: nbinspect.inspect(nbinspect.split_experts(m), stats=False),
                WALK,
            ),
            ("memory plan", lambda m=model: nbinspect.memory(m, optimizer="adamw", precision="bf16"), WALK),
            (FAKE, lambda m=model: bare_fake_forward(m), None),
            (
                "memory plan with activations of [1, 128]",
                lambda m=model: nbinspect.memory(
                    m, input=(1, 128), input_dtype=torch.long, batch_size=1, optimizer="adamw", precision="bf16"
                ),
                FAKE,
            ),
        ]
        report(title, rows, repeat)
    llama = hf_moe(transformers.LlamaConfig, **LLAMA_70B)
    traced = nbinspect.trace(llama, (1, 128), input_dtype=torch.long)
    title = (
        f"Llama-70B shape: {traced.totals['total_params'] / 1e9:.1f} B params, {len(traced.layers)} modules, "
        f"{traced.totals['flops'] / 1e12:.1f} TFLOPs for [1, 128]"
    )
    rows = [
        (FAKE, lambda: bare_fake_forward(llama), None),
        ("nbinspect.trace [1, 128]", lambda: nbinspect.trace(llama, (1, 128), input_dtype=torch.long), FAKE),
    ]
    report(title, rows, repeat)


def render(insp: nbinspect.Inspection, runs: int) -> dict:
    """Page load, and the median first render and expand-all, ms."""
    load, (result,) = render_times(insp, runs, steps=("expand_all",))
    result.pop("rows")
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
    parser.add_argument("--repeat", type=int, default=5, help="timed rounds of each config's functions")
    parser.add_argument("--runs", type=int, default=5, help="renders of each widget case")
    parser.add_argument("--skip-widget", action="store_true")
    args = parser.parse_args()
    configs(args.repeat)
    if not args.skip_widget:
        widget(args.runs)


if __name__ == "__main__":
    main()
