"""What a saved notebook keeps: run small notebooks in a real kernel (nbclient) and read
their stored outputs as GitHub would."""

from __future__ import annotations

import tempfile

import nbformat
import pytest
import torch
from nbclient import NotebookClient

import nbinspect
from nbinspect.render.display import readable

SETUP = "import nbinspect\nfrom nbinspect import examples\nmodel = examples.build('mlp')"


def _run(*cells: str) -> list[list[dict]]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP), *map(nbformat.v4.new_code_cell, cells)])
    with tempfile.TemporaryDirectory() as scratch:  # files the cells write stay out of the checkout
        NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": scratch}}).execute()
    return [cell.outputs for cell in nb.cells[1:]]


def _images(outputs: list[dict]) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


@pytest.fixture(scope="module")
def plotted():
    return _run(
        "nbinspect.plot_distributions(model)",
        "fig = nbinspect.plot_distributions(model, top=2)",
        "fig",
        "nbinspect.plot_distributions(model, 'weights.png', top=1); print('saved')",
    )


def test_plot_distributions_shows_one_image_as_the_cells_value(plotted):
    outputs = plotted[0]
    assert _images(outputs) == 1
    assert not any("Figure size" in str(o.get("data", {}).get("text/plain", "")) for o in outputs)


def test_an_assigned_figure_shows_once_and_again_when_asked(plotted):
    assert _images(plotted[1]) == 1  # fig = ...: drawn in the cell, shown there
    assert _images(plotted[2]) == 1  # fig in a later cell shows it again
    assert _images(plotted[3]) == 1 and any("saved" in o.get("text", "") for o in plotted[3])


def test_a_saved_notebook_keeps_a_readable_view_of_the_widget():
    (shown,) = _run("insp = nbinspect.inspect(model)\ninsp")
    widget, saved = [o for o in shown if o.get("output_type") == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" in widget["data"]  # a live front-end shows the widget
    assert "text/html" not in widget["data"]  # nbconvert with widget state would drop it: it is beside
    page = saved["data"]["text/html"]  # what GitHub, nbviewer and a reopened notebook show instead
    assert "Parameters" in page and "Layers (" in page and "interactive tree" in page
    static = page.split('<div class="nbinspect-static">', 1)[1].split('<div class="nbinspect-data"', 1)[0]
    assert "<script" not in static  # the summary itself needs no script
    # its columns line up only in a monospace font, which the <pre> names (nbconvert's HTML gave it the text font)
    assert "monospace" in page.split("<pre", 1)[1].split(">", 1)[0]


def test_the_magic_shows_the_model_then_a_readable_memory_plan():
    (shown,) = _run("%load_ext nbinspect\n%inspect_model model --input-shape 4,32 --batch-size 8 --optimizer adamw")
    displays = [o for o in shown if "data" in o]
    assert len(displays) == 3, [list(o["data"]) for o in displays]  # widget, saved view, plan
    assert "application/vnd.jupyter.widget-view+json" in displays[0]["data"]  # the model first
    plan = displays[2]["data"]["text/html"]
    assert "Training memory plan" in plan and "<NA>" not in plan
    first_row = plan.split("<tbody>")[1].split("</tr>")[0]
    assert ">total<" in first_row and ("KB" in first_row or "KiB" in first_row)  # total first, in units


def test_the_zero_fraction_reads_as_a_percentage_as_in_the_widget():
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.0, 1.0], [2.0, 3.0]]))  # 1 of 4 exactly 0
        model.bias.zero_()
    shown = readable(nbinspect.stats(model)).set_index("name")["zeros"]
    assert shown.to_dict() == {"weight": "25.0%", "bias": "100.0%"}
