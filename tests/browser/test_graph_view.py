"""The Graph mode in headless chromium: a click selects the same module as the tree and fills
the detail panel, expand/collapse, colour-by with its legend, SVG export, and the time of the
largest view of a 70B config (every layer unfolded and expanded) measured in the page."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
import torch
from playwright.sync_api import expect

import nbinspect
from nbinspect import examples

from .pages import row


def graph_node(page, label: str):
    return page.locator(".nbi-graph-node", has=page.locator(".nbi-graph-label", has_text=label)).first


@pytest.fixture
def tiny_lm_graph(open_result):
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    page = open_result(insp, "tiny_lm_graph")
    page.select_option(".nbi-mode", "graph")
    expect(page.locator(".nbi-graph-node")).to_have_count(8)
    return page


def test_click_selects_the_module_and_fills_the_detail_panel(tiny_lm_graph):
    page = tiny_lm_graph
    graph_node(page, "lm_head").click()
    expect(page.locator(".nbi-detail-title")).to_contain_text("lm_head")
    expect(graph_node(page, "lm_head")).to_have_class(re.compile(r"\bnbi-selected\b"))
    page.select_option(".nbi-mode", "tree")  # one shared selection: the tree shows it too
    expect(row(page, "lm_head")).to_have_attribute("aria-selected", "true")


def test_the_input_node_is_called_input_as_in_the_saved_picture(tiny_lm_graph):
    """tiny_lm's one positional argument has the path "0": the node reads "input", as the
    picture saved for readers without JavaScript (render/graph_svg.py) draws it."""
    labels = tiny_lm_graph.locator(".nbi-graph-input .nbi-graph-label")
    expect(labels).to_have_text(["input"])
    expect(tiny_lm_graph.locator(".nbi-graph-input")).to_have_attribute("aria-label", re.compile(r"^input\b"))


def test_expand_and_collapse_a_folded_block(tiny_lm_graph):
    page = tiny_lm_graph
    fold = graph_node(page, "blocks.0–1 ×2")
    fold.dblclick()
    expect(page.locator(".nbi-graph-box-title", has_text="blocks.0–1 ×2")).to_be_visible()
    expect(graph_node(page, "attn")).to_be_visible()
    expect(page.locator(".nbi-graph-status")).to_contain_text("13 nodes")
    page.locator(".nbi-graph-box-title", has_text="blocks.0–1 ×2").click()
    expect(page.locator(".nbi-graph-node")).to_have_count(8)


def test_colour_by_flops_shows_a_legend(tiny_lm_graph):
    page = tiny_lm_graph
    page.select_option(".nbi-graph-colour", "flops")
    legend = page.locator(".nbi-graph-legend")
    expect(legend).to_contain_text("FLOPs")
    # the scale spans the drawn nodes: the blocks' 2 x 3.3 M FLOPs on top (TinyLM, 2 x 16 tokens)
    expect(legend).to_contain_text("3.3 M")
    fill = graph_node(page, "lm_head").locator("rect").first.evaluate("r => getComputedStyle(r).fill")
    none = graph_node(page, "ln_f").locator("rect").first.evaluate("r => getComputedStyle(r).fill")
    assert fill != none


def test_export_svg_is_a_parseable_picture_of_the_view(tiny_lm_graph):
    page = tiny_lm_graph
    with page.expect_download() as download:
        page.get_by_role("button", name="Export SVG").click()
    assert download.value.suggested_filename == "TinyLM-graph.svg"
    root = ET.parse(download.value.path()).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text") if "nbi-graph-label" in t.get("class", "")]
    assert sorted(labels) == sorted(
        ["input", "tok_emb", "pos_emb", "add", "blocks.0–1 ×2", "ln_f", "lm_head", "output"]
    )
    assert float(root.get("width")) > 100


def test_largest_view_of_a_70b_config_renders_every_layer(open_result):
    """Every layer of a 70B config unfolded and every call expanded renders (its time is
    printed; benchmarks/bench_graph.py measures it against the 300 ms target)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8
    )
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    page = open_result(nbinspect.trace(model, (1, 128), input_dtype=torch.long), "llama70b")
    page.select_option(".nbi-mode", "graph")
    graph = page.locator(".nbi-graph")
    first = float(graph.get_attribute("data-render-ms"))
    page.get_by_role("button", name="Unfold repeats").click()  # every layer unfolded and every call expanded
    status = page.locator(".nbi-graph-status").text_content()
    nodes = int(status.split(" nodes")[0].replace(",", ""))
    print(f"70B: first view {first:.1f} ms; every layer expanded: {status}: {graph.get_attribute('data-render-ms')} ms")
    assert nodes > 1800  # 80 layers' calls, each its own node
    assert graph.locator("g.nbi-graph-node").count() == nodes
