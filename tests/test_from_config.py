"""A model from its config alone: built on meta, planned, and checked against the same
model built for real; the Python API, the command line and the magic; each error path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import nbinspect
from nbinspect.backends.torch.hf_config import UnknownArchitecture
from nbinspect.errors import UnsafeCheckpointError
from tests.support.cli_server import console_script

MODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    """Embedding, `depth` residual MLP blocks with LayerNorm and dropout, a head: the
    parameter count is easy to write down by hand."""

    def __init__(self, vocab: int, width: int, depth: int = 2, classes: int = 10, dropout: float = 0.1):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width),
                          nn.Dropout(dropout))
            for _ in range(depth)
        )
        self.head = nn.Linear(width, classes)
        self.register_buffer("scale", torch.full((width,), 0.5))  # a computed buffer: stays real on meta

    def forward(self, ids):
        x = self.emb(ids) * self.scale
        for block in self.blocks:
            x = x + block(x)
        return self.head(x.mean(1))


def build(**config):
    return Net(**config)
'''
CONFIG = "vocab: 100\nwidth: 32\ndepth: 3\nclasses: 7\n"


def hand_count(vocab: int, width: int, depth: int, classes: int) -> int:
    block = 2 * width + (width * 4 * width + 4 * width) + (4 * width * width + width)
    return vocab * width + depth * block + width * classes + classes


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("from_config")
    (root / "cfgmodels.py").write_text(MODELS)
    (root / "cfg.yaml").write_text(CONFIG)
    (root / "target.yaml").write_text("_target_: cfgmodels.Net\n" + CONFIG)
    (root / "bogus.yaml").write_text(CONFIG + "widht: 3\nheads: 2\n")
    (root / "bad.yaml").write_text("vocab: [1, 2\n")
    (root / "anonymous.yaml").write_text(CONFIG)
    sys.path.insert(0, str(root))
    yield root
    sys.path.remove(str(root))


def real_model():
    import cfgmodels

    torch.manual_seed(0)
    return cfgmodels.build(vocab=100, width=32, depth=3, classes=7)


def test_planned_on_meta_equals_the_model_built_for_real(folder):
    plan = {"input": (4, 12), "input_dtype": torch.long, "batch_size": 16, "optimizer": "adamw"}
    insp = nbinspect.from_config("cfgmodels:build", folder / "cfg.yaml", **plan)
    model = real_model()
    real = nbinspect.inspect(model, input=(4, 12), input_dtype=torch.long, stats=False)
    real_plan = nbinspect.memory(model, **plan)

    assert insp.totals["total_params"] == hand_count(100, 32, 3, 7) == real.totals["total_params"]
    meta = nbinspect.build_on_meta("cfgmodels:build", folder / "cfg.yaml")
    assert all(p.is_meta for p in meta.parameters())  # no weights allocated
    assert torch.equal(meta.scale, torch.full((32,), 0.5))  # buffers computed at construction are real
    pd.testing.assert_frame_equal(insp.layers, real.layers)  # types, attrs, counts, shapes, FLOPs, saved bytes
    pd.testing.assert_frame_equal(insp.frames["flow"], real.frames["flow"])
    params = insp.params
    assert set(params.loc[params["kind"] == "parameter", "device"]) == {"meta"}
    pd.testing.assert_frame_equal(params.drop(columns="device"), real.params.drop(columns="device"))
    assert insp.totals["flops"] == real.totals["flops"] > 0
    pd.testing.assert_frame_equal(insp.memory, real_plan)
    total = insp.memory.set_index("component").loc["total"]
    assert total["bytes"] == real_plan.loc[real_plan["component"] == "total", "bytes"].item()
    # parameters, gradients, AdamW's two moments and one float32 step per tensor: by hand
    n, tensors = hand_count(100, 32, 3, 7), sum(1 for _ in model.parameters())
    whole = insp.memory[insp.memory["layer"].isna()].set_index("component")["bytes"]
    assert whole["parameters"] == whole["gradients"] == 4 * n
    assert whole["optimizer_state"] == 8 * n + 4 * tensors


def test_a_config_naming_its_factory_and_a_dict_config(folder):
    with pytest.raises(UnsafeCheckpointError, match=r"target\.yaml: names its factory 'cfgmodels:Net'.*trust=True"):
        nbinspect.from_config(config=folder / "target.yaml")  # a file naming code: the user opts in (issue 25)
    from_file = nbinspect.from_config(config=folder / "target.yaml", trust=True)
    from_dict = nbinspect.from_config("cfgmodels:Net", {"vocab": 100, "width": 32, "depth": 3, "classes": 7})
    assert from_file.totals["total_params"] == from_dict.totals["total_params"] == hand_count(100, 32, 3, 7)
    assert from_file.metadata["model"] == "Net with target.yaml, parameters on meta"
    assert "activations" in str(from_file.memory) and "not measured: no input to trace" in str(from_file.memory)


def test_hf_config_json_alone_sizes_the_transformers_model(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, architectures=["LlamaForCausalLM"],
    )  # fmt: skip
    config.save_pretrained(tmp_path)
    insp = nbinspect.from_config(config=tmp_path / "config.json", input=(1, 16), input_dtype=torch.long, batch_size=2)
    live = transformers.LlamaForCausalLM(transformers.AutoConfig.from_pretrained(tmp_path)).eval()
    real = nbinspect.inspect(live, input=(1, 16), input_dtype=torch.long, stats=False)
    assert insp.totals["total_params"] == sum(p.numel() for p in live.parameters())
    assert insp.totals["flops"] == real.totals["flops"] > 0
    pd.testing.assert_frame_equal(insp.layers, real.layers)


@pytest.mark.parametrize(
    ("model", "config", "message"),
    [
        ("cfgmodels:Net", "bogus.yaml", "bogus.yaml: Net does not take 'widht', 'heads'"),
        ("cfgmodels:build", "bogus.yaml", "bogus.yaml: build does not take 'widht' (Net.__init__() got an"),
        ("cfgmodels:Net", {"width": 4}, "config: Net needs 'vocab', which the config does not give"),
        ("cfgmodels:build", "bad.yaml", r"bad.yaml: not valid YAML (while parsing"),
        ("cfgmodels:build", "missing.yaml", "missing.yaml: cannot open (No such file or directory)"),
        ("nosuchpkg.models:build", "cfg.yaml", "model 'nosuchpkg.models:build': cannot import 'nosuchpkg.models'"),
        ("cfgmodels:nope", "cfg.yaml", "model 'cfgmodels:nope': 'cfgmodels' has no attribute 'nope'"),
        (None, "anonymous.yaml", "anonymous.yaml: names no model (no _target_, _class_path or class_path"),
    ],
)
def test_errors_name_what_and_where(folder, model, config, message):
    config = folder / config if isinstance(config, str) else config
    with pytest.raises(ValueError) as info:
        nbinspect.from_config(model, config)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_architecture_alone_is_one_line(tmp_path):
    pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-arch", "hidden_size": 8}))
    with pytest.raises(
        UnknownArchitecture, match=r"config\.json: transformers .* does not know model_type 'no-such-arch'$"
    ):
        nbinspect.from_config(config=tmp_path / "config.json")


# --- the command line and the magic ---------------------------------------------------------


def run(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(console_script()), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_command_sizes_a_model_from_its_config(folder, tmp_path):
    r = run(
        "inspect", "--model", "cfgmodels:build", "--config", "cfg.yaml", "--input-shape", "4,12",
        "--input-dtype", "int64", "--batch-size", "16", "--optimizer", "adamw",
        "--json", tmp_path / "o.json", "--html", tmp_path / "o.html", cwd=folder,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    expected = nbinspect.from_config(
        "cfgmodels:build", folder / "cfg.yaml", input=(4, 12), input_dtype=torch.long, batch_size=16, optimizer="adamw"
    )
    out = r.stdout
    assert out.startswith("Net (torch)\n")
    assert re.search(rf"\nParameters +{hand_count(100, 32, 3, 7):,}  112.0 KiB\n", out)
    assert re.search(r"\nmodel +build with cfg.yaml, parameters on meta\n", out)
    assert re.search(r"\nconfig\.\w+ +\S", out)  # the keyword arguments used, one row each (issue 26)
    assert str(expected.memory) in out  # the plan with its total
    assert "at batch 16, measured on fake tensors" in out
    calls = len(expected.frames["flow"])
    assert calls == 1 + 1 + 3 * (1 + 5) + 1  # Net, emb, each block and its five layers, head
    assert f"Net forward pass: {calls} module calls" in out and "├─ blocks.0" in out
    doc = json.loads((tmp_path / "o.json").read_text())
    jsonschema.validate(doc, nbinspect.json_schema())
    total = next(r for r in doc["memory"] if r["component"] == "total" and r["layer"] is None)
    assert total["bytes"] == expected.memory.set_index("component").loc["total", "bytes"]
    page = (tmp_path / "o.html").read_text()
    assert "Training memory plan" in page and f"forward pass: {calls} module calls" in page


def test_command_verbose_shows_every_module(folder):
    r = run("inspect", "--model", "cfgmodels:build", "--config", "cfg.yaml", "--verbose", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert "Layers (all levels)" in r.stdout
    held = 1 + 1 + 1 + 3 * 3  # the root's buffer, emb, head, each block's LayerNorm and two Linears
    assert f"Memory by module ({held})" in r.stdout
    assert "blocks.2.3" in r.stdout.split("Memory by module")[1]  # not cut at the top 10
    assert "Tensors (" in r.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--model", "nosuchpkg.models:build", "--config", "cfg.yaml"], 1, "cannot import 'nosuchpkg.models'"),
        (["--model", "cfgmodels:build", "--config", "bad.yaml"], 1, "bad.yaml: not valid YAML"),
        (["--model", "cfgmodels:Net", "--config", "bogus.yaml"], 1, "Net does not take 'widht', 'heads'"),
        ([], 2, "give a checkpoint path, or --model"),
    ],
)
def test_command_errors(folder, args, code, message):
    r = run("inspect", *args, cwd=folder)
    assert r.returncode == code
    assert message in r.stderr
    if code == 1:
        assert r.stderr.count("\n") == 1 and r.stdout == ""


def test_magic_sizes_a_model_from_its_config(folder, capsys):
    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "nbinspect")
        insp = shell.run_line_magic(
            "inspect_model", f"--model cfgmodels:build --config {folder / 'cfg.yaml'} --input-shape 4,12 "
            "--dtype int64 --batch-size 16 --text"
        )  # fmt: skip
        assert insp.totals["total_params"] == hand_count(100, 32, 3, 7)
        out = capsys.readouterr().out
        assert "Training memory plan" in out and "at batch 16" in out
        shell.run_cell("import cfgmodels; kw = dict(vocab=10, width=8, depth=1, classes=2)")
        insp = shell.run_line_magic("inspect_model", "--model cfgmodels.Net --config kw --text")
        assert insp.totals["total_params"] == hand_count(10, 8, 1, 2)
        with pytest.raises(UsageError, match="give a model expression, or --model/--config"):
            shell.run_line_magic("inspect_model", "--text")
        with pytest.raises(UsageError, match=r"bogus\.yaml: Net does not take 'widht', 'heads'"):
            shell.run_line_magic("inspect_model", f"--model cfgmodels:Net --config {folder / 'bogus.yaml'}")
    finally:
        InteractiveShell.clear_instance()


# ---------------------------------------------------------------- issue 26: a project's nested config


def _nested(tmp_path, target: bool = True):
    import yaml

    model = {"in_features": 4, "out_features": 3}
    if target:
        model["_target_"] = "torch.nn.Linear"
    data = {"model": model, "data": {"path": "x.h5", "batch_size": 8}, "training": {"lr": 1e-3}}
    path = tmp_path / ("default.yaml" if target else "plain.yaml")
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_nested_config_section_is_found(tmp_path):
    from nbinspect.config_inspection import from_config

    insp = from_config(config=_nested(tmp_path), trust=True)  # the file names its factory: issue 25
    assert insp.totals["total_params"] == 4 * 3 + 3
    assert "section 'model'" in insp.metadata["model"]
    assert insp.metadata["config"] == {"in_features": 4, "out_features": 3}
    plain = from_config("torch.nn:Linear", _nested(tmp_path, target=False))
    assert plain.totals["total_params"] == 15
    keyed = from_config("torch.nn:Linear", _nested(tmp_path, target=False), config_key="model")
    assert keyed.totals["total_params"] == 15


def test_a_nested_config_names_what_is_wrong(tmp_path):
    import yaml

    from nbinspect.backends.torch.model_loader import select_section
    from nbinspect.config_inspection import from_config

    with pytest.raises(ValueError, match=r"no section 'modle' \(its keys: data, model, training\)"):
        from_config("torch.nn:Linear", _nested(tmp_path, target=False), config_key="modle")
    two = {"teacher": {"in_features": 2, "out_features": 2}, "student": {"in_features": 2, "out_features": 1}}
    with pytest.raises(ValueError, match="choose one with --config-key"):
        select_section(two, torch.nn.Linear, None, "two.yaml")
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(two), encoding="utf-8")
    assert from_config("torch.nn:Linear", path, config_key="student").totals["total_params"] == 3


def test_precision_says_what_is_stored_in_which_dtype():
    """Issue 26: 'parameters in amp-bf16' sat on fp32 bytes."""
    model = torch.nn.Linear(10, 10)
    for precision, size, words in (("amp-bf16", 4, ("float32", "bfloat16")), ("bf16", 2, ("bfloat16",))):
        plan = nbinspect.memory(model, precision=precision)
        row = plan[plan["layer"].isna()].set_index("component").loc["parameters"]
        assert row["bytes"] == size * 110
        assert all(w in row["note"] for w in words), row["note"]
