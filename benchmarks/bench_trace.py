"""Trace overhead per module, and how long a Llama-7B-shaped model takes to trace on meta.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_trace.py [--layers 5000]

Every figure is measured in this run against a baseline from the same run: the plain
forward pass (grad enabled, as the trace runs it) and the same forward with a global
no-op pre/post hook pair. The variants run interleaved, one thread, and each figure is
the best of N in CPU time (``time.process_time``), which other processes on a shared
machine disturb less than wall time. Reported: microseconds per module above the plain
forward. For reference, torchinfo 1.8.0 adds about 106 us per module (DESIGN.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

import nbinspect
from nbinspect.analyze.trace import run_trace


def interleaved(fns: dict, repeat: int) -> dict[str, tuple[float, float]]:
    """(best, median) CPU seconds of each function, the functions run in turn `repeat` times."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def with_noop_hooks(model: nn.Module, x: torch.Tensor) -> None:
    """The cheapest way to see every module call: one global no-op pre/post hook pair."""
    pre = register_module_forward_pre_hook(lambda *a: None)
    post = register_module_forward_hook(lambda *a: None)
    try:
        model(x)
    finally:
        pre.remove()
        post.remove()


def bench_hooks(layers: int, repeat: int) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(layers)))
    x = torch.randn(1, 8)
    modules = layers + 1
    results = interleaved(
        {
            "plain forward (grad enabled)": lambda: model(x),
            "global no-op hook pair": lambda: with_noop_hooks(model, x),
            "run_trace(flops=False): shapes, saved tensors": lambda: run_trace(model, (x,), flops=False),
            "run_trace: shapes, saved tensors, FLOPs": lambda: run_trace(model, (x,)),
            "nbinspect.trace: + structure and frames": lambda: nbinspect.trace(model, x),
        },
        repeat,
    )
    plain = results["plain forward (grad enabled)"][0]
    print(f"{layers} Linear(8, 8) layers ({modules} modules), input [1, 8]; best of {repeat}, CPU time")
    print(f"  {'':48s} {'best':>9s} {'median':>9s} {'us/module':>10s} {'x plain':>8s}")
    for name, (best, median) in results.items():
        per = (best - plain) / modules * 1e6
        print(f"  {name:48s} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms {per:10.1f} {best / plain:8.2f}")


def bench_llama(repeat: int) -> None:
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("transformers not installed: Llama-7B trace skipped")
        return
    config = LlamaConfig(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        use_cache=False,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    x = (1, 128)
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        insp = nbinspect.trace(model, x, input_dtype=torch.long)
        walls.append(time.perf_counter() - start)
    seconds, median = min(walls), statistics.median(walls)
    print(f"Llama-7B config on meta, input [1, 128]: {len(insp.layers)} layers, {len(insp.flow)} calls")
    print(f"  nbinspect.trace, wall time     {seconds:8.2f} s   (median {median:.2f} s of {repeat})")
    print(f"  parameters {insp.totals['total_params']:,}, forward FLOPs {insp.totals['flops']:,}")
    print(f"  saved for backward {insp.totals['activation_bytes'] / 2**30:.2f} GiB (fake tensors, nothing allocated)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    bench_hooks(args.layers, args.repeat)
    bench_llama(3)


if __name__ == "__main__":
    main()
