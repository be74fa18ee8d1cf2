"""dump_model_info: the print-style report and its numbers (seed 000's document; its code
blocks run as written in tests/docs/test_seed_000_dump_model_info.py)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.model_info import DEFAULT_PLOT_PATH, LayerInfo


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))


class ViT(nn.Module):
    """Parameters on a non-leaf module (the root): cls_token, pos_embed; and attention's
    in_proj_weight on nn.MultiheadAttention."""

    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos_embed = nn.Parameter(torch.zeros(1, 5, 8))
        self.attn = nn.MultiheadAttention(8, 2)
        self.norm = nn.BatchNorm1d(8)
        self.head = nn.Linear(8, 3)


def test_numbers_match_totals(zoo_name):
    model = examples.build(zoo_name)
    info = nbinspect.dump_model_info(model, logger=logging.getLogger("quiet"), plot_distributions=False)
    t = nbinspect.totals(model)
    assert (info.total_params, info.trainable_params, info.non_trainable_params) == (
        t["total_params"],
        t["trainable_params"],
        t["non_trainable_params"],
    )
    assert info.total_memory_mb == (t["param_bytes"] + t["buffer_bytes"]) / 2**20
    # every parameter appears, each tensor once (a tied alias listed and flagged)
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert sorted(layer.name for layer in info.layers) == sorted(names)
    assert sum(layer.num_params for layer in info.layers if layer.tied_to is None) == info.total_params
    assert info.num_layers == len(info.layers) and info.errors == []


def test_layers_are_parameter_records():
    model = _mlp()
    info = nbinspect.dump_model_info(model, plot_distributions=False)
    assert [layer.name for layer in info.layers] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    w = info.layers[0]
    assert isinstance(w, LayerInfo) and w.shape == (512, 256) and w.num_params == 131_072
    assert w.memory_mb == 0.5 and w.requires_grad and w.module == "0" and w.module_type == "Linear"
    ref = model[0].weight.detach().double()
    assert w.mean == pytest.approx(float(ref.mean()), rel=1e-6)
    assert w.std == pytest.approx(float(ref.std()), rel=1e-5)
    assert (w.min, w.max) == (float(ref.min()), float(ref.max()))
    assert dataclasses.asdict(w) == w.to_dict() and w.to_dict()["num_params"] == 131_072
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.num_params = 1  # type: ignore[misc]
    # the document's programmatic examples
    largest = max(info.layers, key=lambda layer: layer.num_params)
    assert largest.name == "0.weight"
    assert info.weight_stats[0]["name"] == "0.weight"


def test_every_parameter_appears():
    """Issue 26: a ViT's cls_token/pos_embed vanished (the layers summed to 1,898 of 2,474)."""
    model = ViT()
    info = nbinspect.dump_model_info(model, plot_distributions=False)
    names = {layer.name for layer in info.layers}
    assert {"cls_token", "pos_embed", "attn.in_proj_weight"} <= names
    assert names == {n for n, _ in model.named_parameters()}
    assert (
        sum(layer.num_params for layer in info.layers)
        == info.total_params
        == sum(p.numel() for p in model.parameters())
    )
    root = next(layer for layer in info.layers if layer.name == "cls_token")
    assert root.module == "" and root.shape == (1, 1, 8)
    # BatchNorm's running statistics are buffers: listed apart, never counted as parameters
    assert {b.name for b in info.buffers} == {"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"}


def test_tied_parameters_are_listed_and_counted_once():
    model = examples.build("tiny_lm")
    info = nbinspect.dump_model_info(model, plot_distributions=False)
    tied = [layer for layer in info.layers if layer.tied_to]
    assert tied, "tiny_lm ties its head to the embedding"
    assert sum(layer.num_params for layer in info.layers if not layer.tied_to) == info.total_params


def test_report_layout(capsys):
    nbinspect.dump_model_info(_mlp(), plot_distributions=False)
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["=" * 60, "SUMMARY", "=" * 60]
    text = "\n".join(out)
    for line in (
        "  Total parameters:     262,912",
        "  Trainable params:     262,912",
        "  Non-trainable params: 0",
        "  Total memory:         1.00 MiB",
        "  Total layers:         4",
    ):
        assert line in out, line
    assert "Layer Name                               Shape                Params            Memory  Grad" in out
    assert "0.weight                                 (512, 256)           131,072         0.50 MiB     ✓" in out
    assert "0.bias                                   (512,)               512             0.00 MiB     ✓" in out
    assert "WEIGHT STATISTICS" in text and "Layer                                            Mean" in text
    assert "Distribution plot" not in text


def test_frozen_rows_marked(capsys):
    model = _mlp()
    model[0].requires_grad_(False)
    info = nbinspect.dump_model_info(model, plot_distributions=False)
    out = capsys.readouterr().out
    assert [layer.requires_grad for layer in info.layers] == [False, False, True, True]
    assert info.non_trainable_params == 131_072 + 512
    rows = {ln.split()[0]: ln.split()[-1] for ln in out.splitlines() if ln[:1] in "02" and "MiB" in ln}
    assert rows == {"0.weight": "✗", "0.bias": "✗", "2.weight": "✓", "2.bias": "✓"}


def test_every_log_line_has_the_prefix(caplog, tmp_path, monkeypatch):
    """Issue 26: '====\\nSUMMARY\\n====' was one record, so lines 2-3 lost the logger's prefix."""
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="report"):
        nbinspect.dump_model_info(_mlp(), logger=logging.getLogger("report"), plot_distributions=False)
    messages = [r.getMessage() for r in caplog.records]
    assert messages and not any("\n" in m for m in messages)
    assert "SUMMARY" in messages and "LAYER DETAILS" in messages and "WEIGHT STATISTICS" in messages


def test_plot_default_path(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    info = nbinspect.dump_model_info(_mlp(), logger=logging.getLogger("quiet"))
    assert info.plot_path == DEFAULT_PLOT_PATH and (tmp_path / DEFAULT_PLOT_PATH).stat().st_size > 0
    (tmp_path / DEFAULT_PLOT_PATH).unlink()
    nbinspect.dump_model_info(_mlp(), logger=logging.getLogger("quiet"), plot_distributions=False)
    assert not (tmp_path / DEFAULT_PLOT_PATH).exists()
    info = nbinspect.dump_model_info(_mlp(), logger=logging.getLogger("quiet"), save_path=tmp_path / "a.png")
    assert (tmp_path / "a.png").exists() and info.plot_path == str(tmp_path / "a.png")


def test_odd_input_is_logged_not_raised(caplog):
    with caplog.at_level(logging.ERROR, logger="report"):
        info = nbinspect.dump_model_info("not a model", logger=logging.getLogger("report"))
    assert info.total_params == 0 and len(info.errors) == 1
    assert "could not inspect str" in caplog.text


def test_unwritable_plot_path_is_reported_not_raised(tmp_path):
    pytest.importorskip("matplotlib")
    info = nbinspect.dump_model_info(_mlp(), save_path=tmp_path / "missing" / "dir" / "x.png")
    assert info.total_params == 262_912 and any("plot failed" in e for e in info.errors)


def test_document_000_arithmetic():
    """The document's SUMMARY for Sequential(Linear(256,512), ReLU, Linear(512,256)) says
    263,936 parameters, 1.01 MB and 6 layers; its own LAYER DETAILS rows give 262,912
    (131,072 + 512 + 131,072 + 256), 1,051,648 bytes = 1.00 MiB, and 4 parameter tensors."""
    info = nbinspect.dump_model_info(_mlp(), plot_distributions=False)
    assert info.total_params == 131_072 + 512 + 131_072 + 256 == 262_912 != 263_936
    assert round(info.total_memory_mb, 2) == 1.00 and 262_912 * 4 == 1_051_648
    assert info.num_layers == 4 != 6
