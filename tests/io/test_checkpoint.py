"""Checkpoints as sources: real files written with torch.save / safetensors, checked against
the tensors that were saved (an independent reference), plus the module tree from names."""

from __future__ import annotations

import functools
import json

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file, save_file

import nbinspect
from nbinspect import examples, load_checkpoint
from nbinspect.backends import as_source
from nbinspect.backends.torch.attach import attach
from nbinspect.core.tree import UNKNOWN_TYPE
from nbinspect.io.safetensors_file import FileTensor
from nbinspect.schema import BUFFER, LAYERS, PARAMETER, PARAMS

from ..conftest import assert_unchanged, model_state


def _state(name: str = "tiny_lm", seed: int = 0) -> dict[str, torch.Tensor]:
    return examples.build(name, seed=seed).state_dict()


def _untied(sd: dict) -> dict:
    """safetensors refuses shared storage: a copy of every tensor."""
    return {k: v.clone().contiguous() for k, v in sd.items()}


def _values(source) -> dict[str, torch.Tensor]:
    out = {}
    for t in source.tensors:
        out[t.name] = t.values().clone()
        t.release()
    return out


def _assert_same_tensors(source, reference: dict[str, torch.Tensor]) -> None:
    got = _values(source)
    assert list(got) == list(reference) or sorted(got) == sorted(reference)
    for name, ref in reference.items():
        assert got[name].dtype == ref.dtype and got[name].shape == ref.shape, name
        assert torch.equal(got[name], ref), name


# --- state_dicts in memory ------------------------------------------------------------------


def test_state_dict_tree_matches_the_model_tree():
    model = examples.build("tiny_lm")
    from_model, from_sd = nbinspect.layers(model), nbinspect.layers(model.state_dict())
    LAYERS.validate(from_sd)
    # Modules holding tensors appear in both, in the same pre-order; types are unknown.
    holders = set(nbinspect.params(model)["module"])
    model_paths = [n for n in from_model["name"] if any(h == n or h.startswith(n + ".") or n == "" for h in holders)]
    assert list(from_sd["name"]) == model_paths
    assert set(from_sd["type"]) == {UNKNOWN_TYPE}
    assert all(a == {} for a in from_sd["attrs"])
    merged = from_sd.merge(from_model, on="name", suffixes=("", "_model"))
    assert (merged["params"] == merged["params_model"]).all()


def test_state_dict_counts_tied_storage_once():
    model = examples.build("tiny_lm")
    totals = nbinspect.totals(model.state_dict())
    assert totals["total_params"] == nbinspect.totals(model)["total_params"] == 118_528
    params = nbinspect.params(model.state_dict()).set_index("name")
    assert params.loc["lm_head.weight", "tied_to"] == "tok_emb.weight"


def test_buffers_are_told_by_name_and_dtype():
    model = examples.build("cnn")
    params = nbinspect.params(model.state_dict()).set_index("name")
    PARAMS.validate(params.reset_index())
    assert params.loc["features.1.running_mean", "kind"] == BUFFER
    assert params.loc["features.1.num_batches_tracked", "kind"] == BUFFER
    assert params.loc["features.1.weight", "kind"] == PARAMETER
    truth = nbinspect.totals(model)
    got = nbinspect.totals(model.state_dict())
    for key in ("total_params", "param_bytes", "buffer_bytes", "buffer_numel"):
        assert got[key] == truth[key], key


def test_inspecting_a_state_dict_changes_nothing():
    model = examples.build("cnn")
    before = model_state(model)
    nbinspect.inspect(model.state_dict())
    assert_unchanged(before, model_state(model))


# --- torch.save files ---------------------------------------------------------------------


def test_torch_file_plain_state_dict(tmp_path):
    sd = _state()
    torch.save(sd, tmp_path / "model.pt")
    source = as_source(str(tmp_path / "model.pt"))
    assert source.name == "model.pt" and source.metadata["format"] == "torch"
    _assert_same_tensors(source, sd)
    assert nbinspect.totals(tmp_path / "model.pt")["total_params"] == 118_528  # shared storage survives torch.save


def test_nested_training_checkpoint(tmp_path):
    model = examples.build("mlp")
    opt = torch.optim.Adam(model.parameters(), lr=3e-4)
    model(torch.randn(2, 32)).sum().backward()
    opt.step()
    torch.save(
        {
            "epoch": 7,
            "step": torch.tensor(1234),
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": opt.state_dict(),
            "loss": 0.25,
        },
        tmp_path / "train.pth",
    )
    source = load_checkpoint(tmp_path / "train.pth")
    _assert_same_tensors(source, model.state_dict())  # optimizer moments are not weights
    meta = source.metadata
    assert meta["weights_key"] == "model_state_dict"
    assert meta["epoch"] == 7 and meta["step"] == 1234 and meta["loss"] == 0.25
    moments = 2 * sum(p.numel() * 4 for p in model.parameters()) + 6 * 4  # exp_avg, exp_avg_sq, step per parameter
    assert f"optimizer state: 1 param group(s), 18 tensors, {moments:,} bytes" in meta["optimizer_state_dict"]
    assert "'lr': 0.0003" in meta["optimizer_state_dict"]


@pytest.mark.parametrize("key", ["state_dict", "model", "ema"])
def test_weights_under_other_keys(tmp_path, key):
    sd = _state("mlp")
    torch.save({key: sd, "global_step": 5}, tmp_path / "c.ckpt")
    source = load_checkpoint(tmp_path / "c.ckpt")
    _assert_same_tensors(source, sd)
    assert source.metadata["weights_key"] == key and source.metadata["global_step"] == 5


def test_key_picks_the_ema_weights(tmp_path):
    live, ema = _state("mlp", 0), _state("mlp", 1)
    torch.save({"model": live, "ema": ema}, tmp_path / "c.pt")
    _assert_same_tensors(load_checkpoint(tmp_path / "c.pt"), live)
    _assert_same_tensors(load_checkpoint(tmp_path / "c.pt", key="ema"), ema)
    with pytest.raises(nbinspect.CheckpointError, match=r"c\.pt: no entry 'emma'"):
        load_checkpoint(tmp_path / "c.pt", key="emma")


def test_legacy_torch_format_loads_without_mmap(tmp_path):
    sd = _state("mlp")
    torch.save(sd, tmp_path / "old.bin", _use_new_zipfile_serialization=False)
    _assert_same_tensors(load_checkpoint(tmp_path / "old.bin"), sd)


def test_release_keeps_values_readable(tmp_path):
    sd = _state("mlp")
    torch.save(sd, tmp_path / "m.pt")
    save_file(_untied(sd), tmp_path / "m.safetensors")
    for path in ("m.pt", "m.safetensors"):
        source = load_checkpoint(tmp_path / path)
        for t in source.tensors:
            first = t.values().clone()
            t.release()  # drops the mapped pages; the file is read again on the next access
            assert torch.equal(t.values(), first)
            assert torch.equal(first, sd[t.name])


# --- safetensors ----------------------------------------------------------------------------


def test_safetensors_values_match_the_library(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "model.layers.10.mlp.up_proj.weight": torch.randn(8, 4, generator=g).to(torch.bfloat16),
        "model.layers.2.mlp.up_proj.weight": torch.randn(8, 4, generator=g).half(),
        "model.layers.2.self_attn.q_proj.weight": torch.randn(4, 4, generator=g, dtype=torch.float64),
        "model.embed_tokens.weight": torch.randn(16, 4, generator=g),
        "model.pos_ids": torch.arange(7, dtype=torch.int64),
        "model.mask": torch.tensor([True, False, True]),
        "model.empty": torch.zeros(0, 3),
        "scale": torch.tensor(2.5),
    }
    save_file(tensors, tmp_path / "m.safetensors", metadata={"format": "pt", "note": "hi"})
    reference = load_file(tmp_path / "m.safetensors")
    source = load_checkpoint(tmp_path / "m.safetensors")
    _assert_same_tensors(source, reference)
    names = [t.name for t in source.tensors]
    assert names.index("model.layers.2.mlp.up_proj.weight") < names.index("model.layers.10.mlp.up_proj.weight")
    assert source.metadata["note"] == "hi"
    params = nbinspect.params(tmp_path / "m.safetensors").set_index("name")
    assert params.loc["model.pos_ids", "kind"] == BUFFER and params.loc["model.mask", "kind"] == BUFFER
    assert params.loc["model.layers.10.mlp.up_proj.weight", "dtype"] == "bfloat16"
    assert params.loc["model.layers.10.mlp.up_proj.weight", "bytes"] == 64
    assert params.loc["scale", "module"] == "" and params.loc["scale", "shape"] == ()


def test_header_listing_reads_no_data(tmp_path):
    """A sparse file claiming 6 GiB of data: the listing is exact and never maps the data."""
    path = tmp_path / "huge.safetensors"
    n = 3 * 2**30 // 2  # elements of one 3 GiB fp16... twice
    header = {
        "a.weight": {"dtype": "F16", "shape": [n], "data_offsets": [0, 2 * n]},
        "b.weight": {"dtype": "BF16", "shape": [n // 4, 4], "data_offsets": [2 * n, 4 * n]},
    }
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        f.truncate(8 + len(raw) + 4 * n)  # sparse: no disk, no reads
    source = load_checkpoint(path)
    params = nbinspect.params(source)
    assert list(params["numel"]) == [n, n] and list(params["bytes"]) == [2 * n, 2 * n]
    assert nbinspect.totals(source)["param_bytes"] == 6 * 2**30
    loader = source.tensors[0].tensor
    assert isinstance(loader, FileTensor) and callable(loader)  # values stay behind a loader
    assert not hasattr(loader, "_map") and not hasattr(loader.handle, "_map")  # read with pread, never mapped


def _shard(tmp_path, fmt: str = "safetensors") -> tuple[dict, dict]:
    sd = _untied(_state())
    names = list(sd)
    parts = {f"model-0000{i + 1}-of-00002.{fmt}": names[i::2] for i in range(2)}
    weight_map = {}
    for file, keys in parts.items():
        part = {k: sd[k] for k in keys}
        save_file(part, tmp_path / file) if fmt == "safetensors" else torch.save(part, tmp_path / file)
        weight_map.update(dict.fromkeys(keys, file))
    index = {
        "metadata": {"total_size": sum(v.numel() * v.element_size() for v in sd.values())},
        "weight_map": weight_map,
    }
    (tmp_path / f"model.{fmt}.index.json").write_text(json.dumps(index))
    return sd, index


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_sharded_checkpoint_by_index_and_by_folder(tmp_path, fmt):
    sd, index = _shard(tmp_path, fmt)
    by_index = load_checkpoint(tmp_path / f"model.{fmt}.index.json")
    by_folder = load_checkpoint(tmp_path)
    for source in (by_index, by_folder):
        _assert_same_tensors(source, sd)
        assert source.metadata["format"] == "sharded (2 files)"
        assert source.metadata["total_size"] == index["metadata"]["total_size"]
    pd.testing.assert_frame_equal(nbinspect.layers(by_index), nbinspect.layers(by_folder))


def test_folder_of_one_safetensors_file(tmp_path):
    sd = _untied(_state("mlp"))
    save_file(sd, tmp_path / "model.safetensors")
    _assert_same_tensors(load_checkpoint(tmp_path), sd)


# --- loading into a model class ------------------------------------------------------------


def test_model_class_gets_the_weights_and_a_clean_report(tmp_path):
    sd = _state()
    torch.save({"model_state_dict": sd, "epoch": 3}, tmp_path / "c.pt")
    config = tmp_path / "cfg.yaml"
    config.write_text("vocab_size: 256\nn_layer: 2\n")
    source = load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:TinyLM", config=config)
    model = source.model
    assert isinstance(model, examples.TinyLM)
    for name, value in model.state_dict().items():
        assert torch.equal(value, sd[name]), name
    report = source.metadata["load_report"]
    assert report.ok and report.loaded == len(sd)
    assert source.metadata["epoch"] == 3
    layers = nbinspect.layers(source).set_index("name")
    assert layers.loc["blocks.0.attn.qkv", "type"] == "Linear"  # types are known now


def test_a_tied_weight_saved_once_is_not_reported_missing(tmp_path):
    sd = _state()
    del sd["lm_head.weight"]  # the head is the embedding: a file may keep it once
    torch.save(sd, tmp_path / "c.pt")
    source = load_checkpoint(tmp_path / "c.pt", model=examples.TinyLM, config={"n_layer": 2, "vocab_size": 256})
    report = source.metadata["load_report"]
    assert report.ok and report.missing == () and report.loaded == len(sd)
    assert torch.equal(source.model.lm_head.weight, sd["tok_emb.weight"])


def _reports(path, build) -> tuple:
    """(source, report) of the file loaded into build() (load_into) and attached to build() on meta."""
    loaded = load_checkpoint(path, model=build)
    with torch.device("meta"):
        model = build()
    attached = attach(model, as_source(path))
    return (loaded, loaded.metadata["load_report"]), (attached, attached.metadata["load_report"])


@pytest.mark.parametrize("kept", ["tok_emb.weight", "lm_head.weight"])
def test_both_load_reports_take_a_tie_saved_once_under_either_path(tmp_path, kept):
    sd = _state()
    del sd["lm_head.weight" if kept == "tok_emb.weight" else "tok_emb.weight"]
    torch.save(sd, tmp_path / "c.pt")
    build = functools.partial(examples.TinyLM, n_layer=2, vocab_size=256)
    (loaded, into), (attached, onto) = _reports(tmp_path / "c.pt", build)
    assert into == onto and into.ok and into.loaded == len(sd)
    assert torch.equal(loaded.model.lm_head.weight, sd[kept]) and torch.equal(loaded.model.tok_emb.weight, sd[kept])
    values = {t.name: t for t in attached.tensors}
    for path in ("tok_emb.weight", "lm_head.weight"):
        assert torch.equal(values[path].values(), sd[kept]), path


class _Aliased(torch.nn.Module):
    """A bias also held as a non-persistent buffer (not a state_dict key), and a module extra
    state (a state_dict key that is no path of the module's tensors, as a quantized module's
    packed parameters are)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.register_buffer("alias", self.proj.bias, persistent=False)

    def get_extra_state(self) -> torch.Tensor:
        return torch.arange(3.0)

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.seen = state


def test_only_state_dict_keys_hold_a_tie_in_both_load_reports(tmp_path):
    sd = _Aliased().state_dict()
    sd["alias"] = torch.full((4,), 7.0)  # the file keeps the non-persistent name, not the bias
    del sd["proj.bias"]
    torch.save(sd, tmp_path / "c.pt")
    (loaded, into), (attached, onto) = _reports(tmp_path / "c.pt", _Aliased)
    assert into.missing == onto.missing == ("proj.bias",) and into.unexpected == onto.unexpected == ("alias",)
    assert not torch.equal(loaded.model.proj.bias, sd["alias"])  # load_state_dict skips the name
    values = {t.name: t for t in attached.tensors}
    assert values["alias"].device == values["proj.bias"].device == "meta"  # no values, as the report says
    assert into.loaded == onto.loaded == 2 and torch.equal(loaded.model.seen, torch.arange(3.0))


def test_a_state_dict_key_that_is_no_tensor_path_is_reported_by_its_own_name(tmp_path):
    sd = _Aliased().state_dict()
    del sd["_extra_state"]
    torch.save(sd, tmp_path / "c.pt")
    (_, into), _ = _reports(tmp_path / "c.pt", _Aliased)
    assert into.missing == ("_extra_state",) and into.loaded == 2


def test_load_report_names_missing_unexpected_and_mismatched(tmp_path):
    sd = _state()
    sd["extra.weight"] = torch.ones(2)
    torch.save(sd, tmp_path / "c.pt")
    source = load_checkpoint(tmp_path / "c.pt", model=examples.TinyLM, config={"n_layer": 3, "vocab_size": 128})
    report = source.metadata["load_report"]
    assert not report.ok
    assert "extra.weight" in report.unexpected
    assert set(report.missing) == {k for k in examples.TinyLM(n_layer=3).state_dict() if k.startswith("blocks.2.")}
    assert ("tok_emb.weight", (256, 64), (128, 64)) in report.mismatched
    text = str(report)
    assert "unexpected (ignored): extra.weight" in text and "shape mismatch" in text and "tok_emb.weight" in text


def test_bad_model_spec_and_config_are_clear(tmp_path):
    torch.save(_state("mlp"), tmp_path / "c.pt")
    with pytest.raises(ValueError, match="expected 'package.module:factory'"):
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples.MLP")
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:Nope")
    (tmp_path / "bad.yaml").write_text("n_layer: [1, 2\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: not valid YAML \(while parsing"):
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:MLP", config=tmp_path / "bad.yaml")
    (tmp_path / "cfg.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="cfg.yaml: config must be a mapping"):
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:MLP", config=tmp_path / "cfg.yaml")
    with pytest.raises(ValueError, match=r"^config: MLP does not take 'bogus'$"):  # named before the factory runs
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:MLP", config={"bogus": 1})
    with pytest.raises(ValueError, match=r"'MLP'\(\{'hidden': \('a',\)\}\) failed: TypeError"):
        load_checkpoint(tmp_path / "c.pt", model="nbinspect.examples:MLP", config={"hidden": ("a",)})


def test_skeleton_gives_the_memory_plan_of_the_real_model(tmp_path):
    from nbinspect.backends.torch.skeleton import skeleton

    model = examples.build("tiny_lm")
    torch.save(model.state_dict(), tmp_path / "m.pt")
    stand_in = skeleton(load_checkpoint(tmp_path / "m.pt"))
    assert all(p.device.type == "meta" for p in stand_in.parameters())
    assert stand_in.get_submodule("lm_head").weight is stand_in.get_submodule("tok_emb").weight  # tie kept
    plan, truth = nbinspect.memory(stand_in, optimizer="adamw"), nbinspect.memory(model, optimizer="adamw")
    whole = ["component", "bytes"]
    pd.testing.assert_frame_equal(plan[plan["layer"].isna()][whole], truth[truth["layer"].isna()][whole])


def test_summary_of_a_training_checkpoint_shows_its_metadata(tmp_path):
    from nbinspect import examples

    model = examples.build("mlp")
    path = tmp_path / "train.pt"
    torch.save({"model_state_dict": model.state_dict(), "epoch": 7, "optimizer": {"lr": 1e-3}}, path)
    insp = nbinspect.inspect(path)
    assert insp.metadata["epoch"] == 7
    text = insp.summary()
    assert "Checkpoint" in text and "epoch         7" in text
    assert insp.metadata["optimizer"] == {"lr": 1e-3}  # plain data beside the weights is kept as data
    assert "optimizer.lr  0.001" in text  # and shown in full, one row per value
    assert "Parameters by module type" not in text  # every type is unknown without the class
    assert "Parameters by module type" in nbinspect.inspect(model).summary()


def _quantized_mlp(seed: int, per_channel: bool = False) -> torch.nn.Module:
    import warnings

    with warnings.catch_warnings():  # torch.ao.quantization is deprecated, and says so
        warnings.simplefilter("ignore")
        from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
        qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
        return quantize_dynamic(model, {torch.nn.Linear: qconfig})


@pytest.mark.parametrize("per_channel", [False, True])
def test_quantized_linear_file_shows_its_packed_weights_as_the_live_model_does(tmp_path, per_channel):
    """A quantized Linear saves weight and bias as one tuple: the file's source names and
    sizes them as the live module's source does (per-channel scales counted in the bytes)."""
    model = _quantized_mlp(0, per_channel)
    path = tmp_path / "q.pt"
    torch.save(model.state_dict(), path)
    live = nbinspect.params(model).set_index("name")
    saved = nbinspect.params(path).set_index("name")
    for name in live.index:
        for column in ("shape", "dtype", "numel", "bytes", "kind", "requires_grad"):
            assert saved.loc[name, column] == live.loc[name, column], (name, column)
    # the scale and zero point saved beside them are settings, not parameters: the totals agree
    live_totals, saved_totals = nbinspect.totals(model), nbinspect.totals(path)
    for key in ("total_params", "trainable_params", "param_bytes"):
        assert saved_totals[key] == live_totals[key], key
    # the weights' own count, from torch: every packed pair is there
    packed = [
        m._weight_bias() for m in model.modules() if isinstance(vars(m).get("_packed_params"), torch.ScriptObject)
    ]
    assert sum(saved.loc[n, "numel"] for n in live.index) == sum(w.numel() + b.numel() for w, b in packed)


def test_quantized_linear_checkpoint_loads_into_its_model(tmp_path):
    original = _quantized_mlp(0)
    path = tmp_path / "q.pt"
    torch.save(original.state_dict(), path)
    source = load_checkpoint(path, model=functools.partial(_quantized_mlp, 1))  # other weights until loaded
    assert source.metadata["load_report"].missing == ()
    assert source.metadata["load_report"].unexpected == ()
    for loaded, saved in zip(source.model.modules(), original.modules()):
        if isinstance(vars(saved).get("_packed_params"), torch.ScriptObject):
            (w, b), (w0, b0) = loaded._weight_bias(), saved._weight_bias()
            assert torch.equal(w.int_repr(), w0.int_repr()) and w.q_scale() == w0.q_scale()
            assert torch.equal(b, b0)
