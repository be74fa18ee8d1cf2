"""The model_info.json layout: golden records from the format's own examples (with the true
numbers where its examples are wrong), checked against torch's counters."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from tests.support.cli_server import console_script

TOP_LEVEL = [
    "model_name",
    "framework",
    "model_type",
    "parameters",
    "trainable_parameters",
    "input_info",
    "output_info",
    "layers",
]
F32 = "torch.float32"


def _cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(16 * 4 * 4, 10),
    )


def test_linear_record_is_the_formats_example():
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    doc = nbinspect.inspect(model).to_model_info()
    assert list(doc) == TOP_LEVEL
    assert doc["layers"][0] == {
        "layer_index": 0,
        "name": "0",
        "type": "Linear",
        "parameters": 220,
        "trainable": True,
        "parameter_shapes": [[20, 10], [20]],
        "parameter_dtypes": [F32, F32],
        "in_features": 10,
        "out_features": 20,
        "bias": True,
    }
    assert doc["layers"][1] == {
        "layer_index": 1,
        "name": "1",
        "type": "ReLU",
        "parameters": 0,
        "trainable": False,
        "parameter_shapes": [],
        "parameter_dtypes": [],
        "inplace": False,
    }
    assert doc["parameters"] == doc["trainable_parameters"] == 220 + 105


def test_conv_batchnorm_dropout_records_with_true_counts():
    doc = nbinspect.inspect(_cnn(), input=(2, 3, 4, 4)).to_model_info()
    conv, bn, relu, _flatten, dropout, _linear = doc["layers"]
    # The format's example says 432 for Conv2d(3, 16, 3): 16*3*3*3 weights + 16 biases = 448.
    assert conv == {
        "layer_index": 0,
        "name": "0",
        "type": "Conv2d",
        "parameters": 448,
        "trainable": True,
        "parameter_shapes": [[16, 3, 3, 3], [16]],
        "parameter_dtypes": [F32, F32],
        "in_channels": 3,
        "out_channels": 16,
        "kernel_size": [3, 3],
        "stride": [1, 1],
        "padding": [1, 1],
        "bias": True,
    }
    # Running statistics are buffers, listed apart from the 2 * 16 affine parameters.
    assert bn == {
        "layer_index": 1,
        "name": "1",
        "type": "BatchNorm2d",
        "parameters": 32,
        "trainable": True,
        "parameter_shapes": [[16], [16]],
        "parameter_dtypes": [F32, F32],
        "buffer_shapes": [[16], [16], []],
        "buffer_dtypes": [F32, F32, "torch.int64"],
        "num_features": 16,
        "eps": 1e-05,
        "momentum": 0.1,
        "affine": True,
        "track_running_stats": True,
    }
    assert relu["inplace"] is True
    assert {k: dropout[k] for k in ("type", "p", "inplace")} == {"type": "Dropout", "p": 0.25, "inplace": False}
    assert doc["input_info"] == {"shape": [2, 3, 4, 4], "dtype": F32}
    assert doc["output_info"] == {"shape": [2, 10], "dtype": F32}


def test_counts_agree_with_torch_for_every_module(zoo_name):
    model = examples.build(zoo_name)
    doc = nbinspect.inspect(model, stats=False).to_model_info()
    root_owns = any(True for _ in model.parameters(recurse=False)) or any(True for _ in model.buffers(recurse=False))
    modules = [(n, m) for n, m in model.named_modules() if n or root_owns]
    assert [layer["name"] for layer in doc["layers"]] == [n for n, _ in modules]
    assert [layer["layer_index"] for layer in doc["layers"]] == list(range(len(modules)))
    seen: set[int] = set()  # a tied tensor counts at its first owner, in module order
    for layer, (_, module) in zip(doc["layers"], modules):
        own = list(module.parameters(recurse=False))
        first = [p for p in own if id(p) not in seen]
        seen.update(id(p) for p in own)
        assert layer["parameters"] == sum(p.numel() for p in first)
        if list(module.children()):
            assert layer["subtree_parameters"] == sum(p.numel() for p in module.parameters())
        else:
            assert "subtree_parameters" not in layer
        assert layer["trainable"] == any(p.requires_grad for p in module.parameters())
        assert layer["parameter_shapes"] == [list(p.shape) for p in own]
        assert layer["parameter_dtypes"] == [str(p.dtype) for p in own]
        assert layer["type"] == type(module).__name__
    unique = {id(p): p for p in model.parameters()}.values()
    assert doc["parameters"] == sum(p.numel() for p in unique) == sum(r["parameters"] for r in doc["layers"])
    assert doc["trainable_parameters"] == sum(p.numel() for p in unique if p.requires_grad)
    assert doc["model_type"] == type(model).__name__ and doc["framework"] == "torch"


def test_sequential_counts_its_layers_and_untraced_io_is_null():
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 3), nn.Tanh()), nn.Linear(3, 1))
    model[1].requires_grad_(False)
    doc = nbinspect.inspect(model).to_model_info()
    inner = doc["layers"][0]
    # the format's Sequential record: its own parameters (0); the subtree's under another key
    assert inner["type"] == "Sequential" and inner["num_layers"] == 2 and inner["parameters"] == 0
    assert inner["subtree_parameters"] == 9
    assert doc["layers"][3]["trainable"] is False
    assert (doc["parameters"], doc["trainable_parameters"]) == (13, 9)
    assert doc["input_info"] == doc["output_info"] == {"shape": None, "dtype": None}


def test_written_file_is_the_returned_document(tmp_path):
    path = tmp_path / "model_info.json"
    doc = nbinspect.inspect(_cnn()).to_model_info(path)
    assert json.loads(path.read_text()) == doc


def test_command_line_writes_model_info(tmp_path):
    torch.save(_cnn().state_dict(), tmp_path / "cnn.pt")
    out = tmp_path / "model_info.json"
    r = subprocess.run(
        [str(console_script()), "inspect", str(tmp_path / "cnn.pt"), "--model-info", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert list(doc) == TOP_LEVEL and doc["model_name"] == "cnn.pt"
    assert doc["parameters"] == 448 + 32 + 256 * 10 + 10
    conv = next(layer for layer in doc["layers"] if layer["name"] == "0")
    assert conv["parameter_shapes"] == [[16, 3, 3, 3], [16]] and conv["parameters"] == 448


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dtypes_are_written_as_torch_names(dtype):
    doc = nbinspect.inspect(nn.Linear(4, 2).to(dtype)).to_model_info()
    # the root owns its tensors: one record named "" (the root is listed only then)
    assert [(r["name"], r["parameters"], r["parameter_dtypes"]) for r in doc["layers"]] == [("", 10, [str(dtype)] * 2)]
    model = nn.Sequential(nn.Linear(4, 2).to(dtype))
    assert nbinspect.inspect(model).to_model_info()["layers"][0]["parameter_dtypes"] == [str(dtype)] * 2


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos_embed = nn.Parameter(torch.zeros(1, 5, 8))
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.GELU())


def test_root_owned_parameters_get_the_first_record():
    """Issue 26: parameters owned by the root module (cls_token) appeared in no record."""
    doc = nbinspect.inspect(ViT()).to_model_info()
    root = doc["layers"][0]
    assert (root["name"], root["type"], root["layer_index"]) == ("", "ViT", 0)
    assert root["parameter_shapes"] == [[1, 1, 8], [1, 5, 8]] and root["parameters"] == 8 + 40
    assert root["subtree_parameters"] == 48 + 72
    assert sum(r["parameters"] for r in doc["layers"]) == doc["parameters"] == 120


def test_mlx_records_use_mlx_names():
    nn_mlx = pytest.importorskip("mlx.nn")
    doc = nbinspect.inspect(nn_mlx.Sequential(nn_mlx.Linear(10, 20))).to_model_info()
    linear = next(r for r in doc["layers"] if r["type"] == "Linear")
    assert linear["parameter_dtypes"] == ["mlx.core.float32", "mlx.core.float32"]
    assert (linear["in_features"], linear["out_features"], linear["parameters"]) == (10, 20, 220)
    assert "input_dims" not in linear


def test_engine_documents_use_the_formats_names():
    """vLLM documents (built here from synthetic frames, without vLLM): the format's
    input/output types and component keys."""
    import pandas as pd

    from nbinspect.render.model_info_json import model_info_dict

    layers = nbinspect.inspect(nn.Sequential(nn.Linear(2, 2))).layers
    params = nbinspect.inspect(nn.Sequential(nn.Linear(2, 2))).params
    components = pd.DataFrame([{"component": "scheduler", "type": "Scheduler", "detail": "FCFS", "process": "engine"}])
    io = {"input": [{"value": "Hello", "num_tokens": 1}], "output": [{"value": " world", "num_tokens": 1}]}
    totals = {"total_params": 6, "trainable_params": 6, "architecture": "LlamaForCausalLM"}
    doc = model_info_dict("m", "vllm", totals, {"layers": layers, "params": params, "components": components}, io)
    assert doc["input_info"]["type"] == "text_or_sampling_params" and doc["input_info"]["sample_input"] == "Hello"
    assert doc["output_info"]["type"] == "generated_text" and doc["output_info"]["num_outputs"] == 1
    assert doc["components"] == [{"name": "scheduler", "type": "Scheduler", "description": "FCFS", "process": "engine"}]
