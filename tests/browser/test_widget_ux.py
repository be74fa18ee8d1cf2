"""What a person sees in the widget, in headless chromium: health badges on collapsed
ancestors, the problems filter, full paths, columns at 1,100 px, sorting, the comparison
columns, histogram labels. Also writes docs/widget.png (the README's screenshot) from a
real render, so the picture stays true."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
import torch
from playwright.sync_api import expect
from torch import nn

import nbinspect
from nbinspect import examples

from .pages import ROWS, row, visible_paths

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "widget.png"


def sick_lm() -> nn.Module:
    """tiny_lm with one NaN in an attention weight and a dead (all-zero) MLP matrix."""
    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.blocks[1].attn.qkv.weight[3, 5] = float("nan")
        model.blocks[0].mlp[0].weight.zero_()
    return model


@pytest.fixture
def sick(open_result):
    insp = nbinspect.inspect(sick_lm(), input=torch.randint(0, 256, (2, 16)))
    return open_result(insp, "sick", width=1280), insp


def test_a_nan_shows_on_every_collapsed_ancestor_and_in_the_header(sick):
    page, insp = sick
    health = insp.health
    assert insp.problems() == {"NaN": 1, "all zero": 1}
    expect(page.locator(".nbi-problems")).to_have_text("⚠ 1 tensor with NaN · 1 tensor all zero")
    # collapsed: the fold of the two blocks is closed and still carries the badge
    fold = row(page, "blocks.0–1")
    expect(fold).to_have_attribute("aria-expanded", "false")
    expect(fold.locator(".nbi-problem")).to_be_visible()
    expect(fold.locator(".nbi-problem")).to_have_attribute("title", "NaN, all zero in 2 tensors below")
    page.get_by_role("button", name="Collapse all").click()
    expect(page.locator(ROWS)).to_have_count(1)
    expect(row(page, "").locator(".nbi-problem")).to_be_visible()
    # expanded: exactly the rows Python's health frame flags carry a badge (every ancestor included)
    page.get_by_role("button", name="Expand all").click()
    flagged = set(health.loc[health["problems"] != "", "name"])
    assert {"", "blocks", "blocks.1", "blocks.1.attn.qkv.weight", "blocks.0.mlp.0.weight"} <= flagged
    grid = page.locator("[role=treegrid]")
    seen = set()
    for _ in range(12):
        seen |= set(page.locator(f"{ROWS}:has(.nbi-problem)").evaluate_all("rs => rs.map(r => r.dataset.path)"))
        grid.evaluate("g => { g.scrollTop += 300; }")
        page.wait_for_timeout(50)
    assert seen - {"blocks.0–1"} == flagged


def test_problems_only_shows_the_paths_down_to_each_problem(sick):
    page, insp = sick
    page.get_by_label("Problems only").check()
    health = insp.health
    expected = set(health.loc[health["problems"] != "", "name"]) | {"blocks.0–1"}
    expect(row(page, "blocks.1.attn.qkv.weight")).to_be_visible()
    assert set(visible_paths(page)) == expected
    expect(page.locator(".nbi-status")).to_have_text(f"{len(expected)} rows")
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    assert visible_paths(page) == ["blocks.0.mlp.0.weight", "blocks.1.attn.qkv.weight"]
    page.get_by_label("Filter rows by name or type").fill("qkv")
    expect(page.locator(".nbi-status")).to_have_text("1 row")
    page.get_by_label("Problems only").uncheck()
    assert len(visible_paths(page)) == 4  # qkv weight and bias of both blocks


class Long(nn.Module):
    """GPT-2's naming: two paths that differ only near the end."""

    def __init__(self) -> None:
        super().__init__()
        block = nn.Module()
        block.mlp = nn.Module()
        block.mlp.c_fc = nn.Linear(8, 32)
        block.mlp.c_proj = nn.Linear(32, 8)
        self.transformer = nn.Module()
        self.transformer.h = nn.ModuleList([block])


def test_full_paths_cut_in_the_middle_with_the_whole_path_on_hover(open_result):
    page = open_result(nbinspect.inspect(Long()), "long", width=700)
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    for name in ("c_fc", "c_proj"):
        path = f"transformer.h.0.mlp.{name}.weight"
        cell = row(page, path).locator(".nbi-col-name")
        expect(cell).to_have_attribute("title", path)
        tail = cell.locator(".nbi-mid-tail")
        expect(tail).to_have_text(f"0.mlp.{name}.weight")  # the block index and the last two names
        # the tail shows whole inside the cell while the head is cut
        box, tail_box = cell.bounding_box(), tail.bounding_box()
        assert tail_box["x"] + tail_box["width"] <= box["x"] + box["width"] + 0.5
    head = row(page, "transformer.h.0.mlp.c_fc.weight").locator(".nbi-mid-head")
    page.locator('[role=columnheader][data-column="name"]').evaluate("c => c.style.width")
    # narrow the name column: the head gets an ellipsis, the distinguishing end stays
    handle = page.locator('[role=columnheader][data-column="name"] .nbi-resize')
    hb = handle.bounding_box()
    page.mouse.move(hb["x"] + 2, hb["y"] + 5)
    page.mouse.down()
    page.mouse.move(hb["x"] - 150, hb["y"] + 5, steps=4)
    page.mouse.up()
    assert head.evaluate("e => e.scrollWidth > e.clientWidth")
    expect(row(page, "transformer.h.0.mlp.c_proj.weight").locator(".nbi-mid-tail")).to_be_visible()


def test_columns_resize_by_dragging_the_header_edge(sick):
    page, _ = sick
    header = page.locator('[role=columnheader][data-column="type"]')
    before = header.bounding_box()["width"]
    hb = header.locator(".nbi-resize").bounding_box()
    page.mouse.move(hb["x"] + 2, hb["y"] + 5)
    page.mouse.down()
    page.mouse.move(hb["x"] + 82, hb["y"] + 5, steps=4)
    page.mouse.up()
    assert header.bounding_box()["width"] == pytest.approx(before + 80, abs=2)
    assert row(page, "tok_emb").locator(".nbi-col-type").bounding_box()["width"] == pytest.approx(before + 80, abs=2)
    expect(header).not_to_have_attribute("aria-sort", "descending")  # a drag is not a sort click


def _settled_x(page, locator) -> float:
    """The element's x once the rows in view are redrawn after a scroll: a row being
    replaced has no box for a moment (seen under load, after it was visible)."""
    for _ in range(100):
        box = locator.bounding_box()
        if box is not None:
            return box["x"]
        page.wait_for_timeout(50)
    raise AssertionError(f"{locator} never settled after the scroll")


@pytest.mark.parametrize("width", [1400, 1100, 800])  # 1400: the details panel sits beside the table
def test_at_narrow_widths_the_columns_fit_and_the_name_column_stays(open_result, width):
    insp = nbinspect.inspect(sick_lm(), input=torch.randint(0, 256, (2, 16)))
    page = open_result(insp, f"w{width}", width=width)
    grid = page.locator("[role=treegrid]")
    page.wait_for_timeout(100)  # the resize observer picks the columns for the width
    headers = page.locator("[role=columnheader]").evaluate_all("cs => cs.map(c => c.dataset.column)")
    if width >= 1100:  # everything chosen fits: nothing off-screen
        assert grid.evaluate("g => g.scrollWidth <= g.clientWidth + 1"), headers
        g = grid.bounding_box()
        for cell in page.locator("[role=columnheader]").all():
            b = cell.bounding_box()
            assert b["x"] >= g["x"] - 0.5 and b["x"] + b["width"] <= g["x"] + g["width"] + 0.5, cell.text_content()
    if width == 1100:  # what was off-screen before: memory, FLOPs and input shapes (sized to their content now)
        assert {"name", "type", "params", "input", "shape", "memory", "flops"} <= set(headers)
    # the counts are never dropped for want of room (at 800 px the table scrolls sideways to them)
    assert {"name", "type", "params", "memory", "flops"} <= set(headers)
    # a column the user adds overflows: the name column stays put while scrolling sideways
    page.get_by_text("Columns", exact=True).click()
    for column in ("min", "max", "nan", "zeros", "dtype"):
        page.locator(f'input[data-column="{column}"]').check()
    assert grid.evaluate("g => g.scrollWidth > g.clientWidth")
    name = row(page, "tok_emb").locator(".nbi-col-name")
    left = name.bounding_box()["x"]
    grid.evaluate("g => { g.scrollLeft = g.scrollWidth; }")
    assert _settled_x(page, name) == pytest.approx(left, abs=1)
    expect(name).to_contain_text("tok_emb")
    assert page.locator('[role=columnheader][data-column="name"]').bounding_box()["x"] == pytest.approx(left, abs=1)


def test_input_shapes_beside_output_shapes_after_a_trace(sick):
    page, insp = sick
    layers = insp.layers.set_index("name")
    for path in ("tok_emb", "ln_f", "lm_head"):
        cells = row(page, path)
        want_in = "[" + ", ".join(map(str, layers.at[path, "input_shapes"][0])) + "]"
        want_out = "[" + ", ".join(map(str, layers.at[path, "output_shapes"][0])) + "]"
        expect(cells.locator(".nbi-col-input")).to_have_text(want_in)
        expect(cells.locator(".nbi-col-shape")).to_have_text(want_out)


def test_sorting_jumps_to_the_top(sick):
    page, insp = sick
    page.get_by_role("button", name="Expand all").click()
    grid = page.locator("[role=treegrid]")
    grid.evaluate("g => { g.scrollTop = g.scrollHeight; }")
    page.wait_for_timeout(50)
    assert grid.evaluate("g => g.scrollTop") > 200
    page.locator('[role=columnheader][data-column="params"] .nbi-sort').click()
    expect(page.locator('[role=columnheader][data-column="params"]')).to_have_attribute("aria-sort", "descending")
    assert grid.evaluate("g => g.scrollTop") == 0
    expect(row(page, "")).to_be_visible()
    page.get_by_label("Show the tree, leaf modules, tensors or the dataflow graph").select_option("tensors")
    grid.evaluate("g => { g.scrollTop = g.scrollHeight; }")
    page.locator('[role=columnheader][data-column="memory"] .nbi-sort').click()
    assert grid.evaluate("g => g.scrollTop") == 0
    biggest = insp.params.sort_values("bytes", ascending=False, kind="stable")["name"].iloc[0]
    assert visible_paths(page)[0] == biggest


def test_header_labels_are_in_one_case(sick):
    page, _ = sick
    page.get_by_text("Columns", exact=True).click()
    for box in page.locator("input[data-column]").all():
        box.check()
    labels = page.locator("[role=columnheader]").all_inner_texts()
    assert all(label[0].isupper() for label in labels), labels


def _pooled(insp: nbinspect.Inspection, path: str) -> dict[str, float]:
    """The statistics Python pooled for the fold at `path`, as the payload sends them."""
    payload = insp._payload()
    j = payload["folds"]["path"].index(path)
    return dict(zip(payload["stat_fields"], payload["folds"]["stats"][j]))


def test_a_fold_of_repeated_blocks_has_statistics(sick):
    page, insp = sick
    fold = row(page, "blocks.0–1")
    expect(fold.locator("svg.nbi-spark rect").first).to_be_attached()
    # Python's pooled mean and std, as displayed; the two blocks are all of `blocks`, so they are blocks' own
    pooled = _pooled(insp, "blocks.0–1")
    assert float(fold.locator(".nbi-col-mean").inner_text()) == pytest.approx(pooled["mean"], rel=1e-3)
    assert float(fold.locator(".nbi-col-std").inner_text()) == pytest.approx(pooled["std"], rel=1e-3)
    blocks = insp.frames["stats_by_module"].set_index("name").loc["blocks"]
    assert pooled["mean"] == pytest.approx(blocks["mean"], rel=1e-5)
    assert pooled["std"] == pytest.approx(blocks["std"], rel=1e-5)


def test_the_widget_folds_what_python_folds(open_result):
    """Linears of different shapes stay two rows (as in the text tree); three equal ones show
    as one folded row with Python's pooled statistics."""
    page = open_result(
        nbinspect.inspect(nn.Sequential(nn.Linear(4, 8, bias=False), nn.Linear(8, 4, bias=False))), "two"
    )
    assert [p for p in visible_paths(page) if "." not in p] == ["", "0", "1"]
    expect(page.locator(".nbi-kind-group")).to_have_count(0)
    torch.manual_seed(0)
    insp = nbinspect.inspect(nn.Sequential(*(nn.Linear(8, 8) for _ in range(3))))
    assert "0–2 ×3" in insp.summary()
    page = open_result(insp, "three", width=1280)
    assert visible_paths(page) == ["", "0–2"]
    fold = row(page, "0–2")
    expect(fold.locator(".nbi-key")).to_have_text("0–2 ×3")
    expect(fold).to_have_attribute("aria-expanded", "false")
    pooled = _pooled(insp, "0–2")
    assert float(fold.locator(".nbi-col-mean").inner_text()) == pytest.approx(pooled["mean"], rel=1e-3)
    assert float(fold.locator(".nbi-col-std").inner_text()) == pytest.approx(pooled["std"], rel=1e-3)
    fold.locator(".nbi-caret").click()
    assert [p for p in visible_paths(page) if "." not in p] == ["", "0–2", "0", "1", "2"]


def test_module_histograms_leave_norm_scales_out(sick):
    page, insp = sick
    row(page, "blocks.0–1").locator(".nbi-caret").click()
    row(page, "blocks.0").locator(".nbi-caret").click()
    row(page, "blocks.0.attn").click()
    panel = page.locator(".nbi-detail")
    expect(panel).to_contain_text("Weight matrices below")
    # the bars span the weight matrices' range, not LayerNorm's 1.0
    stats = insp.frames["stats"].set_index("name")
    hi = max(stats.at[n, "max"] for n in ("blocks.0.attn.qkv.weight", "blocks.0.attn.proj.weight"))
    title = panel.locator("svg.nbi-chart > title").text_content()
    top = float(title.rsplit(" to ", 1)[1])
    assert top == pytest.approx(hi, rel=1e-3)


def _overlaps(boxes: list[dict], axis: str) -> list[tuple[int, int]]:
    lo, size = ("x", "width") if axis == "x" else ("y", "height")
    boxes = sorted(boxes, key=lambda b: b[lo])
    return [(i, i + 1) for i in range(len(boxes) - 1) if boxes[i][lo] + boxes[i][size] > boxes[i + 1][lo] + 0.5]


@pytest.mark.parametrize("log", [False, True], ids=["linear", "log"])
def test_histogram_axis_labels_do_not_collide(open_result, log):
    torch.manual_seed(0)
    model = nn.Linear(512, 512)
    with torch.no_grad():
        model.weight.uniform_(-0.09, 0.09)  # ticks every 0.02 would run together: "-0.08-0.06-0.04"
        model.weight[0, :4] = 0.0899  # a tall single bin and near-empty ones: log ticks 0, 1, 10 crowd
    page = open_result(nbinspect.inspect(model), "hist", width=1280)
    page.get_by_role("button", name="Expand all").click()
    row(page, "weight").click()
    if log:
        page.get_by_label("log scale").check()
    axis = page.locator(".nbi-detail svg.nbi-chart .nbi-axis")
    labels = axis.locator("text").all()
    x_boxes = [t.bounding_box() for t in labels if t.get_attribute("text-anchor") == "middle"][:-2]
    y_boxes = [t.bounding_box() for t in labels if t.get_attribute("text-anchor") == "end"]
    assert len(x_boxes) >= 3 and len(y_boxes) >= 2
    assert not _overlaps(x_boxes, "x") and not _overlaps(y_boxes, "y")


@pytest.fixture
def comparison(open_result):
    a, b = examples.build("tiny_lm"), examples.build("tiny_lm")
    with torch.no_grad():
        b.blocks[0].attn.qkv.weight.mul_(1.1)
        b.blocks[1].mlp[0].weight.add_(0.01)
    c = nbinspect.compare(a, b)
    c.sides = ("base.pt", "tuned.pt")
    return open_result(c, "cmp", width=1280), c


def test_comparison_columns_summary_and_title(comparison):
    page, c = comparison
    expect(page.locator(".nbi-model")).to_have_text("base.pt → tuned.pt")
    headers = page.locator("[role=columnheader]").all_inner_texts()
    assert headers[-5:] == ["Status", "Change", "Cosine", "Max |Δ|", "Mean drift"]
    frame = c.frame.set_index("name")
    path = "blocks.0.attn.qkv.weight"
    page.get_by_role("button", name="Expand all").click()
    cells = row(page, path)
    expect(cells.locator(".nbi-col-status")).to_have_text("changed")
    assert float(cells.locator(".nbi-col-cosine").inner_text()) == pytest.approx(frame.at[path, "cosine"], rel=1e-3)
    delta = float(cells.locator(".nbi-col-max_abs_delta").inner_text())
    assert delta == pytest.approx(frame.at[path, "max_abs_delta"], rel=1e-3)
    # a weight scaled by 1.1: |Δ| is 0.1 |w| at the largest |w|; change ‖0.1 w‖ / ‖1.1 w‖ = 1/11 exactly
    w = examples.build("tiny_lm").blocks[0].attn.qkv.weight.detach().double()
    assert delta == pytest.approx(0.1 * float(w.abs().max()), rel=1e-3)
    assert float(cells.locator(".nbi-col-rel_change").inner_text()) == pytest.approx(1 / 11, rel=1e-3)
    # per component: one row per component of print(c), with its numbers
    components = c.by_component()
    table = page.locator(".nbi-components-table tr")
    expect(table).to_have_count(len(components) + 1)
    mlp = page.locator(".nbi-components-table tr", has_text="mlp")
    mine = components.set_index("group").loc["mlp"]
    assert int(mlp.locator("td").nth(2).inner_text()) == int(mine["differ"]) == 1
    assert float(mlp.locator("td").nth(4).inner_text()) == pytest.approx(mine["cosine"], rel=1e-3)


def test_comparison_detail_beside_the_table_shows_both_histograms_unscrolled(comparison):
    """From 1360 px the details panel sits beside the table; the after (b) histogram of a
    changed tensor must be in view without scrolling the panel (it was cut off at 440 px)."""
    page, _ = comparison
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.get_by_role("button", name="Expand all").click()
    row(page, "blocks.0.attn.qkv.weight").click()
    detail = page.locator(".nbi-detail")
    charts = detail.locator(".nbi-before-after svg.nbi-chart")
    expect(charts).to_have_count(3)  # before, after and the change itself
    panel, table = detail.bounding_box(), page.locator(".nbi-grid").bounding_box()
    assert panel["x"] > table["x"] + table["width"]  # beside, not below
    after = charts.nth(1).bounding_box()
    assert after["y"] + after["height"] <= panel["y"] + panel["height"]  # in view before any scrolling


def test_comparison_detail_shows_before_and_after(comparison):
    page, _ = comparison
    page.get_by_role("button", name="Expand all").click()
    row(page, "blocks.0.attn.qkv.weight").click()
    panel = page.locator(".nbi-detail .nbi-before-after")
    expect(panel).to_contain_text("before (a)")
    expect(panel).to_contain_text("after (b)")
    charts = panel.locator("svg.nbi-chart")
    expect(charts).to_have_count(3)
    titles = [t.text_content() for t in charts.locator(":scope > title").all()][:2]
    # one shared x range; the scaled weight spreads 1.1 times as wide
    lo_hi = [tuple(map(float, t.rsplit(" from ", 1)[1].split(" to "))) for t in titles]
    assert lo_hi[0] == lo_hi[1]
    n = int(titles[0].split()[2].replace(",", ""))
    assert n == 192 * 64 and int(titles[1].split()[2].replace(",", "")) == n


def _differs(image, path: Path) -> bool:
    """Whether `image` differs from the PNG at `path` in more than 0.5% of its pixels (the
    quantized colours shift a little from run to run; the file should not churn)."""
    from PIL import Image, ImageChops

    if not path.exists():
        return True
    old = Image.open(path).convert("RGB")
    if old.size != image.size:
        return True
    changed = sum(1 for px in ImageChops.difference(old, image).convert("L").getdata() if px > 24)
    return changed > 0.005 * image.width * image.height


def test_screenshot_for_the_readme(open_result):
    """docs/widget.png: the widget on a model with a NaN, as the README shows it."""
    from PIL import Image

    insp = nbinspect.inspect(sick_lm(), input=torch.randint(0, 256, (2, 16)))
    page = open_result(insp, "readme", width=1100)
    row(page, "blocks.0–1").locator(".nbi-caret").click()
    row(page, "blocks.1").locator(".nbi-caret").click()
    row(page, "blocks.1.attn").locator(".nbi-caret").click()
    row(page, "blocks.1.attn.qkv").click()
    page.wait_for_timeout(100)
    png = page.locator(".nbi").screenshot()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    small = image.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    SCREENSHOT.parent.mkdir(exist_ok=True)
    if _differs(small.convert("RGB"), SCREENSHOT):  # rewritten only when the picture changed
        small.save(SCREENSHOT, optimize=True)
    assert SCREENSHOT.stat().st_size < 150_000
    assert math.isclose(image.width, 1068, abs_tol=40)
