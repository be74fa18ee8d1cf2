"""MLX models: statistics on zero-copy views, and the cost of a traced forward pass.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_mlx.py [--layers 16] [--dims 2048]

1. Statistics of an MLX model of `layers` Linear(dims, dims) layers (N(0, 0.02) weights),
   in float32 and in bfloat16, against the same weights held by a torch model in the same
   run (the torch engine reading its own tensors is the baseline). Printed: seconds, the
   ratio to the baseline, and the peak resident memory added while ``stats()`` ran (sampled
   every 2 ms): zero-copy views add no copy of the weights.
2. A 4-layer MLX transformer (d 256, batch 2, 64 tokens): ``model(x)`` evaluated against
   ``nbinspect.trace(model, x)`` (which also evaluates), best of 5.

The machine is shared by other people's jobs: figures vary run to run; ratios in one run
are what to read.
"""

from __future__ import annotations

import argparse
import time

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import torch
from _measure import PeakRSS, best_of

import nbinspect


class Stack(nn.Module):
    def __init__(self, layers: int, dims: int):
        super().__init__()
        self.layers = [nn.Linear(dims, dims, bias=False) for _ in range(layers)]


def peak_extra(fn) -> tuple[float, int]:
    """(seconds, peak RSS above the start while fn ran)."""
    with PeakRSS() as peak:
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
    return seconds, peak.extra


def bench_stats(layers: int, dims: int) -> None:
    mx.random.seed(0)
    for dtype in (mx.float32, mx.bfloat16):
        model = Stack(layers, dims)
        for layer in model.layers:
            layer.weight = (mx.random.normal((dims, dims)) * 0.02).astype(dtype)
        mx.eval(model.parameters())
        twin = torch.nn.Sequential(*(torch.nn.Linear(dims, dims, bias=False) for _ in range(layers)))
        with torch.no_grad():
            for mine, theirs in zip(model.layers, twin):
                bits = np.asarray(mine.weight.view(mx.uint16) if dtype == mx.bfloat16 else mine.weight)
                value = torch.from_numpy(bits.copy())
                theirs.weight = torch.nn.Parameter(value.view(torch.bfloat16) if dtype == mx.bfloat16 else value)
        size = layers * dims * dims * (2 if dtype == mx.bfloat16 else 4)
        base, _ = peak_extra(lambda t=twin: nbinspect.stats(t, progress=False))
        seconds, extra = peak_extra(lambda m=model: nbinspect.stats(m, progress=False))
        name = str(dtype).rpartition(".")[2]
        print(
            f"stats {name:8s} {size / 2**30:.2f} GiB: torch {base:.2f} s, MLX {seconds:.2f} s "
            f"(x{seconds / base:.2f}), peak extra during MLX stats {extra / 2**20:.0f} MiB"
        )


class Block(nn.Module):
    def __init__(self, dims: int):
        super().__init__()
        self.norm = nn.LayerNorm(dims)
        self.attn = nn.MultiHeadAttention(dims, 4)
        self.mlp = nn.Sequential(nn.Linear(dims, 4 * dims), nn.GELU(), nn.Linear(4 * dims, dims))

    def __call__(self, x):
        h = self.norm(x)
        return x + self.mlp(x + self.attn(h, h, h))


def bench_trace() -> None:
    mx.random.seed(0)
    model = nn.Sequential(*(Block(256) for _ in range(4)))
    mx.eval(model.parameters())
    x = mx.random.normal((2, 64, 256))
    plain = best_of(lambda: mx.eval(model(x)), 5)
    traced = best_of(lambda: nbinspect.trace(model, x), 5)
    print(f"forward (evaluated) {plain * 1e3:.1f} ms, nbinspect.trace {traced * 1e3:.1f} ms (x{traced / plain:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--dims", type=int, default=2048)
    args = parser.parse_args()
    bench_stats(args.layers, args.dims)
    bench_trace()
