"""A Hugging Face folder inspected with its model: time and peak memory against loading it.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_known_model.py [--gb 1] [--dir /tmp]

Writes a Llama folder of about `--gb` GB (fp32, ``save_pretrained``, sharded at 500 MB) into
a temporary folder, deleted afterwards. Each method runs in a fresh interpreter with the
files in the page cache (warm), after transformers' model code is imported and a tiny model
built (so lazy imports are not counted), and reports seconds and peak resident memory above
that (VmHWM minus the RSS before the method). The baseline, measured in the same run:
``AutoModelForCausalLM.from_pretrained`` and the same ``nbinspect.inspect`` of the loaded model.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import transformers
from _measure import gb, run_isolated, warm

HIDDEN, MLP, VOCAB = 1024, 2816, 32000

SETUP = """
import transformers
from nbinspect.backends.torch.hf_config import hf_model
transformers.logging.set_verbosity_error()
transformers.LlamaForCausalLM(transformers.LlamaConfig(vocab_size=8, hidden_size=8, intermediate_size=8,
    num_hidden_layers=1, num_attention_heads=1))
"""
METHODS = {
    "nbinspect.inspect(folder): typed tree, stats streamed": "nbinspect.inspect({folder!r})",
    "nbinspect.inspect(folder, stats=False): typed tree": "nbinspect.inspect({folder!r}, stats=False)",
    "baseline: from_pretrained, then nbinspect.inspect": (
        "nbinspect.inspect(transformers.AutoModelForCausalLM.from_pretrained({folder!r}))"
    ),
}


def config(target_bytes: float) -> transformers.LlamaConfig:
    per_layer = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP + 2 * HIDDEN
    layers = max(1, round((target_bytes / 4 - 2 * VOCAB * HIDDEN) / per_layer))
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=MLP, num_hidden_layers=layers,
        num_attention_heads=16, max_position_embeddings=512,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.0, help="folder size in GB (default 1)")
    parser.add_argument("--dir", default=None, help="where to write the temporary folder")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp) / "llama"
        torch.manual_seed(0)
        transformers.LlamaForCausalLM(config(args.gb * 1e9)).save_pretrained(folder, max_shard_size="500MB")
        files = sorted(folder.glob("*.safetensors"))
        size = sum(p.stat().st_size for p in files)
        print(f"folder: {len(files)} safetensors files, {gb(size)} GB fp32\n")
        print(f"{'method':56s} {'seconds':>8s} {'peak RSS MB':>12s}")
        results = {}
        for label, code in METHODS.items():
            warm(*files)
            r = results[label] = run_isolated(code.format(folder=str(folder)), SETUP)
            print(f"{label:56s} {r['seconds']:8.2f} {r['peak_bytes'] / 2**20:12.0f}")
        base = results["baseline: from_pretrained, then nbinspect.inspect"]
        streamed = results["nbinspect.inspect(folder): typed tree, stats streamed"]
        print(
            f"\nstreamed from the folder: {streamed['peak_bytes'] / base['peak_bytes']:.3f}x the baseline's peak "
            f"memory ({streamed['peak_bytes'] / size:.2f}x the folder), {base['seconds'] / streamed['seconds']:.2f}x "
            f"its speed; the largest tensor is {VOCAB * HIDDEN * 4 / size:.2f}x the folder"
        )


if __name__ == "__main__":
    main()
