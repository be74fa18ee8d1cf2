"""Trace overhead per module, and how long a Llama-7B-shaped model takes to trace on meta.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_trace.py [--layers 5000]

Every figure is measured in this run against a baseline from the same run: the plain
forward pass (grad enabled, as the trace runs it) and the same forward with a no-op
pre/post hook pair on every module. Reported: microseconds per module above the plain
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


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


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
    plain, plain_med = best_of(lambda: model(x), repeat)
    hooks, _ = best_of(lambda: with_noop_hooks(model, x), repeat)
    shapes, _ = best_of(lambda: run_trace(model, (x,), flops=False), repeat)
    core, _ = best_of(lambda: run_trace(model, (x,)), repeat)
    full, _ = best_of(lambda: nbinspect.trace(model, x), repeat)
    per = lambda t: (t - plain) / modules * 1e6  # noqa: E731
    print(f"{layers} Linear(8, 8) layers, {modules} modules, best of {repeat}; us/module = (time - plain) / modules")
    print(f"  plain forward (grad enabled)        {plain * 1e3:8.1f} ms  (median {plain_med * 1e3:.1f} ms)")
    print(f"  global no-op hook pair (baseline)   {hooks * 1e3:8.1f} ms  {per(hooks):6.1f} us/module")
    print(f"  run_trace flops=False (shapes+saved){shapes * 1e3:8.1f} ms  {per(shapes):6.1f} us/module  ({shapes / plain:.2f}x plain)")
    print(f"  run_trace (shapes+saved+FLOPs)      {core * 1e3:8.1f} ms  {per(core):6.1f} us/module  ({core / plain:.2f}x plain)")
    print(f"  nbinspect.trace (+ structure, frames){full * 1e3:7.1f} ms  {per(full):6.1f} us/module  ({full / plain:.2f}x plain)")


def bench_llama(repeat: int) -> None:
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("transformers not installed: Llama-7B trace skipped")
        return
    config = LlamaConfig(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32000, use_cache=False,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    x = (1, 128)
    seconds, median = best_of(lambda: nbinspect.trace(model, x, input_dtype=torch.long), repeat)
    insp = nbinspect.trace(model, x, input_dtype=torch.long)
    print(f"Llama-7B config on meta, input [1, 128]: {len(insp.layers)} layers, {len(insp.flow)} calls")
    print(f"  nbinspect.trace                {seconds:8.2f} s   (median {median:.2f} s of {repeat})")
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
