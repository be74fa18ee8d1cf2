"""A notebook using nbinspect, run by nbclient (widget state saved, as its default is), then
read in chromium the four ways a saved notebook is read later:

- nbconvert's HTML with the widget state, offline (its widget scripts come from a CDN);
- nbconvert's HTML without widget state;
- as GitHub shows it: scripts and styles removed, JavaScript off;
- JupyterLab reopened without the kernel that made the widgets, trusted and untrusted.

Each shows the model (totals, problems, FLOPs, the tree) and the training run (its curves at
the last measurement), leaves no progress bar and no "model not found". Screenshots go to
NBINSPECT_SCREENSHOT_DIR when set.
"""

from __future__ import annotations

import copy
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient
from playwright.sync_api import expect

from .jupyterlab_server import TOKEN, jupyterlab, trust

CELLS = [
    "import torch, nbinspect\nfrom nbinspect import examples\n"
    "model = examples.build('tiny_lm')\nx = examples.example_input('tiny_lm')",
    "with torch.no_grad():\n    model.blocks[0].attn.qkv.weight[0, 0] = float('nan')\n"
    "insp = nbinspect.inspect(model, input=x)\ninsp",
    "stats = nbinspect.stats(model, progress=True)\nprint(len(stats), 'tensors')",
    "from nbinspect.track import AnalysisConfig, ModelAnalysisManager\n"
    "manager = ModelAnalysisManager.create(AnalysisConfig(interval=2, gradient_enabled=True))\n"
    "run = examples.build('tiny_lm')\n"
    "manager.widget(run, metrics=['param_change/norm_l2',\n"
    "                             'param_change/relative_change', 'gradient/norm'])",
    # code lines that fit a 700 px page unwrapped (the GitHub-like reading checks the width)
    "torch.manual_seed(0)\nopt = torch.optim.AdamW(run.parameters(), lr=1e-3)\n"
    "for _ in range(6):\n    opt.zero_grad()\n    logits = run(x)[:, :-1]\n"
    "    loss = torch.nn.functional.cross_entropy(\n"
    "        logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))\n"
    "    loss.backward()\n    opt.step()\n    manager.on_optimizer_step(run, optimizer=opt, inputs=x)",
]
# what every reading shows as text
MODEL_TEXT = ["TinyLM", "NaN"]
STALE = ["model not found", "weight stats", "Loading widget", "InspectWidget", "TrackWidget"]
SHOTS = os.environ.get("NBINSPECT_SCREENSHOT_DIR")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The notebook after nbclient ran it: outputs and widget state saved."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    scratch = tmp_path_factory.mktemp("run")
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(scratch)}}).execute()
    nbformat.validate(nb)
    return nb


def test_the_saved_outputs_carry_the_summary_and_nothing_stale(saved):
    assert "application/vnd.jupyter.widget-state+json" in saved.metadata["widgets"]
    widget, shown = saved.cells[1].outputs
    assert "application/vnd.jupyter.widget-view+json" in widget["data"]
    html = shown["data"]["text/html"]
    assert "FLOPs (forward)" in html and "NaN" in html and "Layers (" in html
    progress = [o for o in saved.cells[2].outputs if o["output_type"] == "display_data"]
    assert [o["data"] for o in progress] == [{}]  # the bar's output emptied when it closed
    assert not [o for o in saved.cells[2].outputs if o.get("name") == "stderr"]
    assert not [o for o in saved.cells[4].outputs if o.get("name") == "stderr"]  # the training loop warns of nothing
    track_html = saved.cells[3].outputs[1]["data"]["text/html"]
    assert "data:image/png;base64," in track_html and "steps 4→6" in track_html  # the last measurement


def _html(nb, sanitize_like_github: bool = False, dark: bool = False) -> str:
    from nbconvert import HTMLExporter

    page, _ = HTMLExporter(template_name="lab", theme="dark" if dark else "light").from_notebook_node(nb)
    if sanitize_like_github:  # GitHub drops scripts and styles (with their contents)
        page = re.sub(r"<script\b.*?</script>", "", page, flags=re.DOTALL | re.IGNORECASE)
        page = re.sub(r"<style\b.*?</style>", "", page, flags=re.DOTALL | re.IGNORECASE)
    return page


def _offline(context) -> list[str]:
    """Refuse every request that leaves the machine; returns the list of refused URLs."""
    refused: list[str] = []

    def route(r):
        if r.request.url.startswith(("file:", "blob:", "data:")):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return refused


def _open(browser, path, *, width=1280, dark=False, javascript=True):
    context = browser.new_context(
        viewport={"width": width, "height": 900},
        color_scheme="dark" if dark else "light",
        java_script_enabled=javascript,
    )
    _offline(context)
    page = context.new_page()
    page.goto(path.as_uri())
    return context, page


def _shoot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=f"{SHOTS}/{name}.png", full_page=True)


def _assert_clean(page, where: str = "body") -> None:
    text = page.locator(where).first.inner_text()
    for stale in STALE:
        assert stale not in text, stale


@pytest.mark.parametrize("state", ["with-widget-state", "without-widget-state"])
@pytest.mark.parametrize(("width", "dark"), [(1280, False), (700, False), (1280, True)])
def test_nbconvert_html_shows_the_offline_views(saved, state, width, dark, tmp_path, browser):
    nb = copy.deepcopy(saved)
    if state == "without-widget-state":
        del nb.metadata["widgets"]
    path = tmp_path / "nb.html"
    path.write_text(_html(nb, dark=dark), encoding="utf-8")  # nbconvert's dark theme, the page in dark mode
    context, page = _open(browser, path, width=width, dark=dark)
    try:
        views = page.locator(".nbinspect-saved .nbinspect-view")
        expect(views).to_have_count(2)  # the model and the training run, drawn by the embedded bundle
        model = views.nth(0)
        expect(model.locator("[role=treegrid]")).to_be_visible()
        expect(model.locator(".nbi-header")).to_contain_text("TinyLM")
        expect(model.locator(".nbi-header")).to_contain_text("NaN")
        expect(views.nth(1).locator(".nbi-timeline")).to_contain_text("steps 4→6")
        expect(page.locator(".nbinspect-saved > details > summary").first).to_have_text("Text summary")
        # the widget's own output (placeholder whose scripts would come from a CDN) takes no room
        for placeholder in page.locator(".jp-OutputArea-child:has(.jupyter-widgets)").all():
            expect(placeholder).to_be_hidden()
        emb = model.locator('[role=row][data-path="tok_emb"]')
        expect(emb).to_have_attribute("aria-expanded", "true")
        emb.locator(".nbi-caret").click()  # it reacts offline
        expect(emb).to_have_attribute("aria-expanded", "false")
        expect(model.locator('[role=row][data-path="tok_emb.weight"]')).to_have_count(0)
        _assert_clean(page)
        _shoot(page, f"nbconvert-{state}-{width}{'-dark' if dark else ''}")
    finally:
        context.close()


@pytest.mark.parametrize("width", [1280, 700])
def test_as_github_shows_it_without_javascript(saved, width, tmp_path, browser):
    path = tmp_path / "github.html"
    path.write_text(_html(saved, sanitize_like_github=True), encoding="utf-8")
    context, page = _open(browser, path, width=width, javascript=False)
    try:
        text = page.locator("body").inner_text()
        for shown in [*MODEL_TEXT, "Parameters", "118,528", "FLOPs (forward)", "7.6 M", "Layers (", "├─ tok_emb"]:
            assert shown in text, shown
        assert "Last values" in text and "param_change/norm_l2" in text  # the training run's last state
        curves = page.locator("img[alt=TinyLM]")
        expect(curves).to_be_visible()
        assert curves.evaluate("img => img.naturalWidth") > 300  # the curves as a static image
        assert "import(" not in text and "createObjectURL" not in text  # no script text leaks
        # nothing unwrapped (a warning's one long line) widens the page past the viewport
        wide = page.evaluate(
            """w => [...document.querySelectorAll("body *")]
            .filter((e) => e.getBoundingClientRect().left + e.scrollWidth > w && !e.querySelector("*"))
            .map((e) => e.tagName + ": " + e.textContent.slice(0, 100))""",
            width,
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= width, wide
        _assert_clean(page)
        _shoot(page, f"github-no-js-{width}")
    finally:
        context.close()


@pytest.fixture(scope="module")
def reopened(saved, tmp_path_factory, browser):
    """JupyterLab serving the saved notebook twice: signed (trusted) and not."""
    root = tmp_path_factory.mktemp("reopen-root")
    nbformat.write(saved, root / "trusted.ipynb")
    other = copy.deepcopy(saved)  # trust goes by content: the same bytes would be trusted too
    other.metadata["nbinspect_test"] = "untrusted"
    nbformat.write(other, root / "untrusted.ipynb")
    trust(root, root / "trusted.ipynb")
    with jupyterlab(root) as url:
        yield url


@pytest.mark.parametrize("trusted", [True, False])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_jupyterlab_reopened_without_the_kernel(reopened, trusted, theme, open_page):
    name = "trusted" if trusted else "untrusted"
    page = open_page(f"{reopened}/lab/tree/{name}.ipynb?reset&token={TOKEN}")
    outputs = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea")
    expect(outputs).to_contain_text("TinyLM", timeout=60_000)
    if trusted:  # one view: the widget restored from the saved state, or the embedded bundle's
        expect(outputs.locator("[role=treegrid]:visible")).to_have_count(1, timeout=30_000)
        page.locator(".jp-Notebook .jp-Cell").nth(3).scroll_into_view_if_needed()
        expect(page.locator(".nbi-timeline:visible")).to_contain_text("steps 4→6", timeout=30_000)
    else:  # sanitized: the text summary and the curves' image
        expect(outputs.locator(".nbinspect-static pre")).to_contain_text("FLOPs (forward)")
        track = page.locator(".jp-Notebook .jp-Cell").nth(3)
        track.scroll_into_view_if_needed()
        expect(track.locator("img")).to_be_visible()
        # the curves' image: a light card whose corners show the page (light or dark) around it
        corner = track.locator("img").evaluate(
            """img => { const c = Object.assign(document.createElement("canvas"), { width: img.naturalWidth, height: 4 });
            const x = c.getContext("2d"); x.drawImage(img, 0, 0); return x.getImageData(0, 0, 1, 1).data[3]; }"""
        )
        assert corner == 0
    page.wait_for_timeout(1500)  # the widget manager has answered by now
    if theme == "dark":  # switched once the outputs are drawn (switching while JupyterLab renders raced it)
        page.wait_for_function("() => window.jupyterapp && document.body.dataset.jpThemeName", timeout=60_000)
        page.evaluate(
            """async () => { const app = window.jupyterapp; await app.started; await app.restored;
            await app.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'}); }"""
        )
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
        # a theme change shows JupyterLab's splash while the theme loads: not in the screenshot
        page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)
    _assert_clean(page, ".jp-Notebook")
    page.locator(".jp-Notebook .jp-Cell").nth(3).scroll_into_view_if_needed()
    _shoot(page, f"jupyterlab-reopened-{name}-{theme}")
