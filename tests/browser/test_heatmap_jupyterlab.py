"""The value view through a real JupyterLab kernel and its comm (binary buffers over the
websocket): the NaN is found, and the round trip of a 512 x 512 region (screen-resolution
blocks of the whole 512 x 512 weight, then exact sub-regions while zooming) is timed in the
page around ``invoke``."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from .jupyterlab_server import TOKEN, jupyterlab
from .test_jupyterlab import run_cell

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "import torch, nbinspect\nfrom torch import nn\ntorch.manual_seed(0)\nm = nn.Linear(512, 512)\n"
            "with torch.no_grad(): m.weight[300, 200] = float('nan')\n"
            "w = nbinspect.inspect(m).widget()\nw",
        }
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory, browser):
    root = tmp_path_factory.mktemp("lab-heat")
    (root / "heat.ipynb").write_text(json.dumps(NOTEBOOK))
    with jupyterlab(root) as url:
        yield url


def test_region_round_trips_through_the_kernel(lab, open_page):
    page = open_page(f"{lab}/lab/tree/heat.ipynb?reset&token={TOKEN}")
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(1, timeout=60_000)
    run_cell(page, 0)
    grid = page.locator(".jp-OutputArea [role=treegrid]:visible")  # the saved view may hold a hidden copy
    expect(grid).to_be_visible(timeout=60_000)
    grid.locator('[role=row][data-path="weight"]').click()
    heat = page.locator(".jp-OutputArea .nbi-heat")
    expect(heat).to_have_attribute("data-grid", re.compile(r"\d+x\d+"), timeout=30_000)
    expect(page.locator(".jp-OutputArea .nbi-heat-locate button", has_text="NaN [300, 200]")).to_be_visible()
    times = []
    box = page.locator(".jp-OutputArea .nbi-heat-box")
    for _ in range(6):  # each view asks the kernel again: the whole tensor, then zoomed regions
        before = heat.get_attribute("data-round-trip")
        box.focus()
        page.keyboard.press("0" if len(times) % 2 == 0 else "+")
        page.wait_for_function(
            "([el, b]) => el.dataset.roundTrip !== b", arg=[heat.element_handle(), before], timeout=30_000
        )
        times.append(float(heat.get_attribute("data-round-trip")))
    print("round trips through the JupyterLab comm (ms):", times)  # speed: benchmarks/bench_values.py
    assert len(times) == 6 and all(t > 0 for t in times), times  # each view answered by the kernel
