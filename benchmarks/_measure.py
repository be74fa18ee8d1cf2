"""Shared by the benchmarks: run a snippet in a fresh interpreter and report its wall time
and peak resident memory (VmHWM) above the interpreter's own; time the best of N runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["PRELUDE", "best_of", "gb", "run_isolated", "warm"]

# Imports first, then the baseline RSS: "peak beyond the interpreter" excludes torch itself.
PRELUDE = """
import json, time, torch, nbinspect
nbinspect.stats, nbinspect.compare, nbinspect.inspect  # load the lazy parts before timing
{setup}
def _status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
_base = _status("VmRSS:")
_t0 = time.perf_counter()
"""
_EPILOGUE = """
_dt = time.perf_counter() - _t0
print(json.dumps({"seconds": _dt, "peak_bytes": _status("VmHWM:") - _base, "base_bytes": _base}))
"""


def run_isolated(code: str, setup: str = "") -> dict:
    """{'seconds', 'peak_bytes', 'base_bytes'} of `code` run after PRELUDE in a new process;
    `setup` runs before the baseline RSS is taken (more imports, a warm-up)."""
    prelude = PRELUDE.replace("{setup}", setup)
    out = subprocess.run([sys.executable, "-c", prelude + code + _EPILOGUE], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm(*paths: Path) -> None:
    """Read files once so the page cache holds them: the figures are warm throughput."""
    buffer = bytearray(1 << 24)
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buffer):
                pass


def gb(n: float) -> str:
    return f"{n / 1e9:.2f}"


def best_of(fn, repeat: int, clock=time.perf_counter) -> float:
    """The fastest of `repeat` runs of `fn()`, in seconds of `clock` (wall time by default;
    ``time.process_time`` for CPU time): the run least disturbed by other load."""
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)
