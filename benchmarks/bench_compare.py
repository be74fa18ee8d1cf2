"""Diffing two ~124M-parameter models (GPT-2 small shapes, fp32), in memory and from files.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_compare.py [--repeat 3] [--threads N]
        [--dtype bfloat16]

Throughput counts the bytes of both inputs. Baselines from the same run: a plain read of
both models (``sum`` of every tensor: about what memory bandwidth allows), and the naive
per-tensor float64 diff a person would write (upcast, subtract, norms, cosine, max,
threshold counts), which makes full-size temporaries. From files: two .safetensors in a
temporary folder, warm in the page cache, compared in a fresh interpreter (peak RSS above
the interpreter reported).

In memory, the fused kernels (numba) are loaded before the timed runs, as after any large
run in a session; the file compare in a fresh interpreter runs as a first call does (two
models of ~1 GB are below ``fused.FUSED_ABOVE``: the torch path, no numba load).
``--quick`` skips the file compare.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
from _measure import FLOAT_DTYPES, best_of, gb, run_isolated, warm
from safetensors.torch import save_file

import nbinspect
from nbinspect.analyze import fused

THRESHOLDS = (1e-8, 1e-6, 1e-4)


def gpt2_small(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(shape, generator=g).mul_(0.02)

    sd = {"wte.weight": r(50257, 768), "wpe.weight": r(1024, 768)}
    for i in range(12):
        p = f"h.{i}."
        sd |= {p + "ln_1.weight": torch.ones(768), p + "ln_1.bias": torch.zeros(768)}
        sd |= {p + "attn.c_attn.weight": r(768, 2304), p + "attn.c_attn.bias": r(2304)}
        sd |= {p + "attn.c_proj.weight": r(768, 768), p + "attn.c_proj.bias": r(768)}
        sd |= {p + "ln_2.weight": torch.ones(768), p + "ln_2.bias": torch.zeros(768)}
        sd |= {p + "mlp.c_fc.weight": r(768, 3072), p + "mlp.c_fc.bias": r(3072)}
        sd |= {p + "mlp.c_proj.weight": r(3072, 768), p + "mlp.c_proj.bias": r(768)}
    sd |= {"ln_f.weight": torch.ones(768), "ln_f.bias": torch.zeros(768)}
    return sd


def fine_tuned(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every other tensor nudged (like a fine-tune that froze some), the rest copied."""
    g = torch.Generator().manual_seed(1)
    return {
        k: v + 1e-4 * torch.randn(v.shape, generator=g) if i % 2 else v.clone() for i, (k, v) in enumerate(sd.items())
    }


def read_only(a: dict, b: dict) -> None:
    for k in a:
        a[k].sum()
        b[k].sum()


def naive_float64(a: dict, b: dict) -> None:
    for k in a:
        x, y = a[k].double().ravel(), b[k].double().ravel()
        d = y - x
        d.norm(), x.norm(), torch.dot(x, y), d.abs().max(), d.mean()
        [(d.abs() > t).sum() for t in THRESHOLDS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads (default: torch's)")
    parser.add_argument("--quick", action="store_true", help="in memory only")
    parser.add_argument("--dtype", default="float32", choices=FLOAT_DTYPES, help="both models' dtype (default float32)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = "loaded" if fused.kernels(fused.FUSED_ABOVE) else "absent"
    print(f"load average {os.getloadavg()[0]:.1f}; fused kernels: {loaded}")
    a = gpt2_small(0)
    b = fine_tuned(a)
    if args.dtype != "float32":
        a, b = ({k: v.to(getattr(torch, args.dtype)) for k, v in sd.items()} for sd in (a, b))
    n = sum(v.numel() for v in a.values())
    size = 2 * sum(v.numel() * v.element_size() for v in a.values())
    print(f"two models of {n:,} {args.dtype} parameters, {gb(size)} GB together; {args.threads} torch thread(s)\n")
    rows = {
        "baseline: read both (sum of every tensor)": best_of(lambda: read_only(a, b), args.repeat),
        "baseline: naive per-tensor float64 diff": best_of(lambda: naive_float64(a, b), args.repeat),
        "nbinspect.compare, in memory": best_of(lambda: nbinspect.compare(a, b), args.repeat),
    }
    rows["nbinspect.compare, in memory, torch path"] = torch_path(a, b, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        if args.quick:
            report(rows, size, [])
            return
        pa, pb = Path(tmp) / "a.safetensors", Path(tmp) / "b.safetensors"
        save_file(a, pa)
        save_file(b, pb)
        runs = []
        for _ in range(args.repeat):
            warm(pa, pb)
            runs.append(
                run_isolated(f"torch.set_num_threads({args.threads})\nnbinspect.compare({str(pa)!r}, {str(pb)!r})")
            )
        fastest = min(runs, key=lambda r: r["seconds"])
        rows["nbinspect.compare, two .safetensors files (warm)"] = fastest["seconds"]
    report(rows, size, runs)


def torch_path(a: dict, b: dict, repeat: int) -> float:
    """The same compare without the fused kernels (as without numba, or for small work)."""
    saved = fused._loaded["kernels"]
    fused._loaded["kernels"] = None
    try:
        return best_of(lambda: nbinspect.compare(a, b), repeat)
    finally:
        fused._loaded["kernels"] = saved


def report(rows: dict, size: int, runs: list) -> None:
    print(f"{'method':50s} {'seconds':>8s} {'GB/s':>6s}")
    for label, seconds in rows.items():
        print(f"{label:50s} {seconds:8.3f} {size / seconds / 1e9:6.2f}")
    ceiling, naive = rows["baseline: read both (sum of every tensor)"], rows["baseline: naive per-tensor float64 diff"]
    for label in rows:
        if label.startswith("nbinspect"):
            s = rows[label]
            print(f"\n{label}: {naive / s:.1f}x the naive float64 diff, {ceiling / s:.2f}x the speed of a plain read")
    print("target: in memory >= 7 GB/s")
    if runs:
        peak = max(r["peak_bytes"] for r in runs) / 2**20
        print(f"peak RSS of the file compare above the interpreter: {peak:.0f} MB")


if __name__ == "__main__":
    main()
