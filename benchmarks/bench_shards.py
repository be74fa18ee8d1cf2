"""Streaming statistics over a sharded safetensors checkpoint: against a read-only pass in
the same process, and one call against ``workers=N``; throughput (GB/s) and peak resident
memory.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_shards.py [--gb 3] [--dtype bf16] [--workers 2]

Writes a synthetic checkpoint of `--gb` GiB of bf16 (or fp32) weights in 512 MB shards with
a ``model.safetensors.index.json`` under /tmp (deleted at the end), reads it once so every
pass starts from the page cache, then, each in a fresh process: the read-only pass
(``safetensors.safe_open``, ``get_tensor`` and ``sum`` per tensor), ``nbinspect.stats(folder)``
twice (the first call of the process, with the time it spent loading numba and the kernels,
then again) and the read-only pass again; the same with one torch thread; and
``nbinspect.stats(folder, workers=N)``. Peak resident memory (the process, and its largest
worker) is sampled from /proc. Last, in one more process, ``--rounds`` rounds of one call,
``workers=N`` and the read-only pass, alternating, compared by their medians: a single
second call in each of two processes moved ±15% between runs, more than the two differ.
"""

from __future__ import annotations

import argparse
import json
import os
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


def write_checkpoint(folder: Path, gb: float, dtype: str = "bf16") -> int:
    from safetensors.torch import save_file

    wide = dtype == "fp32"
    size = 4 if wide else 2
    torch.manual_seed(0)
    total, shard, weight_map = int(gb * 2**30), 0, {}
    written = 0
    while written < total:
        tensors = {}
        while sum(t.numel() * size for t in tensors.values()) < SHARD_BYTES and written < total:
            name = f"layers.{len(weight_map) + len(tensors)}.weight"
            values = torch.randn(TENSOR_ELEMENTS // 4096 // size * 2, 4096) * 0.02  # 64 MB a tensor
            tensors[name] = values if wide else values.bfloat16()
            written += values.numel() * size
        file = f"model-{shard:05d}.safetensors"
        save_file(tensors, folder / file)
        weight_map.update(dict.fromkeys(tensors, file))
        shard += 1
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return written


def read_only(folder: str) -> None:
    """The floor: every tensor read by the safetensors library (memory-mapped) and summed."""
    from safetensors import safe_open

    for path in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(path, "pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open has no iterator
                f.get_tensor(name).sum()


def measure(folder: str, workers: int | None, threads: int | None, read: str | None = None) -> None:
    """Runs in a fresh process: the read-only pass, two stats passes (the process's first
    call, then a second), the read-only pass again; times and peak memory as JSON. Peak
    resident memory is sampled every 50 ms from /proc for this process and its workers
    (ru_maxrss would carry the parent's high-water mark over exec)."""
    import nbinspect
    from nbinspect.analyze import fused

    loading = [0.0]
    load = fused._load

    def timed_load() -> None:  # what the first call spends loading numba and the kernels
        loading[0] += _timed(load)

    fused._load = timed_load
    if read:  # --read pread / mapped: how the kernel reads the files (else nbinspect's default)
        fused.MAPPED = read == "mapped"
    if threads:
        torch.set_num_threads(threads)
    floor = [_timed(read_only, folder)]
    with PeakRSS(interval=0.05, children=True) as peak:
        start = time.perf_counter()
        frame = nbinspect.stats(folder, workers=workers, progress=False)
        seconds = time.perf_counter() - start
    again = _timed(lambda f: nbinspect.stats(f, workers=workers, progress=False), folder)
    floor.append(_timed(read_only, folder))
    print(
        json.dumps(
            {
                "seconds": seconds,
                "loading": loading[0],
                "again": again,
                "floor": min(floor),
                "rss": peak.peak,
                "worker_rss": peak.child_peak,
                "rows": len(frame),
            }
        )
    )


def alternate(folder: str, workers: int, rounds: int) -> None:
    """Runs in a fresh process: after one call of each, `rounds` rounds of one call,
    ``workers=N`` and the read-only pass; the median seconds of each as JSON."""
    import statistics

    import nbinspect

    passes = {
        "one": lambda: nbinspect.stats(folder, progress=False),
        "workers": lambda: nbinspect.stats(folder, workers=workers, progress=False),
        "floor": lambda: read_only(folder),
    }
    for run_once in passes.values():
        run_once()
    times: dict[str, list[float]] = {name: [] for name in passes}
    for _ in range(rounds):
        for name, run_once in passes.items():
            times[name].append(_timed(run_once))
    print(json.dumps({name: statistics.median(t) for name, t in times.items()}))


def _timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def run(folder: Path, workers: int | None, threads: int | None = None, read: str | None = None) -> dict:
    command = ["--measure", str(folder)] + (["--read", read] if read else [])
    command += ([] if workers is None else ["--workers", str(workers)]) + (
        [] if threads is None else ["--threads", str(threads)]
    )
    return _child(command)


def _child(arguments: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *arguments], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gb", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of one call against workers=N, alternating")
    parser.add_argument("--one-process", action="store_true", help="only the one-process run")
    parser.add_argument("--keep", help="write the checkpoint into this folder and keep it (reused if it exists)")
    parser.add_argument(
        "--compare-pread",
        type=int,
        default=0,
        metavar="N",
        help="N rounds of one process reading through mappings, then with pread (interleaved)",
    )
    parser.add_argument("--read", choices=("pread", "mapped"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--alternate", help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure, args.workers if "--workers" in sys.argv else None, args.threads, args.read)
        return
    if args.alternate:
        alternate(args.alternate, args.workers, args.rounds)
        return
    folder = Path(args.keep or tempfile.mkdtemp(prefix="nbinspect-shards-", dir="/tmp"))
    try:
        if args.keep and (folder / "model.safetensors.index.json").exists():
            size = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        else:
            folder.mkdir(exist_ok=True)
            size = write_checkpoint(folder, args.gb, args.dtype)
        shards = len(list(folder.glob("*.safetensors")))
        for path in folder.glob("*.safetensors"):  # page cache warm for both passes
            with open(path, "rb") as f:
                while f.read(64 * 2**20):
                    pass
        print(f"synthetic checkpoint: {size / 1e9:.2f} GB of {args.dtype} in {shards} shards ({folder})")
        print(f"load average {os.getloadavg()[0]:.1f}")
        print("(2-core machine shared with other jobs: wall-clock figures vary between runs; torch's 2 OpenMP")
        print(" threads stall when other jobs hold the cores, so one process is also run with 1 thread)")
        single = run(folder, None)
        rows = [("one process", single)]
        for _ in range(args.compare_pread):
            rows += [("pread", run(folder, None, read="pread")), ("mapped", run(folder, None, read="mapped"))]
        if not args.one_process:
            rows += [
                ("one, 1 thread", run(folder, None, threads=1)),
                (f"{args.workers} workers", run(folder, args.workers)),
            ]
        for label, r in rows:
            print(
                f"  {label:14s} first call {r['seconds']:6.2f} s {size / 1e9 / r['seconds']:5.2f} GB/s "
                f"{r['seconds'] / r['floor']:5.2f}x (loading the kernels {r['loading']:.2f} s); "
                f"again {r['again']:6.2f} s {size / 1e9 / r['again']:5.2f} GB/s "
                f"{r['again'] / r['floor']:5.2f}x the read-only pass ({r['floor']:.2f} s, "
                f"{size / 1e9 / r['floor']:.1f} GB/s); peak RSS {r['rss'] / 2**20:6.0f} MB"
                + (f" (largest worker {r['worker_rss'] / 2**20:.0f} MB)" if r["worker_rss"] else "")
            )
        if not args.one_process:
            parallel = rows[-1][1]
            print(
                f"  workers / one process: {single['again'] / parallel['again']:.2f}x the throughput (second calls); "
                f"largest process {max(parallel['rss'], parallel['worker_rss']) / max(single['rss'], 1):.2f}x "
                "the peak memory"
            )
            both = _child(["--alternate", str(folder), "--workers", str(args.workers), "--rounds", str(args.rounds)])
            print(
                f"  alternating in one process, {args.rounds} rounds, medians: one call {both['one']:.3f} s, "
                f"{args.workers} workers {both['workers']:.3f} s, read-only {both['floor']:.3f} s; "
                f"workers / one call: {both['one'] / both['workers']:.2f}x the throughput"
            )
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
