"""Files that lie are refused with one line naming the file: safetensors headers whose
ranges, shapes or metadata cannot be true, torch files under the wrong name, shard indexes
that are malformed or point outside their folder, names that are not UTF-8, and plain
pickles that would run code."""

from __future__ import annotations

import json
import os
import pickle
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect import CheckpointError, UnsafeCheckpointError, load_checkpoint


def _write(path: Path, header: dict, data: bytes) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def _one_line(exc: pytest.ExceptionInfo, path: Path) -> str:
    text = str(exc.value)
    assert "\n" not in text and text.startswith(str(path)), text
    return text


F32 = {"dtype": "F32"}


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (
            {"a": {**F32, "shape": [2], "data_offsets": [0, 8]}, "b": {**F32, "shape": [2], "data_offsets": [4, 12]}},
            "tensor 'b' (bytes 4..12) overlaps tensor 'a'",
        ),
        (  # same range twice: two names for the same bytes is still an overlap, not a tie
            {"a": {**F32, "shape": [2], "data_offsets": [0, 8]}, "b": {**F32, "shape": [2], "data_offsets": [0, 8]}},
            "overlaps tensor",
        ),
        ({"a": {**F32, "shape": [2], "data_offsets": [2, 10]}}, "data offset 2 is not aligned to its 4-byte elements"),
        ({"a": {**F32, "shape": [-2], "data_offsets": [0, 8]}}, "shape [-2] is not a list of non-negative integers"),
        ({"a": {**F32, "shape": [2.0], "data_offsets": [0, 8]}}, "shape [2.0] is not a list"),
        ({"a": {**F32, "shape": [True, 2], "data_offsets": [0, 8]}}, "shape [True, 2] is not a list"),
        ({"a": {**F32, "shape": "2", "data_offsets": [0, 8]}}, "shape '2' is not a list"),
        ({"a": {**F32, "shape": [2], "data_offsets": [0.0, 8]}}, "data_offsets [0.0, 8] are not two integers"),
        ({"a": {**F32, "shape": [2], "data_offsets": [0, 8, 9]}}, "are not two integers"),
        ({"a": [1, 2]}, "tensor 'a': bad header entry (ValueError: not a JSON object)"),
        ({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, "bad header entry (KeyError"),
        ({"a": {**F32, "shape": [3], "data_offsets": [0, 8]}}, "byte range 0..8 does not hold [3] F32"),
        ({"__metadata__": ["x"], "a": {**F32, "shape": [2], "data_offsets": [0, 8]}}, "__metadata__ must map"),
        (
            {"__metadata__": {"k": 1}, "a": {**F32, "shape": [2], "data_offsets": [0, 8]}},
            "__metadata__ entry 'k' is a int, not a string",
        ),
    ],
)
def test_lying_safetensors_headers_are_refused(tmp_path, header, message):
    path = _write(tmp_path / "lie.safetensors", header, b"\0" * 16)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(path)
    assert message in _one_line(exc, path)


def test_empty_tensors_may_share_an_offset(tmp_path):
    header = {"a": {**F32, "shape": [0], "data_offsets": [0, 0]}, "b": {**F32, "shape": [2], "data_offsets": [0, 8]}}
    source = load_checkpoint(_write(tmp_path / "ok.safetensors", header, b"\0" * 8))
    assert nbinspect.totals(source)["total_params"] == 2 and source.tied() == {}


@pytest.mark.parametrize("payload", ["zip", "legacy"])
def test_torch_file_named_safetensors(tmp_path, payload):
    path = tmp_path / "model.safetensors"
    torch.save({"w": torch.ones(2)}, path, _use_new_zipfile_serialization=payload == "zip")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(path)
    assert "named .safetensors but holds a torch.save pickle; rename it to .pt" in _one_line(exc, path)
    os.rename(path, tmp_path / "model.pt")
    assert [t.name for t in load_checkpoint(tmp_path / "model.pt").tensors] == ["w"]


def _index(tmp_path: Path, weight_map) -> Path:
    save_file({"w": torch.ones(2)}, tmp_path / "a.safetensors")
    path = tmp_path / "m.safetensors.index.json"
    path.write_text(json.dumps({"weight_map": weight_map}))
    return path


@pytest.mark.parametrize(
    ("weight_map", "message"),
    [
        (["w", "a.safetensors"], "not a shard index with a 'weight_map'"),
        ({"w": 3}, "tensor 'w' is mapped to 3, not a shard file name"),
        ({"w": None}, "tensor 'w' is mapped to None"),
        ({"w": ""}, "shard name '' is not a file name"),
        ({"w": "../outside/secret.safetensors"}, "'../outside/secret.safetensors' lies outside the folder"),
        ({"w": "../../outside/secret.safetensors"}, "lies outside the folder"),
        ({"w": "/etc/passwd"}, "'/etc/passwd' lies outside"),
        ({"w": "sub/../../x.safetensors"}, "lies outside"),
    ],
)
def test_bad_shard_indexes_are_refused(tmp_path, weight_map, message):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    save_file({"w": torch.ones(2)}, outside / "secret.safetensors")
    index = _index(folder, weight_map)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(index)
    assert message in _one_line(exc, index)


def test_symlink_leaving_the_folder_is_refused(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_file({"w": torch.ones(2)}, tmp_path / "secret.safetensors")
    (folder / "link.safetensors").symlink_to(tmp_path / "secret.safetensors")
    index = _index(folder, {"w": "link.safetensors"})
    with pytest.raises(CheckpointError, match=f"'link.safetensors' lies outside the folder {folder}; refused"):
        load_checkpoint(index)
    inner = _index(folder, {"w": "a.safetensors"})  # an ordinary shard inside still reads
    assert [t.name for t in load_checkpoint(inner).tensors] == ["w"]
    inner.unlink()
    with pytest.raises(CheckpointError, match="'link.safetensors' lies outside the folder"):
        load_checkpoint(folder)  # the same link met by listing the folder


def test_names_that_are_not_utf8_are_shown_escaped(tmp_path):
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/ck\xffpt"))
    folder.mkdir()
    save_file({"w": torch.ones(2)}, folder / os.fsdecode(b"m\xfe.safetensors"))
    source = load_checkpoint(folder)
    assert source.name == "ck\\xffpt"
    assert source.metadata["file"].endswith("/ck\\xffpt")
    assert nbinspect.inspect(source).summary().startswith("ck\\xffpt (torch)")
    json.dumps(source.metadata).encode("utf-8")  # printable, writable
    bad = folder / os.fsdecode(b"b\xfe.pt")
    bad.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(bad)
    assert str(exc.value).startswith(str(tmp_path) + "/ck\\xffpt/b\\xfe.pt: not a checkpoint format")
    str(exc.value).encode("utf-8")


class _Runs:
    def __reduce__(self):
        return (os.system, ("echo ran",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_plain_pickle_that_would_run_code(tmp_path, protocol):
    path = tmp_path / "raw.pt"
    path.write_bytes(pickle.dumps({"w": _Runs()}, protocol=protocol))
    with pytest.raises(UnsafeCheckpointError) as exc:
        load_checkpoint(path)
    text = _one_line(exc, path)
    assert "is a plain pickle that imports posix.system" in text or "needs" in text
    assert "trust=True" in text and "Nothing was run" in text


def test_damaged_plain_pickle_is_still_called_corrupt(tmp_path):
    path = tmp_path / "raw.pt"
    path.write_bytes(b"\x80\x04\x95" + b"\xff" * 40)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(path)
    assert not isinstance(exc.value, UnsafeCheckpointError)
    assert "corrupt" in _one_line(exc, path) or "cannot read" in str(exc.value)
