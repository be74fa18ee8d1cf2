"""Statistics of a model under 2 GiB in a fresh interpreter, the first call included, against
a bare ``torch.sum`` pass over the same parameters in the same process.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_first_call.py [--layers 6] [--d-model 2048]

The child process does what a session does: ``import nbinspect``, uses it (``nbinspect.stats``
is looked up, which starts loading the fused kernels in the background), builds the model
(``bench_stats.build_gpt``: 6 layers of d_model 2048 ≈ 0.41B fp32 parameters, 1.6 GB), runs a
bare sum pass (which also warms the pages), then times the first ``nbinspect.stats(model)``
and the best of `--repeat` more, each beside the best bare pass. ``--no-warm-up`` sets
``NBINSPECT_WARM_UP=0`` (the code before the background warm-up behaved so: models under
2 GiB took the torch path).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _measure import compile_sources


def child(layers: int, d: int, repeat: int) -> None:
    import torch
    from _measure import best_of
    from bench_stats import build_gpt

    import nbinspect

    stats = nbinspect.stats  # first use in the session
    model = build_gpt(layers, d)
    params = [p.detach() for p in model.parameters()]

    def bare() -> None:
        for p in params:
            p.sum()

    bare()
    floor = best_of(bare, repeat)
    start = time.perf_counter()
    stats(model, progress=False)
    first = time.perf_counter() - start
    steady = best_of(lambda: stats(model, progress=False), repeat)
    floor = min(floor, best_of(bare, repeat))
    floor_cpu = best_of(bare, repeat, clock=time.process_time)  # every thread's CPU time: less moved by load
    steady_cpu = best_of(lambda: stats(model, progress=False), repeat, clock=time.process_time)
    from nbinspect.analyze import fused

    print(
        json.dumps(
            {
                "bytes": sum(p.nbytes for p in params),
                "floor": floor,
                "first": first,
                "steady": steady,
                "floor_cpu": floor_cpu,
                "steady_cpu": steady_cpu,
                "kernels": fused._loaded.get("kernels") is not None,
                "threads": torch.get_num_threads(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-warm-up", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.layers, args.d_model, args.repeat)
        return
    compile_sources()
    env = {**os.environ, **({"NBINSPECT_WARM_UP": "0"} if args.no_warm_up else {})}
    command = [sys.executable, __file__, "--child", "--layers", str(args.layers), "--d-model", str(args.d_model)]
    load = os.getloadavg()[0]
    out = subprocess.run([*command, "--repeat", str(args.repeat)], capture_output=True, text=True, env=env, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    gb = r["bytes"] / 1e9
    print(f"{gb:.2f} GB fp32 in memory, fresh interpreter; load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    print(f"  kernels loaded by the end: {r['kernels']}; torch threads {r['threads']}")
    print(f"  bare torch.sum pass        {r['floor']:.3f} s  {gb / r['floor']:5.1f} GB/s  1.00x")
    print(
        f"  first nbinspect.stats      {r['first']:.3f} s  {gb / r['first']:5.1f} GB/s  {r['first'] / r['floor']:.2f}x"
    )
    print(
        f"  best of the next ones      {r['steady']:.3f} s  {gb / r['steady']:5.1f} GB/s  "
        f"{r['steady'] / r['floor']:.2f}x"
    )
    print(
        f"  CPU seconds (all threads), best: bare {r['floor_cpu']:.3f}, stats {r['steady_cpu']:.3f}  "
        f"{r['steady_cpu'] / r['floor_cpu']:.2f}x"
    )


if __name__ == "__main__":
    main()
