"""Real-browser fixtures: Debian's chromium driven by Python playwright.

A missing browser fails these tests. Locally, NBINSPECT_SKIP_BROWSER=1 skips them instead,
unless CI is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.chromium import CHROMIUM, launch


def _require_chromium() -> None:
    if Path(CHROMIUM).is_file():
        return
    if os.environ.get("NBINSPECT_SKIP_BROWSER") and not os.environ.get("CI"):
        pytest.skip(f"no browser at {CHROMIUM} (NBINSPECT_SKIP_BROWSER is set)")
    pytest.fail(f"no browser at {CHROMIUM}: `make browser` finds or installs one (tests/support/chromium.py)")


@pytest.fixture(scope="session")
def browser():
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
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
        page.on("pageerror", lambda e: errors.append(f"page error: {e}\n{e.stack}"))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto(url)
        return page

    yield open_
    for c in contexts:
        c.close()
    assert not errors, errors


@pytest.fixture
def open_result(tmp_path, open_page):
    """open_result(result, name, width=None, color_scheme="light") -> page: an Inspection's or
    Comparison's standalone page (``to_html`` into tmp_path), opened and its table shown;
    `width` sets the viewport to width x 900."""

    def open_(result, name: str, width: int | None = None, color_scheme: str = "light"):
        path = tmp_path / f"{name}.html"
        result.to_html(path)
        page = open_page(path.as_uri(), color_scheme)
        if width is not None:
            page.set_viewport_size({"width": width, "height": 900})
        expect(page.locator("[role=treegrid]")).to_be_visible()
        return page

    return open_
