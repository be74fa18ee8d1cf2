"""The widget as a daily tool (issue 27), in headless chromium on real models: every count
readable at 800, 1400 and 1920 px (sideways scroll rather than hidden columns), names that
keep the segments telling rows apart, one number format per column, blanks where there are
no values, FLOPs not counted said as such, a comparison ranked by a change defined for zero
starts, and a live training view that keeps the user's place across updates."""

from __future__ import annotations

import json

import pytest
import torch
from playwright.sync_api import expect
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.render.html import standalone_html
from nbinspect.render.widget import bundle_source
from nbinspect.track import AnalysisConfig, ModelAnalysisManager

from .pages import ROWS, row

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def gpt2():
    """GPT-2 (124M) on the meta device, traced on fake tensors: counts of 10^8, no values."""
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    return nbinspect.inspect(model, input=torch.zeros(1, 32, dtype=torch.long, device="meta"))


def _cut(locator) -> list[str]:
    """The texts of the matched cells whose content is wider than the cell (cut off)."""
    return locator.evaluate_all(
        "cells => cells.filter(c => c.scrollWidth > c.clientWidth + 0.5).map(c => c.textContent)"
    )


# 520: JupyterLab at 800 px with the file browser open leaves the output about this wide
@pytest.mark.parametrize("width", [520, 800, 1400, 1920])
def test_no_count_is_cut_and_none_is_dropped(open_result, gpt2, width):
    page = open_result(gpt2, f"gpt2_{width}", width=width)
    page.wait_for_timeout(150)  # the resize observer fits the columns to the width
    headers = page.locator("[role=columnheader]").evaluate_all("cs => cs.map(c => c.dataset.column)")
    assert {"name", "params", "memory", "flops"} <= set(headers), headers
    root = row(page, "")
    expect(root.locator(".nbi-col-params")).to_contain_text("124,439,808")
    expect(root.locator(".nbi-col-params .nbi-pct")).to_have_text("100.0%")
    page.get_by_role("button", name="Expand all").click()
    grid = page.locator("[role=treegrid]")
    for column in ("params", "memory", "flops"):
        cells = page.locator(f"{ROWS} .nbi-col-{column}")
        assert cells.count() > 10
        assert _cut(cells) == [], column
    if width == 520:  # more than fits: the table scrolls sideways rather than dropping a count
        assert grid.evaluate("g => g.scrollWidth > g.clientWidth")
    grid.evaluate("g => { g.scrollLeft = g.scrollWidth; }")
    page.wait_for_timeout(100)  # the scroll repaints the rows
    # one read of both boxes (scrolling repaints the rows: a cell found before may be gone after)
    left, right, g_left, g_right = page.evaluate(
        """() => [document.querySelector('.nbi-body [role=row][data-path=""] .nbi-col-flops'),
                  document.querySelector('[role=treegrid]')]
                 .map(e => e.getBoundingClientRect()).flatMap(r => [r.left, r.right])"""
    )
    assert g_left <= left and right <= g_right + 0.5  # in reach
    expect(root.locator(".nbi-col-flops")).to_have_text(f"{gpt2.totals['flops'] / 1e9:.1f} G")


def test_flops_not_counted_say_so_and_meta_rows_are_blank(open_result, gpt2):
    page = open_result(gpt2, "gpt2_flops", width=1920)
    page.get_by_role("button", name="Expand all").click()
    norm = row(page, "transformer.h.0.ln_1").locator(".nbi-col-flops")
    expect(norm).to_have_text("–")
    title = norm.get_attribute("title")
    assert title.startswith("not counted") and "native_layer_norm" in title
    assert gpt2.layers.set_index("name").at["transformer.h.0.ln_1", "flops"] == 0
    # no values on the meta device: no row has a mean or std (folds included), so the value
    # columns are not offered at all rather than shown blank or as zeros
    payload = gpt2._payload()
    mean = payload["stat_fields"].index("mean")
    assert all(s is None or s[mean] is None for s in payload["folds"]["stats"] + payload["modules"]["stats"])
    headers = page.locator("[role=columnheader]").evaluate_all("cs => cs.map(c => c.dataset.column)")
    assert not {"mean", "std", "dist"} & set(headers)
    page.get_by_text("Columns", exact=True).click()
    expect(page.locator('input[data-column="mean"]')).to_have_count(0)


def test_billions_read_as_b_and_the_header_speaks_plainly(open_result):
    with torch.device("meta"):
        llama = transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                hidden_size=4096,
                intermediate_size=11008,
                num_hidden_layers=32,
                num_attention_heads=32,
                vocab_size=32000,
            )
        )
    insp = nbinspect.inspect(llama)
    assert insp.totals["total_params"] == 6_738_415_616
    page = open_result(insp, "llama7b", width=1400)
    params = page.locator(".nbi-total", has_text="params").first
    expect(params.locator(".nbi-total-value")).to_have_text("6.7 B")
    page.get_by_role("button", name="Expand all").click()
    cells = page.locator(f"{ROWS} .nbi-col-params")
    assert _cut(cells) == []
    expect(row(page, "").locator(".nbi-col-params")).to_contain_text("6,738,415,616")


def test_tied_weights_header_says_what_the_larger_count_is(open_result, gpt2):
    page = open_result(gpt2, "gpt2_tied", width=1400)
    chip = page.locator(".nbi-total", has_text="shared weights")
    expect(chip).to_contain_text("if shared weights were counted at every path")
    expect(chip.locator(".nbi-total-value")).to_have_text("163.0 M")
    assert gpt2.totals["total_params_by_path"] == 163_037_184


def test_tensor_names_keep_block_index_and_last_two_names(open_result, gpt2):
    page = open_result(gpt2, "gpt2_tensors", width=800)
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    page.get_by_role("searchbox").fill("c_proj.weight")
    cells = page.locator(f"{ROWS} .nbi-col-name")
    expect(cells).to_have_count(24)  # attn and mlp c_proj in 12 blocks
    tails = cells.locator(".nbi-mid-tail").all_inner_texts()
    assert len(set(tails)) == 24, tails  # every row reads differently
    assert "11.mlp.c_proj.weight" in tails and "3.attn.c_proj.weight" in tails
    for cell in cells.all()[:6]:
        tail, box = cell.locator(".nbi-mid-tail").bounding_box(), cell.bounding_box()
        assert tail["x"] + tail["width"] <= box["x"] + box["width"] + 0.5  # whole, inside the cell


def test_a_problem_badge_does_not_eat_a_deep_name(open_result):
    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.blocks[1].attn.qkv.weight[0, 0] = float("nan")
        model.blocks[1].attn.qkv.weight[0, 1] = float("inf")
    page = open_result(nbinspect.inspect(model), "badge", width=800)
    page.get_by_role("searchbox").fill("blocks.1.attn.qkv")
    for path in ("blocks.1.attn.qkv", "blocks.1.attn.qkv.weight"):
        name = row(page, path).locator(".nbi-col-name")
        expect(name.locator(".nbi-problem")).to_contain_text("⚠")
        key = name.locator(".nbi-key")
        assert key.evaluate("k => k.scrollWidth <= k.clientWidth"), path  # the name is whole
    expect(row(page, "blocks.1.attn.qkv.weight").locator(".nbi-problem")).to_have_attribute("title", "NaN, Inf")
    expect(page.locator(".nbi-problems")).to_have_text("⚠ 1 tensor with NaN · 1 tensor with ±Inf")


def test_one_number_format_per_column(open_result):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    with torch.no_grad():
        model[0].weight.fill_(0.5)
        model[0].weight[0, 0] = 1004.0  # a max of 1004 next to one of 1000
        model[1].weight.fill_(0.25)
        model[1].weight[0, 0] = 1000.0
        model[0].bias.fill_(3.06e-4)
        model[1].bias.fill_(0.003226)
    page = open_result(nbinspect.inspect(model), "formats", width=1400)
    page.get_by_text("Columns", exact=True).click()
    page.locator('input[data-column="max"]').check()
    page.get_by_role("button", name="Expand all").click()
    maxes = {p: row(page, p).locator(".nbi-col-max").inner_text() for p in ("0.weight", "1.weight")}
    assert maxes["0.weight"] != maxes["1.weight"]
    assert float(maxes["0.weight"]) == 1004 and float(maxes["1.weight"]) == 1000
    means = {p: row(page, p).locator(".nbi-col-mean").inner_text() for p in ("0.bias", "1.bias")}
    assert means == {"0.bias": "3.060e-4", "1.bias": "3.226e-3"}  # both in exponent form, four digits


@pytest.fixture
def tuned(open_result):
    """A fine-tuning in miniature: zero-initialised biases that moved, small weight updates."""
    torch.manual_seed(1)
    a = examples.build("tiny_lm")
    for m in a.modules():
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
    b = examples.build("tiny_lm")
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.blocks[0].mlp[0].bias.add_(1e-3 * torch.randn(256))
        b.blocks[1].attn.qkv.weight.add_(1e-3 * torch.randn(192, 64))
    c = nbinspect.compare(a, b)
    return open_result(c, "tuned", width=1400), c


def test_a_moved_zero_bias_ranks_first_and_the_root_shows_the_overall_change(tuned):
    page, c = tuned
    frame = c.frame.set_index("name")
    assert frame.at["blocks.0.mlp.0.bias", "rel_change"] == float("inf")
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    page.locator('[role=columnheader][data-column="rel_change"] .nbi-sort').click()
    paths = page.locator(ROWS).evaluate_all("rs => rs.map(r => r.dataset.path)")
    assert paths[:2] == ["blocks.0.mlp.0.bias", "blocks.1.attn.qkv.weight"]
    expect(row(page, "blocks.0.mlp.0.bias").locator(".nbi-col-rel_change")).not_to_have_text("")
    assert float(row(page, "blocks.0.mlp.0.bias").locator(".nbi-col-rel_change").inner_text()) == pytest.approx(1.0)
    header = page.locator('[role=columnheader][data-column="rel_change"] .nbi-sort')
    title = header.get_attribute("title")
    assert "max(‖a‖, ‖b‖)" in title and "as one tensor" in title
    # the root row: the overall change print(c) shows, not the largest below it
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tree")
    overall = c.by_module().iloc[0]["change"]
    shown = float(row(page, "").locator(".nbi-col-rel_change").inner_text())
    assert shown == pytest.approx(overall, rel=1e-3) and shown < 0.5
    assert f"{overall:.3g}" in next(line for line in str(c).splitlines() if line.startswith("(all)"))


def test_the_detail_panel_shows_the_change_itself(tuned):
    """Before and after of a 1e-3 update look the same; the histogram of b − a does not."""
    page, c = tuned
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    row(page, "blocks.1.attn.qkv.weight").click()
    box = page.locator(".nbi-detail .nbi-before-after")
    expect(box).to_contain_text("the change b − a")
    charts = box.locator("svg.nbi-chart")
    expect(charts).to_have_count(3)
    title = charts.nth(2).locator(":scope > title").text_content()
    largest = c.frame.set_index("name").at["blocks.1.attn.qkv.weight", "max_abs_delta"]
    lo, hi = map(float, title.rsplit(" from ", 1)[1].split(" to "))
    assert (lo, hi) == (pytest.approx(-largest, rel=1e-3), pytest.approx(largest, rel=1e-3))
    assert int(title.split()[2].replace(",", "")) == 192 * 64  # every element's change counted


def test_colour_by_a_column_with_a_legend(open_result, gpt2):
    page = open_result(gpt2, "gpt2_colour", width=1400)
    page.get_by_label("Colour the rows by a column").select_option("flops")
    legend = page.locator(".nbi-legend")
    expect(legend).to_contain_text("Colour: FLOPs")
    expect(legend).to_contain_text("(log scale)")
    page.get_by_role("button", name="Expand all").click()
    heat = row(page, "transformer.h.0.mlp.c_fc").evaluate("r => r.style.getPropertyValue('--nbi-heat')")
    none = row(page, "transformer.h.0.ln_1").evaluate("r => r.style.getPropertyValue('--nbi-heat')")
    assert heat.endswith("%") and int(heat[:-1]) > 0 and none == ""


def test_copy_path_and_get_submodule(open_result, gpt2):
    page = open_result(gpt2, "gpt2_copy", width=1400)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Expand all").click()
    target = row(page, "transformer.h.0.mlp.c_fc")
    for _ in range(3):  # under load a click can land while Expand all still redraws the rows
        target.click()
        try:
            expect(target).to_have_attribute("aria-selected", "true", timeout=5_000)
            break
        except AssertionError:
            continue
    expect(target).to_have_attribute("aria-selected", "true")
    page.get_by_role("button", name="Copy get_submodule()").click()
    text = page.evaluate("navigator.clipboard.readText()")
    assert text == 'model.get_submodule("transformer.h.0.mlp.c_fc")'
    page.get_by_role("button", name="Copy path").click()
    assert page.evaluate("navigator.clipboard.readText()") == "transformer.h.0.mlp.c_fc"


def _training_payloads(updates: int) -> list[dict]:
    """The live widget's payload after each of `updates` measurements of a real training run."""
    model = examples.build("tiny_lm")
    x = examples.example_input("tiny_lm")
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2, gradient_enabled=True))
    widget = manager.widget(model)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = []
    for step in range(2 * updates):
        opt.zero_grad()
        logits = model(x)
        nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)).backward()
        opt.step()
        manager.on_optimizer_step(model, optimizer=opt)
        if step % 2 == 1:
            out.append(widget.payload)
    return out


def _fold(page, path: str) -> None:
    """Click the caret of the row at `path` once it is drawn where it will stay. The grid is
    virtualized: scrolling the row into view redraws the rows on the next frame, and under
    load a click aimed before that redraw landed on the row's old place and was lost (CI)."""
    caret = row(page, path).locator(".nbi-caret")
    for _ in range(3):
        caret.scroll_into_view_if_needed()
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        caret.click()
        if row(page, path).get_attribute("aria-expanded") == "false":
            return
    expect(row(page, path)).to_have_attribute("aria-expanded", "false")


def test_a_live_view_keeps_expansion_selection_and_scroll_across_five_updates(tmp_path, open_page):
    payloads = _training_payloads(6)
    path = tmp_path / "live.html"
    path.write_text(standalone_html(payloads[0], bundle_source(), "live"), encoding="utf-8")
    page = open_page(path.as_uri())
    page.set_viewport_size({"width": 1400, "height": 900})
    expect(page.locator(".nbi-framework")).to_contain_text("training run (torch)")
    expect(page.locator(".nbi-framework")).to_contain_text("measured every 2 steps")
    page.get_by_role("button", name="Expand all").click()
    expect(row(page, "blocks.1")).to_have_attribute("aria-expanded", "true")  # drawn expanded before the fold
    _fold(page, "blocks.1")  # the user folds one block away
    grid = page.locator("[role=treegrid]")
    grid.evaluate("g => { g.scrollTop = 120; }")
    page.wait_for_timeout(50)
    row(page, "blocks.0.attn.qkv.weight").click()
    page.get_by_text("Metrics (").click()
    page.locator('.nbi-timeline-picker input[data-key="param_change/norm_max"]').check()
    before = page.locator(ROWS).evaluate_all("rs => rs.map(r => r.dataset.path)")
    for i, payload in enumerate(payloads[1:], start=1):
        page.evaluate("p => window.nbinspectModel.update('payload', p)", json.loads(json.dumps(payload)))
        page.wait_for_timeout(30)
        assert page.locator(ROWS).evaluate_all("rs => rs.map(r => r.dataset.path)") == before, i
        expect(row(page, "blocks.1")).to_have_attribute("aria-expanded", "false")
        expect(row(page, "blocks.0.attn.qkv.weight")).to_have_attribute("aria-selected", "true")
        expect(page.locator(".nbi-detail-title")).to_have_text("blocks.0.attn.qkv.weight")
        assert grid.evaluate("g => g.scrollTop") == pytest.approx(120, abs=1)
        expect(page.locator('.nbi-timeline-card[data-key="param_change/norm_max"]')).to_be_visible()
        expect(page.locator(".nbi-timeline-title")).to_contain_text(f"{i + 1} measurements")
