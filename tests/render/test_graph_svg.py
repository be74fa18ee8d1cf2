"""The static picture of the top-level dataflow (saved notebooks, pages without JavaScript)."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.render.graph_svg import graph_svg

SVG = "{http://www.w3.org/2000/svg}"


def labels(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [
        t.text or "" for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "middle" and t.get("font-size") is None
    ]


def test_first_view_of_tiny_lm():
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    svg = graph_svg(insp._payload()["graph"], "TinyLM")
    assert sorted(labels(svg)) == sorted(
        ["input", "tok_emb", "pos_emb", "add", "blocks.0–1 ×2", "ln_f", "lm_head", "output"]
    )
    root = ET.fromstring(svg)
    assert len(list(root.iter(f"{SVG}path"))) == 1 + 7  # the arrow marker and the 7 edges of the view
    # drawn on a white card (its grey edge labels were unreadable on a dark page through it)
    card = root.find(f"{SVG}rect")
    assert card is not None and card.get("fill") == "#fff"
    assert (
        float(card.get("width")) >= float(root.get("width")) - 1
        and float(card.get("height")) >= float(root.get("height")) - 1
    )


def test_inputs_are_named_input_or_by_their_keyword():
    """A positional argument's path is its index ("0"): drawn as "input", numbered when there
    are several; a keyword argument keeps its name (as the widget's graph, graphModel.ts)."""

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x, y, scale=None):
            return self.a(x) + self.b(y) * scale

    insp = nbinspect.trace(Two(), torch.randn(1, 2), torch.randn(1, 2), scale=torch.ones(1, 2))
    svg = graph_svg(insp._payload()["graph"])
    assert {"input 0", "input 1", "scale"} <= set(labels(svg)), labels(svg)


def test_names_are_escaped():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.add_module("<b>&x", nn.Linear(2, 2))

        def forward(self, x):
            return getattr(self, "<b>&x")(x)

    svg = graph_svg(nbinspect.trace(Odd(), torch.randn(1, 2))._payload()["graph"], "<script>")
    ET.fromstring(svg)  # well-formed
    assert "<b>" not in svg and "<script>" not in svg


def test_saved_output_and_page_carry_the_picture(tmp_path):
    insp = nbinspect.trace(examples.build("mlp"), examples.example_input("mlp"))
    saved = insp.widget().saved_bundle("k")["text/html"]
    found = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', saved)
    assert found and "<svg" in base64.b64decode(found.group(1)).decode()
    page = insp.to_html(tmp_path / "mlp.html")
    assert "<noscript><svg" in page
    untraced = nbinspect.inspect(examples.build("mlp"), stats=False)
    assert "data:image/svg+xml" not in untraced.widget().saved_bundle("k")["text/html"]


def test_colour_by_needs_a_trace():
    import pandas as pd
    import pytest

    untraced = nbinspect.inspect(examples.build("mlp"), stats=False)
    with pytest.raises(ValueError, match="not traced"):
        untraced.widget(colour_by={"x": pd.Series({"head": 1.0})})
