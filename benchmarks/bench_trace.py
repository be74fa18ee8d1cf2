"""Per-module cost of tracing and inspecting, and a Llama-7B-shaped model traced on meta.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_trace.py [--layers 5000] [--quick]

Every figure is measured in this run against baselines from the same run, on one
5,000-module model (``Linear(8, 8)`` layers, input [1, 8]): the plain forward pass (grad
enabled, as the trace runs it); torch's global no-op pre/post hook pair, for comparison;
the same forward with a no-op stand-in for ``nn.Module.__call__`` (the floor for seeing
every module call from Python, as the trace does), with a no-op
``TorchDispatchMode`` as well (what counting FLOPs from torch's own formulas pays), with a
no-op saved-tensor hook instead (the floor of a trace that sees shapes and saved tensors)
and with both, the mode without torch's per-op dynamo wrapper (the floor of the FLOP trace);
``run_trace`` with and without FLOPs, and with every ``Linear``'s FLOPs counted by the
dispatch mode (the shortcut from shapes off); and torchinfo's ``summary`` (optional:
``pip install -e .[bench]``). The variants run interleaved on one thread, each figure the
best of N in CPU time (``time.process_time``), which other processes on a shared machine
disturb less than wall time. Reported:
microseconds per module above the plain forward, and the ratio to torchinfo's.

``inspect()`` without and with statistics is timed on the same model (per module, CPU
time; it runs no forward pass). The Llama-7B config (transformers) is traced on the meta
device under FakeTensorMode, wall time, beside the bare forward pass under FakeTensorMode
as its baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from _measure import interleaved, interleaved_times
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.utils._python_dispatch import TorchDispatchMode

import nbinspect
from nbinspect.backends.torch import trace as torch_trace
from nbinspect.backends.torch.trace import run_trace


def with_noop_wrapper(model: nn.Module, x: torch.Tensor) -> None:
    """The cheapest way to see every module call from Python, as the trace does: a no-op
    stand-in for ``nn.Module.__call__`` (a third of torch's global hook pair)."""
    original = nn.Module.__call__

    def call(module, *args, **kwargs):
        return original(module, *args, **kwargs)

    nn.Module.__call__ = call  # type: ignore[method-assign]
    try:
        model(x)
    finally:
        nn.Module.__call__ = original  # type: ignore[method-assign]


def with_noop_hooks(model: nn.Module, x: torch.Tensor) -> None:
    """torch's global no-op pre/post hook pair, for comparison."""
    pre = register_module_forward_pre_hook(lambda *a: None)
    post = register_module_forward_hook(lambda *a: None)
    try:
        model(x)
    finally:
        pre.remove()
        post.remove()


class NoOpDispatch(TorchDispatchMode):
    """Every aten op through Python and straight on: what any FLOP counter built on torch's
    dispatch pays before counting anything."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class NoOpDispatchUnwrapped(NoOpDispatch):
    """The same without torch's per-op ``torch._dynamo.disable`` wrapper (nbinspect's counter
    guards its code once instead): the floor of the dispatch itself."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def with_noop_dispatch(model: nn.Module, x: torch.Tensor, mode: type = NoOpDispatch) -> None:
    with mode():
        with_noop_wrapper(model, x)


def with_noop_saved_hooks(model: nn.Module, x: torch.Tensor, mode: type | None = None) -> None:
    """The floor of measuring activations: a no-op pack hook, one Python call per saved tensor."""
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        if mode is None:
            with_noop_wrapper(model, x)
        else:
            with_noop_dispatch(model, x, mode)


def run_trace_counter_only(model: nn.Module, x: torch.Tensor) -> None:
    """run_trace with every Linear's FLOPs counted by the dispatch mode (no shortcut from
    shapes, see backends/torch/linear_shortcut.py): what the shortcut saves."""
    real = torch_trace.plain_linears
    torch_trace.plain_linears = lambda modules: set()  # type: ignore[assignment]
    try:
        run_trace(model, (x,))
    finally:
        torch_trace.plain_linears = real  # type: ignore[assignment]


def bench_hooks(layers: int, repeat: int) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(layers)))
    x = torch.randn(1, 8)
    modules = layers + 1
    fns = {
        "plain forward (grad enabled)": lambda: model(x),
        "torch's global no-op hook pair (for comparison)": lambda: with_noop_hooks(model, x),
        "floor: no-op Module.__call__ stand-in": lambda: with_noop_wrapper(model, x),
        "floor: stand-in + no-op dispatch mode": lambda: with_noop_dispatch(model, x),
        "floor: stand-in + no-op saved-tensor hook": lambda: with_noop_saved_hooks(model, x),
        "floor: + dispatch mode, no dynamo wrapper": lambda: with_noop_saved_hooks(model, x, NoOpDispatchUnwrapped),
        "run_trace(flops=False): shapes, saved tensors": lambda: run_trace(model, (x,), flops=False),
        "run_trace: shapes, saved tensors, FLOPs": lambda: run_trace(model, (x,)),
        "run_trace: FLOPs all by the dispatch mode": lambda: run_trace_counter_only(model, x),
        "nbinspect.trace: + structure and frames": lambda: nbinspect.trace(model, x),
    }
    try:
        import torchinfo

        fns["torchinfo.summary"] = lambda: torchinfo.summary(model, input_data=x, verbose=0)
    except ImportError:
        print("torchinfo not installed (pip install -e .[bench]): no torchinfo baseline")
    times = interleaved_times(fns, repeat)
    plain_times = times["plain forward (grad enabled)"]
    plain = min(plain_times)
    per = {name: (min(t) - plain) / modules * 1e6 for name, t in times.items()}
    # the median over rounds of (this run - the plain forward of the same round): steadier
    # than best minus best when the host's speed drifts between rounds
    paired = {
        name: statistics.median(a - b for a, b in zip(t, plain_times)) / modules * 1e6 for name, t in times.items()
    }
    ref, ref_paired = per.get("torchinfo.summary"), paired.get("torchinfo.summary")
    print(f"{layers} Linear(8, 8) layers ({modules} modules), input [1, 8]; {repeat} rounds, CPU time, 1 thread")
    print("  us/module: best minus the plain forward's best; paired: median of the per-round differences")
    head = f"  {'':48s} {'best':>9s} {'median':>9s} {'us/module':>10s} {'paired':>7s} {'x plain':>8s}"
    print(head + (f" {'x torchinfo':>12s} {'paired':>7s}" if ref else ""))
    for name, t in times.items():
        best, median = min(t), statistics.median(t)
        line = f"  {name:48s} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms {per[name]:10.1f} {paired[name]:7.1f}"
        line += f" {best / plain:8.2f}"
        print(line + (f" {per[name] / ref:12.2f} {paired[name] / ref_paired:7.2f}" if ref else ""))
    print("  targets: shapes <= 10 us/module, with FLOPs <= 20, nbinspect.trace <= 1/3 of torchinfo's")

    inspected = interleaved(
        {
            "walk: named_modules + parameters (baseline)": lambda: [
                (n, list(m._parameters.items())) for n, m in model.named_modules()
            ],
            "inspect(stats=False)": lambda: nbinspect.inspect(model, stats=False),
            "inspect() with statistics": lambda: nbinspect.inspect(model),
        },
        repeat,
    )
    walk = inspected["walk: named_modules + parameters (baseline)"][0]
    print(f"inspect() of the same model, no forward pass; best of {repeat}, CPU time")
    for name, (best, _) in inspected.items():
        print(f"  {name:48s} {best * 1e3:7.1f}ms {best / modules * 1e6:8.1f} us/module {best / walk:8.1f}x walk")
    print("  targets: inspect(stats=False) <= 30 us/module, with statistics <= 60 us/module (+ bandwidth)")


def bench_llama(repeat: int) -> None:
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("transformers not installed: Llama-7B trace skipped")
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

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

    def bare_fake_forward() -> None:
        """The forward alone on fake stand-ins (what any shape trace of this model runs)."""
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fakes = {n: mode.from_tensor(torch.empty(t.shape, dtype=t.dtype)) for n, t in model.state_dict().items()}
            ids = mode.from_tensor(torch.zeros(1, 128, dtype=torch.long))
            torch.func.functional_call(model, fakes, (ids,))

    bare_fake_forward()  # warm both: first calls build FakeTensorMode's caches
    nbinspect.trace(model, (1, 128), input_dtype=torch.long)
    walls: dict[str, list[float]] = {"bare forward on fake tensors (baseline)": [], "nbinspect.trace": []}
    for _ in range(repeat):
        start = time.perf_counter()
        bare_fake_forward()
        walls["bare forward on fake tensors (baseline)"].append(time.perf_counter() - start)
        start = time.perf_counter()
        insp = nbinspect.trace(model, (1, 128), input_dtype=torch.long)
        walls["nbinspect.trace"].append(time.perf_counter() - start)
    base = min(walls["bare forward on fake tensors (baseline)"])
    print(f"Llama-7B config on meta, input [1, 128]: {len(insp.layers)} layers, {len(insp.flow)} calls; wall time")
    for name, w in walls.items():
        print(f"  {name:40s} {min(w):6.2f} s  (median {statistics.median(w):.2f} s of {repeat}) {min(w) / base:5.2f}x")
    print("  target: nbinspect.trace <= 1 s (the full traced table)")
    print(f"  parameters {insp.totals['total_params']:,}, forward FLOPs {insp.totals['flops']:,}")
    print(f"  saved for backward {insp.totals['activation_bytes'] / 2**30:.2f} GiB (fake tensors, nothing allocated)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats, 1 for the Llama trace")
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeat = 3 if args.quick else args.repeat
    print(f"torch {torch.__version__}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    bench_hooks(args.layers, repeat)
    bench_llama(1 if args.quick else 3)


if __name__ == "__main__":
    main()
