"""The standalone HTML page in headless chromium: renders, sorts, collapses, filters, shows
histograms, moves with the keyboard, escapes strings and stays virtualized."""

from __future__ import annotations

import re

import pytest
import torch
from playwright.sync_api import expect
from torch import nn

import nbinspect
from nbinspect import examples

from .pages import ROWS, row, visible_paths


@pytest.fixture
def tiny_lm_page(open_result):
    insp = nbinspect.inspect(examples.build("tiny_lm"))  # with per-tensor and per-module stats
    return open_result(insp, "tiny_lm"), insp


def test_renders_the_tree_with_totals(tiny_lm_page):
    page, _insp = tiny_lm_page
    expect(row(page, "")).to_have_attribute("aria-level", "1")
    expect(row(page, "")).to_have_attribute("aria-expanded", "true")
    expect(row(page, "blocks")).to_have_attribute("aria-level", "2")
    header = page.locator(".nbi-header")
    expect(header).to_contain_text("TinyLM")
    expect(header).to_contain_text("118.5 K")  # unique parameters
    expect(header).to_contain_text("134.9 K")  # by path: the tied head counted twice
    expect(row(page, "")).to_contain_text("118,528")
    fold = row(page, "blocks.0–1")
    expect(fold).to_contain_text("blocks.0–1 ×2")
    expect(fold).to_have_attribute("aria-expanded", "false")
    fold.locator(".nbi-caret").click()
    expect(row(page, "blocks.1")).to_have_attribute("aria-level", "4")


def test_sorts_within_each_parent(tiny_lm_page):
    page, insp = tiny_lm_page
    header = page.locator('[role=columnheader][data-column="params"]')
    header.click()
    expect(header).to_have_attribute("aria-sort", "descending")
    params = dict(zip(insp.layers["name"], insp.layers["params"]))
    top = [p for p in visible_paths(page) if p and "." not in p and p in params]
    assert [params[p] for p in top] == sorted((params[p] for p in top), reverse=True)
    assert top[0] == "blocks"
    header.click()
    expect(header).to_have_attribute("aria-sort", "ascending")
    top = [p for p in visible_paths(page) if p and "." not in p and p in params]
    assert [params[p] for p in top] == sorted(params[p] for p in top)


def test_collapses_and_expands(tiny_lm_page):
    page, _ = tiny_lm_page
    before = page.locator(ROWS).count()
    row(page, "").locator(".nbi-caret").click()
    expect(row(page, "")).to_have_attribute("aria-expanded", "false")
    expect(page.locator(ROWS)).to_have_count(1)
    page.get_by_role("button", name="Expand all").click()
    expect(row(page, "blocks.0.attn.qkv.weight")).to_be_visible()
    page.locator("[role=treegrid]").evaluate("g => { g.scrollTop = g.scrollHeight; }")
    expect(row(page, "lm_head.weight")).to_be_visible()
    assert page.locator("[role=treegrid]").get_attribute("aria-rowcount") == str(
        len(nbinspect.inspect(examples.build("tiny_lm")).params) + 26 + 1 + 1
    )  # every module and tensor, one fold row, and the header row
    page.get_by_role("button", name="Collapse all").click()
    expect(page.locator(ROWS)).to_have_count(1)
    page.get_by_label("Expand to depth").select_option("2")
    expect(page.locator(ROWS)).to_have_count(before)


def test_filters_by_name_or_type(tiny_lm_page):
    page, _ = tiny_lm_page
    page.get_by_label("Filter rows by name or type").fill("layernorm")
    expect(row(page, "ln_f")).to_be_visible()
    paths = visible_paths(page)
    assert "blocks.0.ln_1" in paths and "blocks.1.ln_2" in paths and "tok_emb" not in paths
    types = page.locator(f"{ROWS} .nbi-col-type").all_inner_texts()
    assert types.count("LayerNorm") == 5
    page.get_by_label("Filter rows by name or type").fill("")
    expect(row(page, "tok_emb")).to_be_visible()


def test_shows_histograms_inline_and_in_the_detail_panel(tiny_lm_page):
    page, _insp = tiny_lm_page
    weight = row(page, "tok_emb.weight")
    expect(weight.locator("svg.nbi-spark rect").first).to_be_attached()
    weight.click()
    expect(weight).to_have_attribute("aria-selected", "true")
    panel = page.locator(".nbi-detail")
    expect(panel.locator(".nbi-detail-title")).to_have_text("tok_emb.weight")
    chart = panel.locator("svg.nbi-chart")
    expect(chart.locator(".nbi-bars rect").first).to_be_visible()
    expect(chart).to_contain_text("value")
    expect(chart).to_contain_text("count")
    heights = chart.locator(".nbi-bars rect").evaluate_all("rs => rs.map(r => +r.getAttribute('height'))")
    panel.get_by_label("log scale").check()
    expect(page.locator(".nbi-detail svg.nbi-chart")).to_contain_text("count (log)")
    log_heights = page.locator(".nbi-detail svg.nbi-chart .nbi-bars rect").evaluate_all(
        "rs => rs.map(r => +r.getAttribute('height'))"
    )
    assert len(log_heights) == len(heights) and log_heights != heights
    expect(panel).to_contain_text("std")
    expect(panel).to_contain_text("[256, 64]")


def test_keyboard_moves_expands_and_selects(tiny_lm_page):
    page, _ = tiny_lm_page
    grid = page.locator("[role=treegrid]")
    grid.focus()
    page.keyboard.press("ArrowDown")
    expect(row(page, "")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowDown")
    expect(row(page, "tok_emb")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowLeft")
    expect(row(page, "tok_emb")).to_have_attribute("aria-expanded", "false")
    page.keyboard.press("Enter")
    expect(row(page, "tok_emb")).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("ArrowRight")
    expect(row(page, "tok_emb.weight")).to_have_attribute("aria-selected", "true")
    expect(grid).to_have_attribute("aria-activedescendant", re.compile(r".+"))
    assert page.evaluate("window.nbinspectModel.get('selected')") == "tok_emb.weight"


def test_text_can_be_selected_and_copied(tiny_lm_page):
    page, _ = tiny_lm_page
    box = row(page, "tok_emb").locator(".nbi-key").bounding_box()
    page.mouse.move(box["x"] + 1, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2, steps=5)
    page.mouse.up()
    assert page.evaluate("window.getSelection().toString()") == "tok_emb"
    expect(row(page, "tok_emb")).to_have_attribute("aria-selected", "false")  # selecting text is not picking a row


class Weird(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_module("<img src=x onerror=alert(1)>", nn.Linear(2, 2))

    def extra_repr(self) -> str:
        return "<script>alert(2)</script>"


def test_strings_render_as_text(open_result):
    model = nn.Sequential(Weird())
    type(model[0]).__name__ = "<script>alert(3)</script>"
    page = open_result(nbinspect.inspect(model), "weird")
    page.get_by_role("button", name="Expand all").click()
    expect(page.locator(".nbi-body")).to_contain_text("<script>alert(3)</script>")
    expect(page.locator(".nbi-body")).to_contain_text("<img src=x onerror=alert(1)>")
    assert page.locator(".nbi img, .nbi-body script").count() == 0


def test_large_trees_stay_virtualized(open_result):
    with torch.device("meta"):
        model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.LayerNorm(4)) for _ in range(1000)])
    page = open_result(nbinspect.inspect(model), "big")
    page.get_by_role("button", name="Expand all").click()
    grid = page.locator("[role=treegrid]")
    total = int(grid.get_attribute("aria-rowcount"))
    assert total > 5000
    assert page.locator(ROWS).count() < 80
    grid.evaluate("g => { g.scrollTop = g.scrollHeight; }")
    expect(page.locator(f'{ROWS}[data-path="999.2.bias"]')).to_be_visible()
    assert page.locator(ROWS).count() < 80


def edge_models() -> dict[str, nn.Module]:
    with torch.device("meta"):
        meta = nn.Sequential(nn.Linear(4, 4), nn.GELU())
    broken = nn.Linear(3, 3)
    with torch.no_grad():
        broken.weight.fill_(float("nan"))
        broken.bias[0] = float("inf")
    return {"no_params": nn.ReLU(), "meta": meta, "lazy": nn.Sequential(nn.LazyLinear(4)), "nan_inf": broken}


@pytest.mark.parametrize("name", sorted(edge_models()))
def test_awkward_models_render_without_errors(open_result, name):
    page = open_result(nbinspect.inspect(edge_models()[name]), name)
    page.get_by_role("button", name="Expand all").click()
    for i in range(page.locator(ROWS).count()):
        page.locator(ROWS).nth(i).click()
        expect(page.locator(".nbi-detail-title")).to_be_visible()
    expect(page.locator(ROWS).first).to_have_attribute("aria-level", "1")


def test_follows_the_dark_theme(open_result):
    insp = nbinspect.inspect(examples.build("mlp"))
    background = "e => getComputedStyle(e).backgroundColor"
    assert open_result(insp, "mlp", color_scheme="light").locator(".nbi").evaluate(background) == "rgb(255, 255, 255)"
    assert open_result(insp, "mlp", color_scheme="dark").locator(".nbi").evaluate(background) == "rgb(17, 17, 17)"
