"""Streaming statistics over a sharded safetensors checkpoint: one process against
worker processes, throughput (GB/s) and peak resident memory.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_shards.py [--gb 3] [--workers 2]

Writes a synthetic checkpoint of `--gb` GB of bf16 weights in 512 MB shards with a
``model.safetensors.index.json`` under /tmp (deleted at the end), reads it once so both
passes start from the page cache, then runs ``nbinspect.stats(folder)`` (with torch's default
threads, and with one thread) and ``nbinspect.stats(folder, workers=N)``, each in a fresh
process; peak resident memory (the process, and its largest worker) is sampled from /proc.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from _measure import PeakRSS

SHARD_BYTES = 512 * 2**20
TENSOR_ELEMENTS = 32 * 2**20  # 64 MB of bf16 per tensor


def write_checkpoint(folder: Path, gb: float) -> int:
    from safetensors.torch import save_file

    torch.manual_seed(0)
    total, shard, weight_map = int(gb * 2**30), 0, {}
    written = 0
    while written < total:
        tensors = {}
        while sum(t.numel() * 2 for t in tensors.values()) < SHARD_BYTES and written < total:
            name = f"layers.{len(weight_map) + len(tensors)}.weight"
            tensors[name] = (torch.randn(TENSOR_ELEMENTS // 4096, 4096) * 0.02).bfloat16()
            written += TENSOR_ELEMENTS * 2
        file = f"model-{shard:05d}.safetensors"
        save_file(tensors, folder / file)
        weight_map.update(dict.fromkeys(tensors, file))
        shard += 1
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return written


def measure(folder: str, workers: int | None, threads: int | None) -> None:
    """Runs in a fresh process: one stats pass, then its time and peak memory as JSON. Peak
    resident memory is sampled every 50 ms from /proc for this process and its workers
    (ru_maxrss would carry the parent's high-water mark over exec)."""
    import nbinspect

    if threads:
        torch.set_num_threads(threads)
    with PeakRSS(interval=0.05, children=True) as peak:
        start = time.perf_counter()
        frame = nbinspect.stats(folder, workers=workers, progress=False)
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": peak.peak, "worker_rss": peak.child_peak, "rows": len(frame)}))


def run(folder: Path, workers: int | None, threads: int | None = None) -> dict:
    command = [sys.executable, __file__, "--measure", str(folder)]
    command += ([] if workers is None else ["--workers", str(workers)]) + (
        [] if threads is None else ["--threads", str(threads)]
    )
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gb", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.workers if "--workers" in sys.argv else None, args.threads)
        return
    folder = Path(tempfile.mkdtemp(prefix="nbinspect-shards-", dir="/tmp"))
    try:
        size = write_checkpoint(folder, args.gb)
        shards = len(list(folder.glob("*.safetensors")))
        for path in folder.glob("*.safetensors"):  # page cache warm for both passes
            with open(path, "rb") as f:
                while f.read(64 * 2**20):
                    pass
        print(f"synthetic checkpoint: {size / 1e9:.2f} GB of bf16 in {shards} shards ({folder})")
        print("(2-core machine shared with other jobs: wall-clock figures vary between runs; torch's 2 OpenMP")
        print(" threads stall when other jobs hold the cores, so one process is also run with 1 thread)")
        single = run(folder, None)
        one_thread = run(folder, None, threads=1)
        parallel = run(folder, args.workers)
        rows = (("one process", single), ("one, 1 thread", one_thread), (f"{args.workers} workers", parallel))
        for label, r in rows:
            print(
                f"  {label:12s} {r['seconds']:6.1f} s  {size / 1e9 / r['seconds']:5.2f} GB/s  "
                f"peak RSS {r['rss'] / 2**20:6.0f} MB"
                + (f" (largest worker {r['worker_rss'] / 2**20:.0f} MB)" if r["worker_rss"] else "")
            )
        print(
            f"  workers / one process: {single['seconds'] / parallel['seconds']:.2f}x the throughput; "
            f"largest process {max(parallel['rss'], parallel['worker_rss']) / max(single['rss'], 1):.2f}x "
            "the peak memory"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
