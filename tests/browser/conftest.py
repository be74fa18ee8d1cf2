"""Real-browser fixtures: Debian's chromium driven by Python playwright.

A missing browser fails these tests. Locally, NBINSPECT_SKIP_BROWSER=1 skips them instead,
unless CI is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


def _require_chromium() -> None:
    if Path(CHROMIUM).is_file():
        return
    if os.environ.get("NBINSPECT_SKIP_BROWSER") and not os.environ.get("CI"):
        pytest.skip(f"no browser at {CHROMIUM} (NBINSPECT_SKIP_BROWSER is set)")
    pytest.fail(f"no browser at {CHROMIUM}: install Debian's chromium (apt-get install -y chromium)")


@pytest.fixture(scope="session")
def browser():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def open_page(browser):
    """open_page(url, color_scheme="light") -> page; fails the test on any page error or dialog."""
    contexts, errors = [], []

    def open_(url: str, color_scheme: str = "light"):
        context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=color_scheme)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto(url)
        return page

    yield open_
    for c in contexts:
        c.close()
    assert not errors, errors
