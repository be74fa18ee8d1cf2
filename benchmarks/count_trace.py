"""Instructions a module of ``nbinspect.trace`` and of ``torchinfo.summary``, counted by
callgrind: unlike CPU time, the machine's load does not move them, so two trees (or two
sessions) can be compared to the percent.

    .venv/bin/python benchmarks/count_trace.py [--layers 5000] [--parts plain,trace,torchinfo]

Needs valgrind and a C compiler: a two-line helper that switches callgrind's collection on
and off is compiled into a temporary folder. Each part runs in its own process under
callgrind, on the model of ``bench_trace.py`` (``Linear(8, 8)`` layers, input [1, 8]): built,
the part run twice to warm it, garbage collected, then counted once (without the statistics
kernels' warm-up thread, whose load callgrind would count with the part). Reported: the part's
instructions a module (÷ layers + 1), those above the plain forward's, and that ÷
torchinfo's above the plain forward (torchinfo optional: ``pip install -e .[bench]``).
``--keep-result`` frees the part's result after the count (the plain forward's output holds
its autograd graph, torchinfo's summary a record per module): by default it is freed inside
the count, as ``bench_trace.py`` times it. ``--gc-off`` counts with the garbage collector
off: a collection lands in a part at random (its share moves a count by a few percent), so
compare two trees with it.
A run at 5,000 layers takes a few minutes a part.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOGGLE_C = "#include <valgrind/callgrind.h>\nvoid toggle(void) { CALLGRIND_TOGGLE_COLLECT; }\n"


FORWARD = ("plain", "run_trace", "trace", "torchinfo")  # the parts that run the model
PARTS = (*FORWARD, "inspect", "frames", "flow", "layers_with_trace", "graph_frames", "fold_repeats")


def parts(model, x) -> dict:
    """What can be counted, by name (each a function of nothing): those in FORWARD run the
    model; the others work on an inspection and a trace made before the count."""
    import nbinspect
    from nbinspect.analyze.fold import fold_repeats
    from nbinspect.analyze.graph import graph_frames
    from nbinspect.analyze.trace_frames import flow, layers_with_trace
    from nbinspect.backends.torch.trace import run_trace
    from nbinspect.pipeline import trace_frames

    def torchinfo_summary():
        import torchinfo

        return torchinfo.summary(model, input_data=x, verbose=0)

    inspected = nbinspect.inspect(model, stats=False)
    recorded = run_trace(model, (x,))
    calls = flow(recorded)
    layers, params = layers_with_trace(inspected.frames["layers"], recorded, calls), inspected.frames["params"]
    return {
        "plain": lambda: model(x),
        "run_trace": lambda: run_trace(model, (x,)),  # as a user calls it (it walks the model)
        "inspect": lambda: nbinspect.inspect(model, stats=False),
        "frames": lambda: trace_frames(dict(inspected.frames), dict(inspected.totals), recorded),
        "flow": lambda: flow(recorded),
        "layers_with_trace": lambda: layers_with_trace(inspected.frames["layers"], recorded, calls),
        "graph_frames": lambda: graph_frames(recorded.dataflow, calls, layers, params),
        "fold_repeats": lambda: fold_repeats(layers, params),
        "trace": lambda: nbinspect.trace(model, x),
        "torchinfo": torchinfo_summary,
    }


def child(layers: int, part: str, helper: str, gc_off: bool, keep: bool) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(layers)))
    x = torch.randn(1, 8)
    run = parts(model, x)[part]
    run()
    run()
    toggle = ctypes.CDLL(helper).toggle
    gc.collect()
    if gc_off:
        gc.disable()
    toggle()
    result = run()
    if not keep:  # dropped inside the count, as bench_trace.py's timing drops it
        del result
    toggle()


def count(layers: int, part: str, helper: str, flags: list[str], folder: str) -> int:
    out = os.path.join(folder, f"{part}.out")
    command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}"]
    command += [sys.executable, __file__, "--child", part, "--layers", str(layers), "--helper", helper]
    # the same dicts and sets in every process; no kernel warm-up thread (nbinspect's first use
    # starts one: callgrind would count its numba load with the part)
    env = {**os.environ, "PYTHONHASHSEED": "0", "NBINSPECT_WARM_UP": "0"}
    subprocess.run(command + flags, check=True, capture_output=True, env=env)
    totals = re.search(r"^(?:totals|summary): (\d+)", Path(out).read_text(), re.M)
    if totals is None:
        raise RuntimeError(f"no totals in {out}")
    return int(totals.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=5000)
    parser.add_argument("--parts", default="plain,trace,torchinfo", help="comma-separated; plain is always counted")
    parser.add_argument("--gc-off", action="store_true")
    parser.add_argument("--keep-result", action="store_true", help="free the part's result after the count")
    parser.add_argument("--jobs", type=int, default=1, help="parts counted at once (load does not move a count)")
    parser.add_argument("--out", help="a folder to keep callgrind's files in (for callgrind_annotate)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.layers, args.child, args.helper, args.gc_off, args.keep_result)
        return
    names = ["plain"] + [p for p in args.parts.split(",") if p != "plain"]
    unknown = set(names) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}; known: {', '.join(PARTS)}")
    with tempfile.TemporaryDirectory() as folder:
        helper = os.path.join(folder, "toggle.so")
        source = os.path.join(folder, "toggle.c")
        Path(source).write_text(TOGGLE_C)
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", helper, source], check=True)
        modules = args.layers + 1
        with ThreadPoolExecutor(args.jobs) as pool:
            flags = ["--gc-off"] * args.gc_off + ["--keep-result"] * args.keep_result
            found = pool.map(lambda name: count(args.layers, name, helper, flags, args.out or folder), names)
            counted = {name: n / modules for name, n in zip(names, found)}
    plain = counted["plain"]
    ref = counted.get("torchinfo", 0) - plain
    gc_state = "off" if args.gc_off else "on"
    result = "freed after the count" if args.keep_result else "freed in the count"
    print(f"{args.layers} Linear(8, 8) layers, input [1, 8], gc {gc_state}, result {result}; k instructions a module:")
    print("  (above plain: parts that run the model less the plain forward; the others as counted)")
    print(f"  {'':18s} {'all':>9s} {'above plain':>12s}" + (f" {'x torchinfo':>12s}" if ref > 0 else ""))
    for name, value in counted.items():
        above = value - plain if name in FORWARD else value  # the others' own count
        line = f"  {name:18s} {value / 1e3:9.1f} {above / 1e3:12.1f}"
        print(line + (f" {above / ref:12.3f}" if ref > 0 and name != "plain" else ""))


if __name__ == "__main__":
    main()
