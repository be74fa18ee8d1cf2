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


@pytest.fixture
def trained_page(tmp_path, open_page):
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
    return open_page(path.as_uri()), manager


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
