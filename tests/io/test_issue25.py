"""Every case of issue 25, on files these tests craft themselves.

The promise: a file is data. Nothing in it runs, nothing outside the folder the user named
is read, the process survives, the cost is bounded, and a bad file is one line naming it.
"""

from __future__ import annotations

import collections
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect import CheckpointError, load_checkpoint
from nbinspect.errors import UnsafeCheckpointError
from nbinspect.io import torch_file
from nbinspect.ui.cli import main as cli


class R:
    """Pickles as ``fn(*args)`` (then BUILD `state`, SETITEMS `items`): a hand-made pickle
    written through torch.save's own pickler."""

    def __init__(self, fn, args, state=None, items=None):
        self.fn, self.args, self.state, self.items = fn, args, state, items

    def __reduce_ex__(self, protocol):
        return (self.fn, self.args, self.state, None, iter(self.items.items()) if self.items else None)


def one_line(exc: pytest.ExceptionInfo, *names: str) -> str:
    text = str(exc.value)
    assert "\n" not in text and len(text) < 1200, text[:300]
    for name in names:
        assert name in text, (name, text[:300])
    return text


def u(s: str) -> bytes:  # BINUNICODE
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def dcp_folder(path: Path, state: dict) -> Path:
    import torch.distributed.checkpoint as dcp

    dcp.save(state, checkpoint_id=str(path), no_dist=True)
    return path


def raw_safetensors(header: str, data: bytes = b"") -> bytes:
    raw = header.encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


# --- code execution --------------------------------------------------------------------------


def test_dcp_metadata_cannot_reach_os_through_a_dotted_name(tmp_path):
    folder = dcp_folder(tmp_path / "ckpt", {"w": torch.ones(4)})
    canary = tmp_path / "canary"
    payload = (
        b"\x80\x04"
        + u("torch.distributed.checkpoint.metadata")
        + u("os.system")
        + b"\x93"
        + u(f"touch {canary}")
        + b"\x85R."
    )
    (folder / ".metadata").write_bytes(payload)
    for trust in (False, True):
        with pytest.raises(CheckpointError) as exc:
            load_checkpoint(folder, trust=trust)
        one_line(exc, ".metadata", "os.system")
    assert not canary.exists()


def test_config_target_needs_trust_like_a_checkpoint_naming_its_factory(tmp_path, capsys):
    canary = tmp_path / "canary"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"_target_: os.system\ncommand: touch {canary}\n")
    assert cli(["inspect", "--config", str(cfg)]) == 1
    err = capsys.readouterr().err
    assert "cfg.yaml" in err and "--trust" in err and err.count("\n") == 1
    assert not canary.exists()
    ok = tmp_path / "lin.yaml"
    ok.write_text("_target_: torch.nn.Linear\nin_features: 3\nout_features: 2\n")
    assert cli(["inspect", "--config", str(ok)]) == 1
    assert cli(["inspect", "--config", str(ok), "--trust"]) == 0


# --- reads outside the folder --------------------------------------------------------------------


def test_dcp_relative_path_cannot_leave_the_folder(tmp_path):
    folder = dcp_folder(tmp_path / "ckpt", {"w": torch.ones(4)})
    outside = dcp_folder(tmp_path / "other", {"w": torch.full((4,), 31337.0)})
    md = pickle.loads((folder / ".metadata").read_bytes())  # the test trusts its own file
    for info in md.storage_data.values():
        info.relative_path = "../other/" + next(p.name for p in outside.glob("*.distcp"))
    (folder / ".metadata").write_bytes(pickle.dumps(md))
    with pytest.raises(CheckpointError) as exc:
        nbinspect.params(load_checkpoint(folder))
    one_line(exc, "lies outside")


def test_symlinks_out_of_the_folder_are_refused(tmp_path):
    outside = dcp_folder(tmp_path / "outside", {"w": torch.ones(4)})
    folder = dcp_folder(tmp_path / "ckpt", {"w": torch.ones(4)})
    (folder / ".metadata").unlink()
    (folder / ".metadata").symlink_to(outside / ".metadata")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(folder)
    one_line(exc, "lies outside")
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": torch.ones(2)}, model / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 31337}))
    (model / "config.json").symlink_to(tmp_path / "config.json")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(model)
    one_line(exc, "config.json", "lies outside")


def test_hub_cache_snapshot_is_read(tmp_path):
    repo = tmp_path / "hub" / "models--org--tiny"
    blobs, snap = repo / "blobs", repo / "snapshots" / ("0123abcd" * 5)
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    save_file({"a.weight": torch.ones(2, 2), "a.bias": torch.zeros(2)}, blobs / "f1")
    (snap / "model.safetensors").symlink_to(Path("../../blobs/f1"))
    for target in (snap, snap / "model.safetensors"):
        source = load_checkpoint(target)
        assert sorted(t.name for t in source.tensors) == ["a.bias", "a.weight"]
        assert float(nbinspect.stats(source).set_index("name").loc["a.weight", "mean"]) == 1.0


def test_symlink_loop_is_one_line(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "a.safetensors").symlink_to("b.safetensors")
    (folder / "b.safetensors").symlink_to("a.safetensors")
    for target in (folder, folder / "a.safetensors"):
        with pytest.raises(CheckpointError) as exc:
            load_checkpoint(target)
        one_line(exc, "loop")


# --- crashes: claimed sizes, files changing under the reader -----------------------------------


def test_huge_meta_tensor_is_refused_and_a_small_one_has_no_values(tmp_path):
    torch.save({"w": torch.empty(10**9, 10**9, device="meta"), "b": torch.ones(2)}, tmp_path / "w.pt")
    with pytest.raises(CheckpointError) as exc:
        nbinspect.stats(load_checkpoint(tmp_path / "w.pt"))
    one_line(exc, "w.pt", "2**50")
    torch.save({"w": torch.empty(3, 4, device="meta"), "b": torch.ones(2)}, tmp_path / "m.pt")
    stats = nbinspect.stats(load_checkpoint(tmp_path / "m.pt")).set_index("name")
    assert stats.loc["b", "mean"] == 1.0 and "meta" in str(stats.loc["w"].to_dict())


@pytest.mark.parametrize("kind", ["pt", "safetensors"])
def test_a_file_truncated_after_opening_is_one_line(tmp_path, kind):
    path = tmp_path / f"last.{kind}"
    state = {f"w{i}": torch.randn(256, 256) for i in range(4)}
    torch.save(state, path) if kind == "pt" else save_file(state, path)
    source = load_checkpoint(path)
    nbinspect.stats(source)
    os.truncate(path, path.stat().st_size // 3)
    with pytest.raises(CheckpointError) as exc:
        nbinspect.stats(source)
    one_line(exc, path.name, "changed while it was read")


# --- memory and time bombs ---------------------------------------------------------------------


def test_bytearray_of_a_claimed_size_is_refused(tmp_path):
    torch.save({"state_dict": {"w": torch.ones(4)}, "blob": R(bytearray, (2**30,))}, tmp_path / "blob.pt")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "blob.pt")
    one_line(exc, "blob.pt", "bytearray")


def _torch_members(obj) -> list[tuple[str, bytes]]:
    buf = io.BytesIO()
    torch.save(obj, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        return [(n, zf.read(n)) for n in zf.namelist()]


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2])
def test_data_pkl_inflating_past_the_cap_is_refused(tmp_path, monkeypatch, method):
    monkeypatch.setattr(torch_file, "MAX_PICKLE_BYTES", 2**20)
    with zipfile.ZipFile(tmp_path / "bomb.pt", "w") as zf:
        for name, data in _torch_members({"w": torch.ones(4)}):
            big = name.endswith("data.pkl")
            zf.writestr(name, data + bytes(2**21) if big else data, method if big else zipfile.ZIP_STORED)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "bomb.pt")
    one_line(exc, "bomb.pt")


def test_npz_bzip2_bomb_costs_a_header(tmp_path):
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
    header["shape"] = (2**26,)  # 256 MiB of zeros
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    data = buf.getvalue() + bytes(2**28)
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w") as zf:
        zf.writestr("w.npy", data, zipfile.ZIP_BZIP2)
    del data
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as exc:
        nbinspect.inspect(tmp_path / "bomb.npz")
    one_line(exc, "bomb.npz", "decompression bomb")
    assert time.perf_counter() - start < 5


def test_deep_names_and_many_implied_modules_are_refused_fast(tmp_path):
    deep = "a." * 500 + "w"  # 1,001 characters: under the length limit, over the depth limit
    (tmp_path / "deep.safetensors").write_bytes(
        raw_safetensors(json.dumps({deep: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}), bytes(4))
    )
    start = time.perf_counter()
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "deep.safetensors")
    one_line(exc, "deep.safetensors", "levels deep")
    from nbinspect.core.limits import check_module_paths

    names = [f"m{i}.a{i}.b{i}.w" for i in range(400)]
    with pytest.raises(CheckpointError, match="over 1,000 modules"):
        check_module_paths(names, "wide.safetensors", limit=1000)
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize(("key", "value"), [("num_hidden_layers", 20_000), ("max_position_embeddings", 300_000_000)])
def test_config_json_asking_for_a_huge_model_is_not_built(tmp_path, key, value):
    pytest.importorskip("transformers")
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": torch.ones(2)}, model / "model.safetensors")
    config = {"model_type": "llama", "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2}
    config.update({"num_hidden_layers": 1, "vocab_size": 64, key: value})
    (model / "config.json").write_text(json.dumps(config))
    start = time.perf_counter()
    source = load_checkpoint(model)
    assert time.perf_counter() - start < 20
    assert [t.name for t in source.tensors] == ["w"] and "over the limit" in str(source.metadata.get("model"))


_WHISPER = {
    "model_type": "whisper", "encoder_layers": 1, "decoder_layers": 1, "d_model": 64, "vocab_size": 51865,
    "encoder_attention_heads": 4, "decoder_attention_heads": 4, "num_mel_bins": 8,
    "max_source_positions": 2**24, "max_target_positions": 2**24,
}  # fmt: skip
_MEASURE_BUILD = """
import json, resource, sys, torch
import nbinspect
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
insp = nbinspect.from_config(config=sys.argv[1])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.device("meta"):  # the reference count: transformers itself, every tensor on meta
    import transformers
    config = transformers.AutoConfig.for_model(**json.load(open(sys.argv[1])))
    reference = sum(p.numel() for p in transformers.AutoModel.from_config(config).parameters())
print(json.dumps({"grew": (after - before) * 1024, "params": insp.totals["total_params"], "reference": reference,
                  "note": str(insp.metadata.get("model", ""))}))
"""


def test_a_config_whose_derived_tables_are_gigabytes_is_built_within_the_bound(tmp_path):
    """Whisper with 2**24 positions: its sinusoid tables took 10.9 GB and a minute to compute
    (found by attacking this fix). The build charges each operation before it runs and,
    over the budget, builds the structure wholly on meta: same parameter count, bounded memory."""
    pytest.importorskip("transformers")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_WHISPER))
    run = subprocess.run([sys.executable, "-c", _MEASURE_BUILD, str(path)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["params"] == found["reference"] > 2 * 2**24 * 64
    assert found["grew"] < 2 * 2**30, found
    assert "left on meta" in found["note"]


def test_a_small_config_keeps_its_computed_buffers(tmp_path):
    pytest.importorskip("transformers")
    from nbinspect.backends.torch.hf_config import hf_model

    config = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
              "num_hidden_layers": 2, "vocab_size": 64, "rope_theta": 10000.0}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    model, described = hf_model(tmp_path / "config.json")
    inv_freq = dict(model.named_buffers())["rotary_emb.inv_freq"]
    reference = 1.0 / (10000.0 ** (np.arange(0, 8, 2, dtype=np.float64) / 8))
    assert not inv_freq.is_meta and np.allclose(inv_freq.double().numpy(), reference, rtol=1e-6)
    assert all(p.is_meta for p in model.parameters()) and "left on meta" not in described


def test_a_config_building_too_many_modules_stops(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from nbinspect.backends.torch import meta_build

    monkeypatch.setattr(meta_build, "MAX_BUILT_MODULES", 50)
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": torch.ones(2)}, model / "model.safetensors")
    config = {"model_type": "llama", "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 2,
              "num_hidden_layers": 40, "vocab_size": 64}  # fmt: skip
    (model / "config.json").write_text(json.dumps(config))
    source = load_checkpoint(model)
    assert [t.name for t in source.tensors] == ["w"] and "more than 50 modules" in str(source.metadata.get("model"))


@pytest.mark.parametrize("architectures", [[5], [["GPT2Model"]], [{"a": 1}], ["__class__"]])
def test_a_config_naming_no_class_is_a_note_not_a_crash(tmp_path, architectures):
    pytest.importorskip("transformers")
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": torch.ones(2)}, model / "model.safetensors")
    config = {"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 10, "n_positions": 8}
    (model / "config.json").write_text(json.dumps({**config, "architectures": architectures}))
    source = load_checkpoint(model)
    assert [t.name for t in source.tensors] == ["w"]
    note = str(source.metadata.get("model"))
    assert "config.json" in note and "\n" not in note


def test_shared_lists_in_a_checkpoint_config_are_not_walked(tmp_path):
    level: list = [1, 1]
    for _ in range(27):
        level = [level, level]
    torch.save({"state_dict": {"w": torch.ones(2)}, "config": {"layers": level}}, tmp_path / "cfg.pt")
    start = time.perf_counter()
    source = load_checkpoint(tmp_path / "cfg.pt")
    nbinspect.inspect(source).to_json()
    assert time.perf_counter() - start < 10


def test_yaml_billion_laughs_is_refused(tmp_path, capsys):
    items = ["  - &l0 [" + ",".join(["lol"] * 9) + "]"]
    items += [f"  - &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    (tmp_path / "bomb.yaml").write_text("in_features:\n" + "\n".join(items) + "\nout_features: 2\n")
    start = time.perf_counter()
    assert cli(["inspect", "--model", "torch.nn:Linear", "--config", str(tmp_path / "bomb.yaml")]) == 1
    err = capsys.readouterr().err
    assert "bomb.yaml" in err and "aliases" in err and time.perf_counter() - start < 5


def test_live_broadcast_buffer_is_read_by_its_stored_elements():
    model = torch.nn.Linear(2, 2)
    model.register_buffer("big", torch.zeros(1).expand(3 * 10**11))
    start = time.perf_counter()
    stats = nbinspect.stats(model).set_index("name")
    assert time.perf_counter() - start < 10 and stats.loc["big", "mean"] == 0.0


# --- refused constructions ---------------------------------------------------------------------


def test_uninitialised_float_tensor_is_refused(tmp_path):
    torch.save({"w": R(torch.FloatTensor, (4096,))}, tmp_path / "uninit.pt")
    with pytest.raises(UnsafeCheckpointError) as exc:
        load_checkpoint(tmp_path / "uninit.pt")
    one_line(exc, "uninit.pt", "FloatTensor")


def test_wrapper_subclass_is_refused(tmp_path):
    args = (torch.Tensor, torch.float32, torch.Size([4]), (1,), 0, torch.strided, torch.device("cpu"), False)
    torch.save({"w": R(torch._utils._rebuild_wrapper_subclass, args)}, tmp_path / "wrap.pt")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "wrap.pt")
    one_line(exc, "wrap.pt", "_rebuild_wrapper_subclass")


def test_ordered_dict_with_shadowed_methods_is_refused(tmp_path):
    shadow = {"items": 1, "keys": 1, "values": 1, "get": 1}
    torch.save({"state_dict": R(collections.OrderedDict, (), shadow, {"w": torch.ones(2)})}, tmp_path / "od.pt")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "od.pt")
    one_line(exc, "od.pt", "_metadata")


def test_meta_tensor_in_metadata_is_described(tmp_path):
    torch.save({"state_dict": {"w": torch.ones(2)}, "step": torch.empty((), device="meta")}, tmp_path / "m.pt")
    source = load_checkpoint(tmp_path / "m.pt")
    assert [t.name for t in source.tensors] == ["w"] and "tensor" in str(source.metadata["step"])


# --- one line naming the file ------------------------------------------------------------------


def test_many_digit_integers_are_one_line(tmp_path):
    header = '{"w":{"dtype":"F32","shape":[' + "9" * 5000 + '],"data_offsets":[0,4]}}'
    (tmp_path / "big.safetensors").write_bytes(raw_safetensors(header, bytes(4)))
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "big.safetensors")
    one_line(exc, "big.safetensors", "digits")


@pytest.mark.parametrize("text", ['{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}", "[" * 100_000])
def test_bad_config_json_beside_weights_is_one_line_or_a_note(tmp_path, text):
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": torch.ones(2)}, model / "model.safetensors")
    (model / "config.json").write_text(text)
    source = load_checkpoint(model)  # the weights are read; the note says why there is no model
    assert [t.name for t in source.tensors] == ["w"]
    note = str(source.metadata.get("model"))
    assert note == "None" or ("config.json" in note and "\n" not in note)


def test_deeply_nested_index_is_one_line(tmp_path):
    (tmp_path / "m.safetensors.index.json").write_text("[" * 100_000)
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "m.safetensors.index.json")
    one_line(exc, "index.json", "nested too deeply")


def test_long_double_npz_is_one_line(tmp_path):
    np.savez(tmp_path / "ld.npz", w=np.ones(3, np.longdouble))
    with pytest.raises(CheckpointError) as exc:
        nbinspect.inspect(tmp_path / "ld.npz")
    one_line(exc, "ld.npz", "'w'")


@pytest.mark.parametrize("shard", ["model\0.safetensors", "s" * 5000 + ".safetensors"])
def test_bad_names_in_an_index_are_short_lines(tmp_path, shard):
    save_file({"w": torch.ones(2)}, tmp_path / "model.safetensors")
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"w": shard, "x" * 100_000: shard}})
    )
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "model.safetensors.index.json")
    assert len(one_line(exc, "index.json")) < 600


def test_newline_in_a_file_name_stays_on_one_line(tmp_path, capsys):
    path = tmp_path / "bad\nname.pt"
    path.write_bytes(b"PK\x03\x04garbage")
    assert cli(["inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad\\x0aname.pt" in err


# --- correct answers ---------------------------------------------------------------------------


def test_two_tensors_with_one_name_are_refused(tmp_path):
    torch.save({"a.b": torch.ones(2), "a": {"b": torch.zeros(2)}}, tmp_path / "dup.pt")
    with pytest.raises(CheckpointError) as exc:
        load_checkpoint(tmp_path / "dup.pt")
    one_line(exc, "dup.pt", "'a.b'")


def test_nan_and_inf_compared_with_themselves_are_same(tmp_path):
    save_file(
        {"nan": torch.tensor([1.0, float("nan")]), "inf": torch.tensor([float("inf"), 2.0]), "ok": torch.ones(3)},
        tmp_path / "nan.safetensors",
    )
    result = nbinspect.compare(tmp_path / "nan.safetensors", tmp_path / "nan.safetensors")
    frame = result.frame.set_index("name")
    assert set(frame["status"]) == {"same"}
    assert (frame["rel_change"] == 0).all()


# --- unsupported tensors are named -------------------------------------------------------------


def test_nested_and_sparse_tensors_are_listed_and_named(tmp_path, capsys):
    nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.strided)
    torch.save({"w": torch.ones(2), "nt": nt}, tmp_path / "nested.pt")
    torch.save({"w": torch.nn.Parameter(torch.eye(3).to_sparse()), "b": torch.ones(3)}, tmp_path / "sparse.pt")
    for name, odd, note in (("nested.pt", "nt", "no values"), ("sparse.pt", "w", "implicit zeros")):
        stats = nbinspect.stats(load_checkpoint(tmp_path / name)).set_index("name")
        assert note in str(stats.loc[odd, "note"]), stats  # nested: named, not read; sparse COO: read
        assert cli(["inspect", str(tmp_path / name), "--html", str(tmp_path / f"{name}.html")]) == 0
    assert cli(["compare", str(tmp_path / "sparse.pt"), str(tmp_path / "sparse.pt")]) == 1
    err = capsys.readouterr().err
    assert "sparse.pt" in err and "'w'" in err and err.count("\n") == 1


def test_optimizer_step_never_raises_into_training():
    from nbinspect.track import AnalysisConfig, ModelAnalysisManager

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LazyLinear(2))
    sparse = torch.nn.Module()
    sparse.w = torch.nn.Parameter(torch.eye(3).to_sparse())
    for m in (model, sparse):
        manager = ModelAnalysisManager.create(AnalysisConfig(interval=1))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            results = [manager.on_optimizer_step(m) for _ in range(3)]
        assert all(isinstance(r, dict) for r in results)


# --- the terminal and the user's files ---------------------------------------------------------


def test_control_characters_are_escaped_on_the_terminal(tmp_path, capsys):
    evil = "\x1b[2J\x1b]52;c;cHduZWQ=\x07"
    save_file({f"{evil}layer.weight": torch.ones(2), "ok.bias": torch.ones(2)}, tmp_path / "ctl.safetensors",
              metadata={"note": "\x1b]0;owned\x07", evil: "x"})  # fmt: skip
    assert cli(["inspect", str(tmp_path / "ctl.safetensors"), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\\x1b" in out


def _controls(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0}


def test_python_text_of_a_hostile_file_is_terminal_safe(tmp_path):
    """print() of an Inspection, a Comparison and their reprs, not only the CLI: a file
    named with, and holding names and metadata with, ESC/BEL shows them escaped, each name
    still on its own row."""
    evil = "\x1b[2J\x1b]52;c;cHduZWQ=\x07"
    path = tmp_path / f"{evil}.safetensors"
    save_file({f"{evil}\nlayer.weight": torch.ones(2), "ok.bias": torch.ones(2)}, path,
              metadata={"note": "\x1b]0;owned\x07", evil: "x"})  # fmt: skip
    insp = nbinspect.inspect(path)
    comparison = nbinspect.compare(path, path)
    texts = {
        "summary": insp.summary(depth=None),
        "repr": repr(insp),
        "comparison": str(comparison),
        "comparison repr": repr(comparison),
    }
    for what, text in texts.items():
        assert _controls(text) == set(), what
        assert "\\x1b" in text, what
    rows = [line for line in texts["summary"].split("\n") if "layer" in line]
    assert rows and all("\\x0alayer" in row for row in rows)  # the newline in the name is escaped in place


def test_python_exports_never_overwrite_their_input(tmp_path):
    path = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(2)}, path)
    folder = tmp_path / "ckpt"
    folder.mkdir()
    save_file({"w": torch.zeros(2)}, folder / "model.safetensors")
    before = path.read_bytes(), (folder / "model.safetensors").read_bytes()
    insp, comparison = nbinspect.inspect(path), nbinspect.compare(path, folder)
    for write in (insp.to_json, insp.to_html, insp.to_model_info, comparison.to_json, comparison.to_html):
        with pytest.raises(ValueError, match="is an input"):
            write(path)
    for write in (comparison.to_json, nbinspect.inspect(folder).to_html):
        with pytest.raises(ValueError, match="is an input"):
            write(folder / "report.json")
    assert (path.read_bytes(), (folder / "model.safetensors").read_bytes()) == before
    assert sorted(p.name for p in folder.iterdir()) == ["model.safetensors"]
    insp.to_json(tmp_path / "report.json")  # anywhere else is fine
    assert json.loads((tmp_path / "report.json").read_text())["model"]["name"] == "m.safetensors"


def test_output_files_never_overwrite_the_input_and_dash_is_stdout(tmp_path, capsys):
    path = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(2)}, path)
    before = path.read_bytes()
    for option in ("--json", "--html"):
        assert cli(["inspect", str(path), option, str(path)]) == 1
        assert path.read_bytes() == before
    capsys.readouterr()
    os.chdir(tmp_path)
    assert cli(["inspect", str(path), "--json", "-"]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "-").exists() and '"name"' in out and json.loads(out[out.index("{") :])


def test_output_is_atomic_and_leaves_nothing_on_error(tmp_path, monkeypatch):
    from nbinspect.core import output

    target = tmp_path / "out.json"
    target.write_text("old")

    def boom(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(output.os, "fsync", boom)
    with pytest.raises(KeyboardInterrupt):
        output.write_output(target, "new" * 1000)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]
