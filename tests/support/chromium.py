"""The browser of the browser tests and benchmarks: Debian's chromium driven by playwright
(``playwright install`` cannot download browsers here)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Playwright

__all__ = ["CHROMIUM", "FLAGS", "launch"]

CHROMIUM = os.environ.get("NBINSPECT_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def launch(playwright: Playwright) -> Browser:
    """Headless chromium at CHROMIUM with FLAGS (`playwright` from ``sync_playwright()``)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
