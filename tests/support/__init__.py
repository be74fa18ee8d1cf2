"""Helpers the tests and the benchmarks share: the chromium they drive (`chromium`), how
they read resident memory (`rss`), and the environment of a child interpreter that imports
them. Standard library (and playwright) only, nothing from nbinspect or pytest, so a
benchmark or a test's subprocess imports them without the test suite's machinery."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "subprocess_env"]

ROOT = Path(__file__).resolve().parents[2]


def subprocess_env() -> dict[str, str]:
    """This environment with the repository root first on PYTHONPATH, so a child interpreter
    imports tests.support and this checkout's nbinspect."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}
