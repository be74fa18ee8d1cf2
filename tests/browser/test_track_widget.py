"""The training-dynamics view in headless chromium: the timeline strip above the module
tree, and the tree's Rel. change column coloured by the last interval's movement."""

from __future__ import annotations

import os

import pytest
import torch
from playwright.sync_api import expect
from torch import nn

from nbinspect import examples
from nbinspect.render.html import standalone_html
from nbinspect.render.widget import bundle_source
from nbinspect.track import AnalysisConfig, ModelAnalysisManager

from .pages import contrast


@pytest.fixture
def trained_page(tmp_path, open_page):
    path, manager = _trained(tmp_path)
    return open_page(path.as_uri()), manager


def _trained(tmp_path):
    """The standalone page of a track widget after six steps of tiny_lm, and its manager."""
    model = examples.build("tiny_lm")
    x = examples.example_input("tiny_lm")
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2, gradient_enabled=True))
    widget = manager.widget(model, metrics=["param_change/norm_l2", "param_change/relative_change", "gradient/norm"])
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(6):
        opt.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)).backward()
        opt.step()
        manager.on_optimizer_step(model, optimizer=opt)
    path = tmp_path / "track.html"
    path.write_text(standalone_html(widget.payload, bundle_source(), "track"), encoding="utf-8")
    return path, manager


# marimo's dark theme: no JupyterLab variable (each set to its guaranteed-invalid value, so
# var() takes its fallback) and a dark colour scheme on a dark page
NO_THEME_VARIABLES = """() => {
  const root = document.documentElement;
  for (const sheet of document.styleSheets) for (const rule of sheet.cssRules) {
    const style = rule.style ?? rule.cssRules?.[0]?.style;
    for (const name of style ?? []) if (name.startsWith("--jp-")) root.style.setProperty(name, "initial");
  }
  root.style.colorScheme = "dark";
  document.body.style.background = "#181c1a";
}"""


@pytest.mark.parametrize("host", ["light", "dark", "dark-without-theme-variables"])
def test_the_charts_text_is_readable_and_the_step_title_clear_of_the_ticks(tmp_path, open_page, host):
    """The charts' text (the axis title "step", the tick labels, the strip's title) at 4.5:1
    or more against what is behind it, in a light and a dark theme and in a front-end that
    defines no JupyterLab variable (marimo); "step" under the tick labels, not touching them."""
    path, _ = _trained(tmp_path)
    page = open_page(path.as_uri(), "light" if host == "light" else "dark")
    if host == "dark-without-theme-variables":
        page.evaluate(NO_THEME_VARIABLES)
    card = page.locator(".nbi-timeline-card").first
    title = card.locator("svg text", has_text="step")
    expect(title).to_have_count(1)
    texts = {
        "step": title,
        "tick": card.locator(".nbi-tick text").first,
        "strip title": page.locator(".nbi-timeline-title"),
    }
    for what, text in texts.items():
        assert contrast(text) >= 4.5, (what, host)
    step = title.bounding_box()
    for tick in card.locator(".nbi-tick text").all():
        box = tick.bounding_box()
        apart = (  # 4 px of air at least (it sat 3 px left of the first tick label: "step2")
            box["x"] + box["width"] + 4 <= step["x"]
            or step["x"] + step["width"] + 4 <= box["x"]
            or box["y"] + box["height"] + 4 <= step["y"]
            or step["y"] + step["height"] + 4 <= box["y"]
        )
        assert apart, (tick.inner_text(), box, step)
    shot = os.environ.get("NBINSPECT_SCREENSHOT_DIR")
    if shot:
        card.screenshot(path=f"{shot}/track_chart-{host}.png")


def test_timeline_and_moved_tree(trained_page):
    page, manager = trained_page
    strip = page.locator(".nbi-timeline")
    expect(strip).to_be_visible()
    expect(strip).to_contain_text("Change: the last interval, steps 4→6 · 3 measurements")
    expect(strip).to_contain_text("measured every 2 steps")
    cards = strip.locator(".nbi-timeline-card")
    expect(cards).to_have_count(3)
    expect(cards.nth(0)).to_contain_text("param_change/norm_l2")
    assert cards.nth(0).locator("circle").count() == 3
    last = manager.history["param_change/norm_l2"].iloc[-1]
    expect(cards.nth(0).locator(".nbi-timeline-value")).to_have_text(f"step 6: {last:.4g}")
    # a real chart: step ticks on the x axis, and hovering reads a point out
    ticks = cards.nth(0).locator("svg text").evaluate_all("ts => ts.map(t => t.textContent)")
    assert "4" in ticks and "step" in ticks, ticks
    box = cards.nth(0).locator("svg").bounding_box()
    page.mouse.move(box["x"] + 52 + 1, box["y"] + 60)  # the left edge of the plot: the first step
    first = manager.history["param_change/norm_l2"].iloc[0]
    expect(cards.nth(0).locator(".nbi-timeline-value")).to_have_text(f"step 2: {first:.6g}")
    header = page.locator('[role=columnheader][data-column="rel_change"]')
    expect(header).to_be_visible()
    shot = os.environ.get("NBINSPECT_SCREENSHOT_DIR")
    if shot:
        page.screenshot(path=f"{shot}/track_widget.png", full_page=True)
    change = manager.last_change.set_index("name")["change"]
    root = page.locator('.nbi-body [role=row][data-path=""]')
    overall = float(root.locator(".nbi-col-rel_change").inner_text())
    assert 0 < overall < change.max()  # the root: the model's change as one tensor, not the largest below
    page.get_by_role("button", name="Expand all").click()
    moved = page.locator('.nbi-body [role=row][data-path="tok_emb.weight"]')
    expect(moved).to_contain_text("changed")
    shown = float(moved.locator(".nbi-col-rel_change").inner_text())
    assert shown == pytest.approx(change["tok_emb.weight"], rel=1e-3)
    page.locator("[role=treegrid]").evaluate("g => { g.scrollTop = g.scrollHeight; }")
    tied = page.locator('.nbi-body [role=row][data-path="lm_head.weight"]')
    expect(tied).to_contain_text("changed")  # the head is tied to the embedding: it moved with it
