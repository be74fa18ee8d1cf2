"""The widget's value commands (``_region``, ``_locate``): bad requests are answered, never
raised into the comm; buffers match the header; the model is left exactly as it was; the
picture of each heatmap is kept as a PNG in the saved notebook's output."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect.render.png import palette_png
from tests.conftest import assert_unchanged, model_state


@pytest.fixture
def model() -> nn.Module:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 300), nn.Conv2d(4, 8, 3), nn.Linear(3, 3, device="meta"))
    with torch.no_grad():
        m[0].weight[150, 32] = float("inf")
        m[0].weight[10].zero_()
    return m


@pytest.mark.parametrize(
    ("request_", "why"),
    [
        ({"tensor": "0.weight", "height": 0}, "height"),
        ({"tensor": "0.weight", "width": 5000}, "height and width"),
        ({"tensor": "0.weight", "height": "tall"}, "height"),
        ({"tensor": "0.weight", "rows": [5, 2]}, "rows"),
        ({"tensor": "0.weight", "rows": [0, 301]}, "rows"),
        ({"tensor": "0.weight", "cols": [0.5, 2]}, "cols"),
        ({"tensor": "0.weight", "plane": {"rows": [0], "cols": [0]}}, "plane"),
        ({"tensor": "1.weight", "plane": {"rows": [0], "cols": [1], "fixed": [[2, 9], [3, 0]]}}, "out of range"),
        ({"tensor": "0.weight", "stat": "median"}, "stat"),
    ],
)
def test_bad_requests_are_answered_with_an_error(model, request_, why):
    w = nbinspect.inspect(model).widget()
    header, buffers = w._region(request_, [])
    assert header["state"] == "error" and why in header["message"] and buffers == []


def test_region_buffers_match_the_header_and_the_model_is_unchanged(model):
    before = model_state(model)
    w = nbinspect.inspect(model).widget()
    for request in (
        {"tensor": "0.weight", "height": 100, "width": 40},
        {"tensor": "0.weight", "rows": [140, 160], "cols": [20, 40], "height": 512, "width": 512},
        {
            "tensor": "1.weight",
            "plane": {"rows": [1], "cols": [0], "fixed": [[2, 1], [3, 2]]},
            "height": 50,
            "width": 50,
        },
        {"tensor": "0.bias", "height": 8, "width": 100, "stat": "absmax"},
    ):
        header, buffers = w._region(request, [])
        assert header["state"] == "ok", header["message"]
        h, wd = header["grid"]
        assert [len(b) for b in buffers] == [h * wd, h * wd, 8 * h * wd, 4 * h * wd]
    # the cross-section: conv weight [:, :, 1, 2] transposed (in x out)
    values = np.frombuffer(
        buffers_of(w, {"tensor": "1.weight", "plane": {"rows": [1], "cols": [0], "fixed": [[2, 1], [3, 2]]}})
    )
    np.testing.assert_array_equal(values.reshape(4, 8), model[1].weight[:, :, 1, 2].T.double().detach().numpy())
    header, _ = w._region({"tensor": "0.weight", "rows": [140, 160], "cols": [20, 40]}, [])
    assert header["counts"]["posinf"] == 1 and header["exact"]
    assert_unchanged(before, model_state(model))


def buffers_of(w, request):
    header, buffers = w._region({"height": 512, "width": 512, **request}, [])
    assert header["state"] == "ok", header["message"]
    return buffers[2]


def test_meta_tensors_say_they_have_no_values(model):
    header, buffers = nbinspect.inspect(model).widget()._region({"tensor": "2.weight"}, [])
    assert header["state"] == "meta" and "meta device" in header["message"] and buffers == []


def test_locate_rows_for_the_list_under_the_heatmap(model):
    rows, _ = nbinspect.inspect(model).widget()._locate({"tensor": "0.weight", "side": None}, [])
    assert [(r["what"], r["index"]) for r in rows] == [("posinf", [150, 32]), ("zero_row", [10])]
    assert rows[0]["value"] is None and rows[0]["total"] == 1  # Inf is not JSON: sent as null
    assert nbinspect.inspect(model).widget()._locate({"tensor": 3}, [])[0] == []


def test_the_saved_output_keeps_each_heatmap_as_a_png(model):
    w = nbinspect.inspect(model).widget()
    header, buffers = w._region({"tensor": "0.weight", "height": 60, "width": 32, "label": "0.weight overview"}, [])
    png, label = w.pictures[("0.weight", None)]
    assert label == "0.weight overview"
    html = w.saved_bundle("k1")["text/html"]
    assert 'alt="0.weight overview"' in html and "nbinspect-heatmap" in html
    # the PNG's pixels are the palette colours of the index buffer (decoded here with zlib)
    width, height, pixels = decode_png(png)
    h, wd = header["grid"]
    index = np.frombuffer(buffers[0], np.uint8).reshape(h, wd)
    fy, fx = height // h, width // wd
    assert (height, width) == (h * fy, wd * fx) and min(height, width) >= 96
    colour = header["palette"][int(index[7, 5])]
    assert tuple(pixels[7 * fy, 5 * fx]) == (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16), 255)


def decode_png(data: bytes) -> tuple[int, int, np.ndarray]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        assert struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])[0] == zlib.crc32(kind + body)
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height = size
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + 4 * width)
    assert not raw[:, 0].any()  # filter type 0 on every row
    return width, height, raw[:, 1:].reshape(height, width, 4)


def test_palette_png_round_trip():
    index = np.array([[0, 125, 250], [251, 254, 255]], np.uint8)
    palette = [f"#{i:02x}{i:02x}{i:02x}" for i in range(255)] + ["#00000000"]
    width, height, pixels = decode_png(palette_png(index, palette))
    assert (width, height) == (96, 96)
    assert tuple(pixels[0, 40]) == (125, 125, 125, 255)
    assert tuple(pixels[50, 95]) == (0, 0, 0, 0)  # no data: transparent


def test_the_standalone_page_keeps_the_heatmaps_last_shown(model):
    insp = nbinspect.inspect(model)
    assert "nbinspect-heatmap" not in insp.to_html()
    w = insp.widget()
    w._region({"tensor": "0.weight", "height": 30, "width": 30, "label": "0.weight (overview)"}, [])
    page = insp.to_html()
    assert page.count('<figure class="nbinspect-heatmap">') == 1 and 'alt="0.weight (overview)"' in page


def test_a_saved_notebook_keeps_the_heatmap_that_was_open():
    """In a real kernel: the widget answers a region request (as the front-end would ask),
    schedules the saved output's rewrite, and the rewrite puts the picture beside the widget."""
    import tempfile

    import nbformat
    from nbclient import NotebookClient

    cells = [
        "import torch, nbinspect\nfrom torch import nn\nm = nn.Linear(64, 300)\n"
        "with torch.no_grad(): m.weight[150, 32] = float('nan')\n"
        "w = nbinspect.inspect(m).widget()\nw",
        "request = {'tensor': 'weight', 'height': 60, 'width': 32, 'label': 'weight, 300 × 64'}\n"
        "w._region(request, [])[0]['state']",
        # what the 1 s timer runs (its message would belong to cell 2, which nbclient has left;
        # a notebook front-end updates every output with that display id)
        "w._saved_pending",
        "w._flush_saved()",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with tempfile.TemporaryDirectory() as scratch:
        NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": scratch}}).execute()
    assert nb.cells[2].outputs[0]["data"]["text/plain"] == "True"  # a rewrite was scheduled
    saved = [o for o in nb.cells[0].outputs if "text/html" in o.get("data", {})]
    assert len(saved) == 1
    page = saved[0]["data"]["text/html"]
    static = page.split('<div class="nbinspect-static">', 1)[1].split('<div class="nbinspect-data"', 1)[0]
    assert static.count('<figure class="nbinspect-heatmap">') == 1
    assert 'alt="weight, 300 × 64"' in static and "data:image/png;base64," in static


def test_a_model_built_on_the_meta_device_says_no_values_after_it_is_dropped():
    """A meta model (from_config builds one inside the call) costs no memory and is kept:
    its tensors answer "meta", not "deleted"."""
    import gc

    with torch.device("meta"):
        meta = nn.Sequential(nn.Linear(8, 4))
    insp = nbinspect.inspect(meta)
    del meta
    gc.collect()
    header, buffers = insp.widget()._region({"tensor": "0.weight"}, [])
    assert header["state"] == "meta" and "meta device" in header["message"] and buffers == []
