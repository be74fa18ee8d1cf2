"""Per-module cost of what a user sees of an inspection: the widget payload, the JSON export
and the text report, on a model with thousands of modules.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_payload.py [--blocks 2500] [--quick]

The model is ``Sequential`` of `blocks` ``Sequential(Linear(8, 8), ReLU())`` (3 modules per
block and the root: 7,501 modules for 2,500 blocks), inspected three ways: without
statistics; traced (input [1, 8]) with statistics and their module roll-ups; and compared
with a copy in which every fourth block's weight changed (the comparison payload, with both
sides' histograms). Each figure is measured in this run beside two baselines from the same
run: the ``inspect()`` (or ``compare()``) that made the frames, and ``json.dumps`` of the
payload (what sending it costs at least). The variants run interleaved on one thread, each
the best of N in CPU time (``time.process_time``), which other processes on a shared
machine disturb less than wall time.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
from _measure import interleaved
from torch import nn

import nbinspect
from nbinspect.analyze.views import view_data
from nbinspect.render.payload import build_payload


def _model(blocks: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(*(nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(blocks)))


def _payload(result) -> dict:
    """What a result's first widget costs: the views decided from its frames (health, module
    histograms, folds with their pooled statistics), then the payload built from them."""
    frames = result._widget_frames()
    return build_payload(
        result.name, result.framework_label(), result.totals, frames, result.sides, views=view_data(frames)
    )


def _report(title: str, modules: int, results: dict[str, tuple[float, float]], made_by: str, dumps: str) -> None:
    base, sent = results[made_by][0], results[dumps][0]
    print(f"{title}: {modules:,} modules; best of N, CPU time, 1 thread")
    print(
        f"  {'':38s} {'best':>9s} {'median':>9s} {'us/module':>10s} {'x ' + made_by.split('(')[0]:>12s} {'x dumps':>8s}"
    )
    for name, (best, median) in results.items():
        print(
            f"  {name:38s} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms {best / modules * 1e6:10.1f}"
            f" {best / base:12.2f} {best / sent:8.2f}"
        )


def bench_inspection(blocks: int, repeat: int, traced: bool) -> None:
    model, x = _model(blocks, 0), torch.randn(1, 8)

    def inspect() -> nbinspect.Inspection:
        return nbinspect.inspect(model, input=x) if traced else nbinspect.inspect(model, stats=False)

    insp = inspect()
    payload = _payload(insp)
    fns = {
        "inspect() (baseline)": inspect,
        "json.dumps(payload) (baseline)": lambda: json.dumps(payload),
        "build_payload": lambda: _payload(insp),
        "to_dict (JSON export)": insp.to_dict,
        "report()": insp.report,
    }
    title = "traced, with statistics" if traced else "no statistics, not traced"
    _report(title, len(insp.layers), interleaved(fns, repeat), "inspect() (baseline)", "json.dumps(payload) (baseline)")


def bench_comparison(blocks: int, repeat: int) -> None:
    a, b = _model(blocks, 0), _model(blocks, 0)
    with torch.no_grad():
        for block in b[::4]:
            block[0].weight.mul_(1.5)
    cmp = nbinspect.compare(a, b)
    payload = _payload(cmp)  # reads both sides' statistics once, as the widget does
    fns = {
        "compare() (baseline)": lambda: nbinspect.compare(a, b),
        "json.dumps(payload) (baseline)": lambda: json.dumps(payload),
        "build_payload": lambda: _payload(cmp),
        "to_dict": cmp.to_dict,
    }
    modules = len(cmp.frames["layers"])
    _report("comparison", modules, interleaved(fns, repeat), "compare() (baseline)", "json.dumps(payload) (baseline)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=2500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 repeats")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeat = 2 if args.quick else args.repeat
    print(f"torch {torch.__version__}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bench_inspection(args.blocks, repeat, traced=False)
    bench_inspection(args.blocks, repeat, traced=True)
    bench_comparison(args.blocks, repeat)


if __name__ == "__main__":
    main()
