"""Running a crafted input where a hang or a memory blow-up cannot take the test run down:
a subprocess with a timeout (a hang fails the test, it does not stall it) that reports its
peak resident memory."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from .support import ROOT, subprocess_env

__all__ = ["ROOT", "baseline_mb", "isolated"]

_REPORT = """
import json as _json, resource as _resource
print("@@" + _json.dumps({"peak_mb": _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def isolated(code: str, *, timeout: float = 120, cwd: Path | None = None) -> tuple[str, float]:
    """Run `code` in a fresh interpreter; (its stdout without the report, peak resident MB).
    Fails the test if it does not finish within `timeout` seconds (a hang) or raises."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code) + _REPORT],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=subprocess_env(),
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"did not finish within {timeout} s (a hang):\n{code}") from None
    assert done.returncode == 0, done.stderr
    out, _, report = done.stdout.rpartition("@@")
    return out, json.loads(report)["peak_mb"]


@functools.cache
def baseline_mb() -> float:
    """Peak resident memory of a fresh interpreter that imported nbinspect and torch."""
    return isolated("import nbinspect, torch")[1]
