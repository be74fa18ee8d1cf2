"""Shared by the benchmarks: run a snippet in a fresh interpreter and report its wall time
and peak resident memory (VmHWM) above the interpreter's own; time the best of N runs, or
several functions in turn. Also the one door to what the benchmarks share with the tests
(tests/support: the chromium they drive, resident memory from /proc; tests/browser: a
JupyterLab server)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Benchmarks run as scripts (their folder on sys.path): the repository root makes tests.support importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser.jupyterlab_server import TOKEN as LAB_TOKEN
from tests.browser.jupyterlab_server import jupyterlab
from tests.support import subprocess_env
from tests.support.chromium import launch as launch_chromium
from tests.support.rss import PeakRSS, reset_peak, status

__all__ = [
    "FLOAT_DTYPES",
    "LAB_TOKEN",
    "PRELUDE",
    "PeakRSS",
    "best_of",
    "compile_sources",
    "gb",
    "interleaved",
    "interleaved_times",
    "jupyterlab",
    "launch_chromium",
    "reset_peak",
    "run_isolated",
    "status",
    "warm",
]

# Imports first, then the baseline RSS: "peak beyond the interpreter" excludes torch itself.
PRELUDE = """
import json, time, torch, nbinspect
from tests.support.rss import status as _status
nbinspect.stats, nbinspect.compare, nbinspect.inspect  # load the lazy parts before timing
{setup}
_base = _status("VmRSS")
_t0 = time.perf_counter()
"""
_EPILOGUE = """
_dt = time.perf_counter() - _t0
print(json.dumps({"seconds": _dt, "peak_bytes": _status("VmHWM") - _base, "base_bytes": _base}))
"""

# Names of the floating dtypes a benchmark can run in (`getattr(torch, name)`): torch stays unimported here.
FLOAT_DTYPES = ("float32", "bfloat16", "float16")


def run_isolated(code: str, setup: str = "") -> dict:
    """{'seconds', 'peak_bytes', 'base_bytes'} of `code` run after PRELUDE in a new process;
    `setup` runs before the baseline RSS is taken (more imports, a warm-up)."""
    prelude = PRELUDE.replace("{setup}", setup)
    out = subprocess.run(
        [sys.executable, "-c", prelude + code + _EPILOGUE], capture_output=True, text=True, env=subprocess_env()
    )
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


def compile_sources() -> None:
    """Write nbinspect's bytecode, as ``pip install`` does: a first call measured in a fresh
    interpreter must not include compiling the sources (``PYTHONDONTWRITEBYTECODE`` would
    otherwise have every run compile them again)."""
    import compileall

    import nbinspect

    compileall.compile_dir(Path(nbinspect.__file__).parent, quiet=1)


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


def interleaved(
    fns: dict[str, Callable[[], object]], repeat: int, clock: Callable[[], float] = time.process_time
) -> dict[str, tuple[float, float]]:
    """(best, median) seconds of each function, the functions run in turn `repeat` times, so
    load from other processes falls on all of them alike; CPU time by default."""
    return {name: (min(t), statistics.median(t)) for name, t in interleaved_times(fns, repeat, clock).items()}


def interleaved_times(
    fns: dict[str, Callable[[], object]], repeat: int, clock: Callable[[], float] = time.process_time
) -> dict[str, list[float]]:
    """Each function's seconds in every round, the functions run in turn `repeat` times
    (round i of one function ran beside round i of the others: pair them)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times
