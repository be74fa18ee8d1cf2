"""What counting partially overlapping views exactly costs, per module.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_overlap.py [--modules 5000]

In one run, interleaved on one thread, best of N in CPU time: ``inspect(stats=False)`` of a
model of ``Linear(8, 8)`` layers (no overlapping views: the normal case) beside the part of
it that looks for overlaps (``overlap.groups`` over the distinct storage keys); and
``inspect(stats=False)`` of a model whose parameters are views of one flat tensor, disjoint
(baseline) or each sharing 2 elements with the next (every module in one overlap group).
"""

from __future__ import annotations

import argparse
import os

import torch
from bench_trace import interleaved
from torch import nn

import nbinspect
from nbinspect.backends import as_source, overlap


def views(count: int, width: int) -> nn.Module:
    """`count` children, each holding `width` elements of one flat tensor, 4 apart."""
    flat = torch.zeros(4 * count + width)
    model = nn.Module()
    for i in range(count):
        child = nn.Module()
        child.register_parameter("w", nn.Parameter(flat[4 * i : 4 * i + width]))
        model.add_module(f"m{i}", child)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    n = args.modules
    plain = nn.Sequential(*(nn.Linear(8, 8) for _ in range(n)))
    keys = list(as_source(plain).unique_tensors())
    disjoint, overlapping = views(n, 4), views(n, 6)
    assert nbinspect.totals(overlapping)["total_params"] == 4 * n + 2  # the check the figures stand on
    results = interleaved(
        {
            "inspect(stats=False), Linear layers": lambda: nbinspect.inspect(plain, stats=False),
            "  of which overlap.groups (no overlap)": lambda: overlap.groups(keys),
            "inspect(stats=False), disjoint views": lambda: nbinspect.inspect(disjoint, stats=False),
            "inspect(stats=False), overlapping views": lambda: nbinspect.inspect(overlapping, stats=False),
        },
        args.repeat,
    )
    print(f"torch {torch.__version__}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{n + 1} modules; best of {args.repeat}, CPU time, 1 thread")
    for name, (best, _) in results.items():
        print(f"  {name:42s} {best * 1e3:8.1f} ms {best / (n + 1) * 1e6:8.2f} us/module")
    base = results["inspect(stats=False), Linear layers"][0]
    share = results["  of which overlap.groups (no overlap)"][0] / base
    ratio = results["inspect(stats=False), overlapping views"][0] / results["inspect(stats=False), disjoint views"][0]
    print(f"  overlap search: {share:.1%} of inspect; overlapping / disjoint views: {ratio:.2f}x")


if __name__ == "__main__":
    main()
