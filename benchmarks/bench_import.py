"""What `import nbinspect` adds to `import torch`, in fresh interpreters.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_import.py [--repeat 7]

Each run is a fresh interpreter that imports torch (the baseline, timed), then runs the
measured statement (timed on its own: the difference is what nbinspect adds, free of the
noise in torch's own import time). Measured: ``import nbinspect``, and for reference what
the first use of the analyzers and of the widget load. Best of N, runs interleaved.
Target: ``import nbinspect`` adds <= 0.3 s to ``import torch``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CASES = {
    "import nbinspect": "import nbinspect",
    "first use: nbinspect.inspect (loads pandas)": "import nbinspect; nbinspect.inspect",
    "the widget (anywidget, ipywidgets, IPython)": "import nbinspect; nbinspect.InspectWidget",
}


def timed(statement: str) -> tuple[float, float]:
    """(seconds for import torch, seconds for `statement` after it), in a fresh interpreter."""
    code = (
        "import time\nt = time.perf_counter()\nimport torch\nt1 = time.perf_counter()\n"
        f"{statement}\nprint(t1 - t, time.perf_counter() - t1)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    torch_s, added_s = out.split()
    return float(torch_s), float(added_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch_times: list[float] = []
    added: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, statement in CASES.items():
            torch_s, added_s = timed(statement)
            torch_times.append(torch_s)
            added[name].append(added_s)
    base = min(torch_times)
    print(f"best of {args.repeat}, wall time; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"  {'import torch (baseline)':48s} {base:6.3f} s")
    for name, t in added.items():
        print(f"  {name:48s} +{min(t):6.3f} s after torch   {min(t) / base:6.1%} of import torch")
    print("target: import nbinspect adds <= 0.3 s")


if __name__ == "__main__":
    main()
