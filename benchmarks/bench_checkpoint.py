"""Streaming statistics over a ~5 GB checkpoint: throughput and peak memory.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_checkpoint.py [--gb 5] [--dir /tmp]

Writes a Llama-shaped fp32 checkpoint of about `--gb` GB twice (.safetensors and torch.save
.pt) into a temporary folder, deleted afterwards. Each method runs in a fresh interpreter
with the file already in the page cache (warm), and reports seconds, GB/s and peak resident
memory above the interpreter (VmHWM minus the RSS after imports). The baseline, measured in
the same run: ``torch.load`` of the whole file (no mmap), then the same statistics.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import torch
from _measure import gb, run_isolated, warm

HIDDEN, MLP, VOCAB = 2048, 5632, 32000


def layout(target_bytes: float) -> dict[str, tuple[int, ...]]:
    """Llama-style names and shapes adding up to about `target_bytes` of fp32."""
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (VOCAB, HIDDEN)}
    per_layer = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP + 2 * HIDDEN
    layers = max(1, round((target_bytes / 4 - 2 * VOCAB * HIDDEN) / per_layer))
    for i in range(layers):
        p = f"model.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            shapes[p + f"self_attn.{proj}.weight"] = (HIDDEN, HIDDEN)
        shapes[p + "mlp.gate_proj.weight"] = shapes[p + "mlp.up_proj.weight"] = (MLP, HIDDEN)
        shapes[p + "mlp.down_proj.weight"] = (HIDDEN, MLP)
        shapes[p + "input_layernorm.weight"] = shapes[p + "post_attention_layernorm.weight"] = (HIDDEN,)
    shapes["model.norm.weight"] = (HIDDEN,)
    shapes["lm_head.weight"] = (VOCAB, HIDDEN)
    return shapes


def write_safetensors(path: Path, shapes: dict[str, tuple[int, ...]]) -> None:
    """Streamed tensor by tensor (never the whole model in memory)."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    g = torch.Generator().manual_seed(0)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for shape in shapes.values():
            f.write(torch.randn(shape, generator=g).mul_(0.02).numpy().tobytes())


def write_torch(path: Path, source: Path) -> None:
    """torch.save of the same tensors, read from the safetensors file through its mmap."""
    from nbinspect import load_checkpoint

    torch.save({t.name: t.values() for t in load_checkpoint(source).tensors}, path)


METHODS = {
    "nbinspect.stats, .safetensors (mmap, pages released)": "nbinspect.stats({st!r}, progress=False)",
    "nbinspect.stats, .pt (torch mmap, pages released)": "nbinspect.stats({pt!r}, progress=False)",
    "baseline: torch.load whole .pt, then nbinspect.stats": (
        "nbinspect.stats(torch.load({pt!r}, weights_only=True), progress=False)"
    ),
    "read only, .safetensors: sum each tensor, release": (
        "s = nbinspect.load_checkpoint({st!r})\nfor t in s.tensors:\n    t.values().sum(); t.release()"
    ),
    "read only, .pt: sum each tensor, release": (
        "s = nbinspect.load_checkpoint({pt!r})\nfor t in s.tensors:\n    t.values().sum(); t.release()"
    ),
    "baseline read only: torch.load whole .pt, sum each tensor": (
        "[v.sum() for v in torch.load({pt!r}, weights_only=True).values()]"
    ),
    "header-only listing, .safetensors (params frame)": "nbinspect.params({st!r})",
    "header-only listing, .pt (params frame)": "nbinspect.params({pt!r})",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=5.0, help="checkpoint size in GB (default 5)")
    parser.add_argument("--dir", default=None, help="where to write the temporary files")
    args = parser.parse_args()
    shapes = layout(args.gb * 1e9)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        st, pt = Path(tmp) / "model.safetensors", Path(tmp) / "model.pt"
        write_safetensors(st, shapes)
        write_torch(pt, st)
        size = st.stat().st_size
        print(
            f"checkpoint: {len(shapes)} tensors, {gb(size)} GB fp32 (.safetensors), {gb(pt.stat().st_size)} GB (.pt)\n"
        )
        print(f"{'method':58s} {'seconds':>8s} {'GB/s':>6s} {'peak RSS MB':>12s}")
        results = {}
        for label, code in METHODS.items():
            warm(st if ".safetensors" in label else pt)
            r = run_isolated(code.format(st=str(st), pt=str(pt)))
            results[label] = r
            print(f"{label:58s} {r['seconds']:8.2f} {size / r['seconds'] / 1e9:6.2f} {r['peak_bytes'] / 2**20:12.0f}")
        base = results["baseline: torch.load whole .pt, then nbinspect.stats"]
        for label in list(METHODS)[:2]:
            r = results[label]
            print(
                f"\n{label}: {base['seconds'] / r['seconds']:.2f}x the speed of the baseline, "
                f"{r['peak_bytes'] / base['peak_bytes']:.3f}x its peak memory"
            )
        print(f"\ninterpreter RSS after imports: {base['base_bytes'] / 2**20:.0f} MB (not counted above)")


if __name__ == "__main__":
    main()
