"""The value view on checkpoint files: a zoomed region reads only the rows it shows (pread of
those bytes, counted here), its values equal the in-memory tensor's, and a file changed
after it was opened answers "unavailable" (never a SIGBUS, never wrong values)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect.io.files import FileHandle

ROWS, COLS = 2_000, 512


@pytest.fixture
def tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    big = torch.randn(ROWS, COLS, generator=g)
    big[1_234, 321] = float("nan")
    return {
        "layer.weight": big,
        "layer.half": torch.randn(300, 64, generator=g).to(torch.bfloat16),
        "experts.w": torch.randn(4, 50, 30, generator=g),
    }


@pytest.fixture(params=["safetensors", "torch", "npz"])
def checkpoint(request, tmp_path, tensors):
    if request.param == "npz":  # numpy has no bfloat16: that array goes as float32
        path = tmp_path / "m.npz"
        np.savez(path, **{k: v.float().numpy() for k, v in tensors.items()})
    elif request.param == "safetensors":
        path = tmp_path / "m.safetensors"
        save_file(tensors, str(path))
    else:
        path = tmp_path / "m.pt"
        torch.save(tensors, path)
    return path


@pytest.fixture
def bytes_read(monkeypatch):
    counted = []
    real = FileHandle.readinto

    def counting(self, offset, buffer):
        counted.append(buffer.nbytes)
        return real(self, offset, buffer)

    monkeypatch.setattr(FileHandle, "readinto", counting)
    return counted


def exact(insp, name, rows, cols, **extra):
    header, buffers = insp.values.region(
        {"tensor": name, "rows": rows, "cols": cols, "height": 512, "width": 512, **extra}
    )
    assert header["state"] == "ok", header["message"]
    assert header["exact"]
    return np.frombuffer(buffers[2]).reshape(header["grid"])


def test_a_zoomed_region_reads_only_its_rows(checkpoint, tensors, bytes_read):
    insp = nbinspect.inspect(checkpoint, stats=False)
    bytes_read.clear()
    got = exact(insp, "layer.weight", [1_230, 1_240], [300, 340])
    want = tensors["layer.weight"][1_230:1_240, 300:340].double().numpy()
    np.testing.assert_array_equal(got, want)  # the NaN included, at its place
    assert np.isnan(got[4, 21])
    assert sum(bytes_read) == 10 * COLS * 4  # the 10 rows, not the 4 MB tensor


def test_regions_of_files_equal_the_in_memory_tensor(checkpoint, tensors):
    insp = nbinspect.inspect(checkpoint, stats=False)
    live = nbinspect.inspect(nbinspect.backends.as_source(dict(tensors)), stats=False)
    for name, rows, cols in (("layer.half", [17, 90], [3, 60]), ("experts.w", [60, 140], [0, 30])):
        np.testing.assert_array_equal(exact(insp, name, rows, cols), exact(live, name, rows, cols))
    t = tensors["experts.w"]  # rows of a 3-D expert stack are (expert, output) pairs
    np.testing.assert_array_equal(
        exact(insp, "experts.w", [60, 140], [0, 30]), t.reshape(200, 30)[60:140].double().numpy()
    )
    # a cross-section: axis 2 x axis 1 at expert 3 (transposed)
    plane = {"rows": [2], "cols": [1], "fixed": [[0, 3]]}
    np.testing.assert_array_equal(exact(insp, "experts.w", [0, 30], [0, 50], plane=plane), t[3].T.double().numpy())
    # the overview: block means equal those of the tensor in memory
    ov, ov_live = (v.values.region({"tensor": "layer.weight", "height": 100, "width": 64}) for v in (insp, live))
    assert ov[0]["block"] == [20, 8] and ov[0]["counts"]["nan"] == 1
    np.testing.assert_array_equal(np.frombuffer(ov[1][2]), np.frombuffer(ov_live[1][2]))


def test_a_file_changed_after_opening_is_unavailable(tmp_path, tensors):
    path = tmp_path / "m.safetensors"
    save_file(tensors, str(path))
    insp = nbinspect.inspect(path, stats=False)
    with open(path, "r+b") as f:  # another process truncates the checkpoint in place
        f.truncate(path.stat().st_size // 2)
    header, buffers = insp.values.region({"tensor": "layer.weight", "rows": [0, 4], "cols": [0, 4]})
    assert header["state"] == "unavailable" and buffers == []
