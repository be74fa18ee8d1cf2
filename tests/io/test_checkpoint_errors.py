"""Bad checkpoints: refused pickles run nothing; broken files get one clear line naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nbinspect import CheckpointError, UnsafeCheckpointError, examples, load_checkpoint


def _touch(flag: str) -> str:
    """What the malicious pickle runs: leaves a file behind, so running is visible."""
    Path(flag).write_text("ran")
    return "payload ran"


class Payload:
    def __init__(self, flag: Path):
        self.flag = str(flag)

    def __reduce__(self):
        return (_touch, (self.flag,))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_custom_pickle_is_refused_and_nothing_runs(tmp_path):
    flag = tmp_path / "flag"
    torch.save({"w": torch.ones(2), "extra": Payload(flag)}, tmp_path / "evil.pt")
    with pytest.raises(UnsafeCheckpointError) as exc:
        load_checkpoint(tmp_path / "evil.pt")
    text = _one_line(exc)
    assert str(tmp_path / "evil.pt") in text
    assert "_touch" in text and "trust=True" in text and "--trust" in text
    assert not flag.exists(), "the refused pickle ran code"


def test_trust_opts_in(tmp_path):
    flag = tmp_path / "flag"
    torch.save({"w": torch.ones(2), "extra": Payload(flag)}, tmp_path / "evil.pt")
    source = load_checkpoint(tmp_path / "evil.pt", trust=True)
    assert flag.read_text() == "ran"  # the opt-in really runs the file's code
    assert [t.name for t in source.tensors] == ["w"]
    assert source.metadata["extra"] == "payload ran"


def test_whole_pickled_module_needs_trust(tmp_path):
    model = examples.build("mlp")
    torch.save(model, tmp_path / "whole.pt")
    with pytest.raises(UnsafeCheckpointError, match="MLP"):
        load_checkpoint(tmp_path / "whole.pt")
    source = load_checkpoint(tmp_path / "whole.pt", trust=True)
    assert {t.name for t in source.tensors} == set(model.state_dict())
    assert source.metadata["model_class"] == "MLP"


def _good_pt(tmp_path) -> bytes:
    torch.save(examples.build("mlp").state_dict(), tmp_path / "good.pt")
    return (tmp_path / "good.pt").read_bytes()


def _good_safetensors(tmp_path) -> bytes:
    save_file({k: v.contiguous() for k, v in examples.build("mlp").state_dict().items()}, tmp_path / "good.safetensors")
    return (tmp_path / "good.safetensors").read_bytes()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("empty.pt", lambda tmp: b"", "empty file"),
        ("empty.safetensors", lambda tmp: b"", "empty file"),
        ("truncated.pt", lambda tmp: _good_pt(tmp)[:3000], "cannot read as a torch checkpoint"),
        ("notes.txt", lambda tmp: b"just some text, not weights\n", "not a checkpoint format nbinspect reads"),
        ("garbage.bin", lambda tmp: bytes(range(256)) * 8, "not a checkpoint format nbinspect reads"),
        ("corrupt.pt", lambda tmp: _good_pt(tmp)[:200] + b"\x00" * 100 + _good_pt(tmp)[300:], "torch checkpoint"),
        ("truncated.safetensors", lambda tmp: _good_safetensors(tmp)[:-100], "truncated: tensor 'head.weight'"),
        (
            "badheader.safetensors",
            lambda tmp: (20).to_bytes(8, "little") + b"{not json at all!!!}" + b"\0" * 16,
            "corrupt safetensors header",
        ),
        (
            "hugeheader.safetensors",
            lambda tmp: (10**12).to_bytes(8, "little") + b"{}",
            "header of 1,000,000,000,000 bytes is over the limit",
        ),
    ],
)
def test_broken_files_get_one_line_naming_the_file(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_bytes(content(tmp_path))
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(path)
    text = _one_line(exc)
    assert str(path) in text and expected in text


def test_bad_safetensors_entry_names_the_tensor(tmp_path):
    header = json.dumps({"layer.weight": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}}).encode()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 64)
    with pytest.raises(
        CheckpointError, match=r"m\.safetensors: tensor 'layer\.weight': byte range 0\.\.60 does not hold \[4, 4\] F32"
    ):
        load_checkpoint(tmp_path / "m.safetensors")
    header = json.dumps({"layer.weight": {"dtype": "F48", "shape": [1], "data_offsets": [0, 6]}}).encode()
    (tmp_path / "m.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)
    with pytest.raises(CheckpointError, match=r"tensor 'layer\.weight': bad header entry"):
        load_checkpoint(tmp_path / "m.safetensors")


def test_missing_path(tmp_path):
    with pytest.raises(CheckpointError, match=r"nope\.pt: no such file or folder"):
        load_checkpoint(tmp_path / "nope.pt")


def test_state_dict_without_tensors():
    with pytest.raises(CheckpointError, match="no tensors found"):
        load_checkpoint({"epoch": 3, "lr": 0.1})


def test_shard_problems_name_the_shard_and_tensor(tmp_path):
    sd = {k: v.contiguous() for k, v in examples.build("mlp").state_dict().items()}
    save_file(sd, tmp_path / "a.safetensors")
    index = {"weight_map": {**dict.fromkeys(sd, "a.safetensors"), "ghost.weight": "a.safetensors"}}
    (tmp_path / "m.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"tensor 'ghost\.weight' is not in its shard 'a\.safetensors'"):
        load_checkpoint(tmp_path / "m.safetensors.index.json")
    (tmp_path / "m.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "b.safetensors"}}))
    with pytest.raises(CheckpointError, match=r"shard 'b\.safetensors' is missing"):
        load_checkpoint(tmp_path)
    (tmp_path / "m.safetensors.index.json").write_text("{}")
    with pytest.raises(CheckpointError, match="not a shard index with a 'weight_map'"):
        load_checkpoint(tmp_path / "m.safetensors.index.json")


def test_empty_folder(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint files"):
        load_checkpoint(tmp_path)


def test_not_a_path_or_mapping():
    from nbinspect.backends import as_source

    with pytest.raises(
        TypeError,
        match="expected a torch.nn.Module or MLX module instance, a state_dict, or a checkpoint path, got int",
    ):
        as_source(42)


def test_pickled_model_inside_a_trusted_checkpoint(tmp_path):
    model = examples.build("mlp")
    torch.save({"model": model, "epoch": 2}, tmp_path / "c.pt")
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint(tmp_path / "c.pt")
    source = load_checkpoint(tmp_path / "c.pt", trust=True)
    assert {t.name for t in source.tensors} == set(model.state_dict())
    assert source.metadata["model_class"] == "MLP" and source.metadata["epoch"] == 2
