"""The widget in the other notebook front-ends that run here: a marimo app (`marimo run`) and
Jupyter Notebook 7, each opened in chromium, the widget shown and answering clicks.
Screenshots go to NBINSPECT_SCREENSHOT_DIR when set."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

import pytest
from playwright.sync_api import expect

from .jupyterlab_server import TOKEN, _free_port, jupyterlab
from .pages import contrast
from .test_jupyterlab import NOTEBOOK

SHOTS = os.environ.get("NBINSPECT_SCREENSHOT_DIR")

APP = """import marimo

app = marimo.App(width="full")


@app.cell
def _():
    import nbinspect
    from nbinspect import examples

    model = examples.build("cnn")  # kept: the widget reads its values from it
    insp = nbinspect.inspect(model)
    insp
    return (insp, model)


if __name__ == "__main__":
    app.run()
"""


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("marimo")
    (root / "app.py").write_text(APP)
    # marimo's own default is its light theme whatever the browser prefers: "system" follows
    # the page's colour scheme, so the dark run below is marimo's dark theme
    (root / ".marimo.toml").write_text('[display]\ntheme = "system"\n')
    port = _free_port()
    log = open(root / "server.log", "w")  # noqa: SIM115 (closed below)
    env = {**os.environ, "HOME": str(root), "MARIMO_SKIP_UPDATE_CHECK": "1"}
    cmd = [sys.executable, "-m", "marimo", "run", str(root / "app.py"), "--headless", "--port", str(port)]
    server = subprocess.Popen([*cmd, "--host", "127.0.0.1"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"marimo did not start: {(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@pytest.mark.parametrize(("width", "dark"), [(1280, False), (700, False), (1280, True)])
def test_a_marimo_app_shows_the_widget_and_reacts_to_clicks(marimo_app, browser, width, dark):
    context = browser.new_context(viewport={"width": width, "height": 900}, color_scheme="dark" if dark else "light")
    try:
        page = context.new_page()
        page.goto(marimo_app)
        grid = page.locator("[role=treegrid]")
        expect(grid).to_be_visible(timeout=90_000)
        expect(page.locator(".nbi-header")).to_contain_text("SmallCNN")
        conv = grid.locator('[role=row][data-path="features.0"]')
        expect(conv).to_have_attribute("aria-expanded", "false")
        conv.locator(".nbi-caret").click()
        expect(conv).to_have_attribute("aria-expanded", "true")
        weight = grid.locator('[role=row][data-path="features.0.weight"]')
        weight.click()
        expect(weight).to_have_attribute("aria-selected", "true")
        expect(page.locator(".nbi-detail-title")).to_have_text("features.0.weight")
        # the values come from the kernel through the widget's commands (marimo has no experimental.invoke)
        expect(page.locator(".nbi-heat")).to_have_attribute("data-grid", re.compile(r"\d+x\d+"), timeout=30_000)
        expect(page.locator(".nbi-detail")).not_to_contain_text("could not be fetched")
        # marimo defines no JupyterLab variable: the widget's colours follow its theme (a white
        # widget on its dark page before), every text readable on what is behind it
        background = page.locator(".nbi").evaluate("e => getComputedStyle(e).backgroundColor")
        assert background == ("rgb(17, 17, 17)" if dark else "rgb(255, 255, 255)")
        texts = [
            ".nbi-model",
            ".nbi-total-label",
            ".nbi-detail-title",
            ".nbi-chart .nbi-axis text",
            '[data-path="features"]',
        ]
        for text in texts:
            assert contrast(page.locator(text).first) >= 4.5, text
        if SHOTS:
            page.screenshot(path=f"{SHOTS}/marimo-{width}{'-dark' if dark else ''}.png", full_page=True)
    finally:
        context.close()


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("nb7-root")
    (root / "widget.ipynb").write_text(json.dumps(NOTEBOOK))
    with jupyterlab(root, app="notebook") as url:
        yield url


def _run_nb7(page, index: int) -> None:
    """Run one cell in Notebook 7 (Shift+Enter in its editor; its status bar differs from Lab's)."""
    page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def test_jupyter_notebook_7_shows_the_widget_and_reacts_to_clicks(notebook7, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{notebook7}/notebooks/widget.ipynb?token={TOKEN}")
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(4, timeout=60_000)
    expect(page.locator(".jp-NotebookKernelStatus, #jp-kernel-status, .jp-KernelStatus").first).to_be_attached(
        timeout=60_000
    )
    page.wait_for_timeout(3000)  # the kernel is up
    _run_nb7(page, 0)
    # the first cell's output only: Notebook 7 may briefly hold a second view of the same model
    grid = page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea [role=treegrid]:visible")
    expect(grid).to_be_visible(timeout=60_000)
    conv = grid.locator('[role=row][data-path="features.0"]')
    conv.locator(".nbi-caret").click()
    expect(conv).to_have_attribute("aria-expanded", "true")
    expect(page.locator(".nbinspect-saved[id]")).to_be_hidden()  # the live widget shows, its saved view does not
    _run_nb7(page, 2)  # Python selects a row: the tree follows
    expect(grid.locator('[role=row][data-path="classifier.2"]')).to_have_attribute(
        "aria-selected", "true", timeout=30_000
    )
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/notebook7-live.png", full_page=True)
    context.close()
    # Notebook 7 itself reports one error while it loads its settings (not nbinspect's)
    assert [e for e in errors if "reading 'schema'" not in e] == [], errors
