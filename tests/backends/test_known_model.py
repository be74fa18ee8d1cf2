"""Checkpoints that know their model: a Lightning-style checkpoint with its hyper_parameters
and recorded class, and folders written by transformers' save_pretrained (one file and
sharded), rebuilt on meta with the file's tensors attached lazily: the same frames as the
live model, weights never fully resident, and what did not match reported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect import examples
from nbinspect.core.tree import UNKNOWN_TYPE
from tests.support import subprocess_env
from tests.support.cli_server import console_script

transformers = pytest.importorskip("transformers")
LIT = """
from torch import nn
from nbinspect.examples import TinyLM


class LitLM(nn.Module):
    '''Stands in for a LightningModule: its constructor arguments are its hyper_parameters.'''

    def __init__(self, vocab_size: int = 256, n_layer: int = 2, lr: float = 1e-3):
        super().__init__()
        self.lr = lr
        self.net = TinyLM(vocab_size=vocab_size, n_layer=n_layer)

    def forward(self, idx):
        return self.net(idx)
"""
HPARAMS = {"vocab_size": 128, "n_layer": 3, "lr": 0.01}


def same_frames(insp: nbinspect.Inspection, live: nbinspect.Inspection) -> None:
    for frame in ("params", "layers", "stats", "stats_by_module", "flow"):
        pd.testing.assert_frame_equal(insp.frames[frame], live.frames[frame], obj=frame)
    assert insp.totals["fake_tensors"] and not live.totals["fake_tensors"]  # traced on meta, against a real run
    assert {**insp.totals, "fake_tensors": False} == live.totals


# --- a Lightning-style training checkpoint ----------------------------------------------------


@pytest.fixture(scope="module")
def lit(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lit")
    (root / "litmodels.py").write_text(LIT)
    sys.path.insert(0, str(root))
    import litmodels

    torch.manual_seed(3)
    model = litmodels.LitLM(**HPARAMS)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.zeros(2, 8, dtype=torch.long)).sum().backward()
    opt.step()
    common = {
        "epoch": 3,
        "global_step": 120,
        "pytorch-lightning_version": "2.4.0",
        "state_dict": model.state_dict(),
        "optimizer_states": [opt.state_dict()],
        "lr_schedulers": [],
        "hparams_name": "kwargs",
    }
    recorded = {
        **HPARAMS,
        "_class_path": "litmodels.LitLM",
        "_instantiator": "lightning.pytorch.cli.instantiate_module",
    }
    torch.save({**common, "hyper_parameters": recorded}, root / "cli.ckpt")  # LightningCLI records the class
    torch.save({**common, "hyper_parameters": dict(HPARAMS)}, root / "plain.ckpt")
    yield root
    sys.path.remove(str(root))


def live_lit(root: Path) -> torch.nn.Module:
    import litmodels

    model = litmodels.LitLM(**HPARAMS)
    model.load_state_dict(torch.load(root / "cli.ckpt", weights_only=True)["state_dict"])
    return model


def test_recorded_class_is_followed_only_when_trusted(lit):
    untrusted = nbinspect.load_checkpoint(lit / "cli.ckpt")
    assert untrusted.model is None and {m.type for m in untrusted.modules} == {UNKNOWN_TYPE}
    assert untrusted.metadata["model"].startswith("the checkpoint names its model 'litmodels:LitLM'")
    assert "pass trust=True (--trust)" in untrusted.metadata["model"]
    assert untrusted.metadata["hyper_parameters"]["n_layer"] == 3  # the config is kept as data
    assert "hyper_parameters" in nbinspect.inspect(untrusted).summary()


def test_lightning_checkpoint_rebuilt_on_meta_has_the_live_models_frames(lit):
    source = nbinspect.load_checkpoint(lit / "cli.ckpt", trust=True)
    assert all(p.is_meta for p in source.model.parameters())  # the weights stay in the file
    report = source.metadata["load_report"]
    assert report.ok and report.loaded == len(live_lit(lit).state_dict())
    assert source.metadata["model"] == "LitLM from 'litmodels:LitLM' with the checkpoint's 'hyper_parameters'"
    insp = nbinspect.inspect(source, input=(2, 16), input_dtype=torch.long)
    live = nbinspect.inspect(live_lit(lit), input=(2, 16), input_dtype=torch.long)
    same_frames(insp, live)
    assert insp.layers.set_index("name").loc["net.blocks.2.attn.qkv", "type"] == "Linear"
    plan = {"input": (2, 16), "input_dtype": torch.long, "batch_size": 8}
    pd.testing.assert_frame_equal(nbinspect.memory(source, **plan), nbinspect.memory(live_lit(lit), **plan))


def test_a_given_factory_takes_the_checkpoints_hyper_parameters(lit):
    source = nbinspect.load_checkpoint(lit / "plain.ckpt", model="litmodels:LitLM")
    assert source.metadata["load_report"].ok  # built with n_layer=3, vocab_size=128 from the file
    for name, value in live_lit(lit).state_dict().items():
        assert torch.equal(source.model.state_dict()[name], value), name


def python_path(*extra: Path) -> str:
    return os.pathsep.join([*map(str, extra), *filter(None, [os.environ.get("PYTHONPATH")])])


def test_command_on_a_lightning_checkpoint(lit):
    r = subprocess.run(
        [str(console_script()), "inspect", "cli.ckpt", "--trust", "--input-shape", "2,16", "--input-dtype", "int64",
         "--batch-size", "4", "--depth", "2"],
        capture_output=True, text=True, cwd=lit, timeout=120, env={**os.environ, "PYTHONPATH": python_path(lit)},
    )  # fmt: skip  # a recorded class is imported from the path, as a trusted pickle's classes are
    assert r.returncode == 0, r.stderr
    assert re.search(r"\n└─ net +TinyLM ", r.stdout)
    assert f"Loaded {len(live_lit(lit).state_dict())} tensors; every key matched" in r.stdout
    assert "at batch 4, measured on fake tensors" in r.stdout and "forward pass:" in r.stdout
    r = subprocess.run([str(console_script()), "inspect", "plain.ckpt", "--model", "litmodels:LitLM"],
                       capture_output=True, text=True, cwd=lit, timeout=120)  # fmt: skip
    assert r.returncode == 0 and "every key matched" in r.stdout, r.stderr


# --- Hugging Face folders -------------------------------------------------------------------


def llama_config(**extra):
    return transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, **extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def hf(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(llama_config()).save_pretrained(root / "llama")
    gpt2 = transformers.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0,
                                   eos_token_id=0)  # fmt: skip
    transformers.GPT2LMHeadModel(gpt2).save_pretrained(root / "gpt2", max_shard_size="60KB")  # tied head, sharded
    return root


@pytest.mark.parametrize(("name", "files"), [("llama", 1), ("gpt2", 8)])
def test_save_pretrained_folder_gives_the_live_models_frames(hf, name, files):
    folder = hf / name
    shards = sorted(folder.glob("*.safetensors"))
    assert len(shards) >= files and (files == 1 or (folder / "model.safetensors.index.json").exists())
    source = nbinspect.load_checkpoint(folder)
    assert all(p.is_meta for p in source.model.parameters())
    assert source.metadata["load_report"].ok and not source.metadata["load_report"].cast
    insp = nbinspect.inspect(folder, input=(2, 16), input_dtype=torch.long)
    live_model = transformers.AutoModelForCausalLM.from_pretrained(folder)
    live = nbinspect.inspect(live_model, name=folder.name, input=(2, 16), input_dtype=torch.long)
    same_frames(insp, live)  # types, attrs, ties, values' statistics, shapes, FLOPs, saved bytes
    plan = {"input": (2, 16), "input_dtype": torch.long, "batch_size": 4, "optimizer": "adamw"}
    pd.testing.assert_frame_equal(nbinspect.memory(folder, **plan), nbinspect.memory(live_model, **plan))
    text = nbinspect.inspect(folder, stats=False).summary()
    assert re.search(rf"\nmodel +{type(live_model).__name__} built from config\.json \(transformers ", text)


def test_what_did_not_match_is_reported(tmp_path, hf):
    torch.manual_seed(1)
    weights = transformers.LlamaForCausalLM(llama_config()).state_dict()
    weights["model.layers.0.mlp.up_proj.weight"] = torch.zeros(80, 64)  # a different intermediate size
    del weights["model.norm.weight"]
    weights["model.extra.bias"] = torch.ones(3)
    save_file(weights, tmp_path / "model.safetensors")
    llama_config(architectures=["LlamaForCausalLM"]).save_pretrained(tmp_path)
    source = nbinspect.load_checkpoint(tmp_path)
    report = source.metadata["load_report"]
    assert report.mismatched == (("model.layers.0.mlp.up_proj.weight", (80, 64), (96, 64)),)
    assert report.missing == ("model.norm.weight",)
    assert report.unexpected == ("model.extra.bias",)
    stats = nbinspect.stats(source).set_index("name")
    assert stats.loc["model.norm.weight", "note"] == "no values: meta tensor"  # left on meta, said so
    assert stats.loc["model.layers.0.mlp.up_proj.weight", "note"] == "no values: meta tensor"
    assert stats.loc["lm_head.weight", "numel"] == 128 * 64


def test_unknown_architecture_falls_back_to_the_untyped_tree_with_one_line(tmp_path, hf):
    (tmp_path / "model.safetensors").write_bytes((hf / "llama" / "model.safetensors").read_bytes())
    config = json.loads((hf / "llama" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "brand-new-arch"}))
    insp = nbinspect.inspect(tmp_path)
    assert set(insp.layers["type"]) == {UNKNOWN_TYPE}
    reason = insp.metadata["model"]
    assert reason.startswith("untyped tree: ") and "does not know model_type 'brand-new-arch'" in reason
    assert "\n" not in reason and reason in insp.summary()
    assert insp.totals["total_params"] == nbinspect.inspect(hf / "llama").totals["total_params"]


def test_command_on_a_folder_and_its_usage_errors(hf, tmp_path):
    r = subprocess.run(
        [str(console_script()), "inspect", str(hf / "gpt2"), "--input-shape", "1,16", "--input-dtype", "int64",
         "--batch-size", "2", "--json", str(tmp_path / "o.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # transformers' config warnings kept quiet
    assert "GPT2LMHeadModel" in r.stdout and "Conv1D" in r.stdout and "Training memory plan" in r.stdout
    memory = json.loads((tmp_path / "o.json").read_text())["memory"]
    assert [r["component"] for r in memory if r["layer"] is None][-1] == "total"
    torch.save(examples.build("mlp").state_dict(), tmp_path / "plain.pt")
    r = subprocess.run([str(console_script()), "inspect", str(tmp_path / "plain.pt"), "--input-shape", "2,32"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 1
    assert r.stderr == "nbinspect: error: " + f"{tmp_path / 'plain.pt'}: a checkpoint without its model cannot run a " \
        "forward pass: pass --model\n"  # fmt: skip


# --- weights never fully resident -----------------------------------------------------------

PEAK = """
import sys, nbinspect, transformers
from tests.support.rss import reset_peak, status

mode, folder = sys.argv[1], sys.argv[2]
nbinspect.inspect(folder, stats=False)  # warm-up: transformers imports its model code lazily (~100 MB)
assert reset_peak()  # the peak (VmHWM) restarts from here: imports' own peak left out
before = status("VmRSS")
if mode == "live":  # the same statistics over the model transformers loads (its pages stay)
    nbinspect.stats(transformers.AutoModelForCausalLM.from_pretrained(folder))
else:
    insp = nbinspect.inspect(folder, stats=mode == "stats")
    if mode == "stats":
        values = insp.totals["total_params"] + insp.totals["buffer_numel"]
        assert insp.stats["mean"].notna().all() and insp.stats["numel"].sum() == values
print(status("VmHWM") - before)
"""


def test_statistics_stream_the_folder_without_holding_the_weights(tmp_path):
    config = transformers.LlamaConfig(
        vocab_size=8000, hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
        max_position_embeddings=128,
    )  # fmt: skip
    with torch.device("meta"):
        size = sum(p.numel() * 4 for p in transformers.LlamaForCausalLM(config).parameters())
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    assert size > 120 * 2**20

    def peak(mode: str) -> int:
        r = subprocess.run([sys.executable, "-c", PEAK, mode, str(tmp_path)], capture_output=True, text=True,
                           timeout=300, env=subprocess_env())  # fmt: skip
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1])

    base, streamed, live = peak("tree"), peak("stats"), peak("live")
    # peak growth after the imports: the tree alone holds next to nothing, the values are what differ
    assert live - base > 0.9 * size  # reading the loaded model holds every value: the measure sees it
    assert streamed - base < 0.35 * size  # statistics over every tensor held a fraction (largest tensor 12%)
