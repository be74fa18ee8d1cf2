"""The browser of the browser tests and benchmarks: a Chromium driven by playwright.

Which Chromium, in this order: ``NBINSPECT_CHROMIUM`` when set; Debian's ``/usr/bin/chromium``
(or a ``chromium`` on PATH); the one ``python -m playwright install chromium`` put in
playwright's cache. ``make test`` runs ``python -m tests.support.chromium ensure`` first: it
prints the browser's path, installing one when none is there (Debian's ``chromium`` with apt
when root, else playwright's download), or stops with one line saying what to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

__all__ = ["CHROMIUM", "FLAGS", "ensure", "find", "launch"]

SYSTEM = ("/usr/bin/chromium",)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _candidates() -> list[str]:
    """Debian's path, then `chromium` on PATH (``NBINSPECT_CHROMIUM_CANDIDATES``, a
    colon-separated list, replaces the fixed paths: tests point it at empty folders)."""
    fixed = os.environ.get("NBINSPECT_CHROMIUM_CANDIDATES")
    paths = [p for p in fixed.split(":") if p] if fixed is not None else list(SYSTEM)
    on_path = shutil.which("chromium")
    return [*paths, *([on_path] if on_path else [])]


def _playwright_chromium() -> str | None:
    """The executable of playwright's own Chromium, when downloaded (playwright's cache,
    ``PLAYWRIGHT_BROWSERS_PATH`` honoured)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:
        return None
    return path if path and Path(path).is_file() else None


def find() -> str | None:
    """The Chromium to use, or None: NBINSPECT_CHROMIUM, the system's, playwright's."""
    explicit = os.environ.get("NBINSPECT_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for path in _candidates():
        if Path(path).is_file() and os.access(path, os.X_OK):
            return path
    return _playwright_chromium()


def _playwright_command() -> list[str]:
    """How playwright is run (``NBINSPECT_PLAYWRIGHT`` overrides it, for tests)."""
    override = os.environ.get("NBINSPECT_PLAYWRIGHT")
    return override.split() if override else [sys.executable, "-m", "playwright"]


def _is_root() -> bool:
    return os.environ.get("NBINSPECT_ASSUME_ROOT", str(int(os.geteuid() == 0))) == "1"


HINT = (
    "make test needs Chromium for its browser tests and could not install one: run "
    "`sudo apt-get install -y chromium` (Debian/Ubuntu) or `{python} -m playwright install chromium`, "
    "or set NBINSPECT_CHROMIUM=/path/to/chrome, then `make test` again"
)


def ensure(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> str | None:
    """A Chromium's path, installing one when none is there: Debian's `chromium` with apt
    (root only), else ``playwright install chromium``. None when both failed (`say` was
    told what to run)."""
    found = find()
    if found:
        return found
    steps: list[tuple[str, Sequence[Sequence[str]]]] = []
    apt = shutil.which("apt-get")
    if apt and _is_root():
        steps.append(("Debian's chromium (apt-get)", [[apt, "update"], [apt, "install", "-y", "chromium"]]))
    steps.append(("playwright's chromium", [[*_playwright_command(), "install", "chromium"]]))
    for label, commands in steps:
        say(f"no Chromium found: installing {label}")
        # the installers' progress goes to stderr: stdout carries only the path (make test reads it)
        ok = all(subprocess.run(list(c), check=False, stdout=sys.stderr).returncode == 0 for c in commands)
        found = find()
        if ok and found:
            return found
    say(HINT.format(python=os.path.relpath(sys.executable) if sys.executable else "python"))
    return None


CHROMIUM = os.environ.get("NBINSPECT_CHROMIUM") or find() or SYSTEM[0]


def launch(playwright: Playwright) -> Browser:
    """Headless chromium at CHROMIUM with FLAGS (`playwright` from ``sync_playwright()``)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["ensure"]:
        print("usage: python -m tests.support.chromium ensure", file=sys.stderr)
        return 2
    path = ensure()
    if path is None:
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
