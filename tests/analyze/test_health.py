"""Weight health: each flag against a model built to have exactly that problem, counted by hand."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples, schema


def _broken_lm():
    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.blocks[0].attn.qkv.weight[3, 5] = math.nan  # one NaN in one attention weight
        model.blocks[1].mlp[0].weight.zero_()  # a dead layer
        model.blocks[1].mlp[2].weight[0, 0] = math.inf
    return model


def _row(health, name):
    rows = health[health["name"] == name]
    assert len(rows) == 1, name
    return rows.iloc[0]


def test_a_nan_and_a_dead_layer_show_on_the_tensor_and_every_ancestor():
    insp = nbinspect.inspect(_broken_lm())
    health = insp.health
    schema.HEALTH.validate(health)
    qkv = _row(health[health["kind"] == "parameter"], "blocks.0.attn.qkv.weight")
    assert (qkv.nan, qkv.inf, qkv.problems, qkv.problem_tensors) == (1, 0, "NaN", 1)
    fc = _row(health[health["kind"] == "parameter"], "blocks.1.mlp.0.weight")
    assert bool(fc.all_zero) and fc.zeros == 1.0 and fc.problems == "all zero"
    modules = health[health["kind"] == "module"]
    for path in ("", "blocks", "blocks.0", "blocks.0.attn", "blocks.0.attn.qkv"):
        assert "NaN" in _row(modules, path).problems, path
    assert _row(modules, "blocks.0.mlp").problems == ""  # a healthy sibling stays clean
    root = _row(modules, "")
    assert (root.nan, root.inf, root.problem_tensors) == (1, 1, 3)
    assert root.problems == "NaN, Inf, all zero"
    assert insp.problems() == {"NaN": 1, "Inf": 1, "all zero": 1}


def test_healthy_example_models_have_no_problems():
    for name in examples.names():
        insp = nbinspect.inspect(examples.build(name))
        assert insp.problems() == {}, name
        assert (insp.health["problems"] == "").all(), name


def test_biases_and_norm_scales_at_init_are_not_flagged():
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    with torch.no_grad():
        model[0].bias.zero_()
    health = nbinspect.health(model)
    assert (health["problems"] == "").all()


def test_scale_flags_follow_the_thresholds():
    model = nn.Sequential(nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False))
    with torch.no_grad():
        model[0].weight.fill_(0.5)  # constant
        model[1].weight.mul_(1e5)  # exploding at the default 1e3 (kaiming init: |w| up to 1/sqrt(8))
        model[2].weight.mul_(1e-7)  # vanishing at the default 1e-6
    tensors = nbinspect.health(model).set_index("name")
    assert tensors.loc["0.weight", "problems"] == "constant"
    assert tensors.loc["1.weight", "problems"] == "exploding"
    assert tensors.loc["2.weight", "problems"] == "vanishing"
    relaxed = nbinspect.health(model, exploding=1e6, vanishing=1e-9).set_index("name")
    assert relaxed.loc["1.weight", "problems"] == "" and relaxed.loc["2.weight", "problems"] == ""


def test_a_tied_weight_with_a_nan_counts_once():
    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.tok_emb.weight[0, 0] = math.nan  # the head shares it
    insp = nbinspect.inspect(model)
    assert insp.problems() == {"NaN": 1}
    tensors = insp.health[insp.health["kind"] != "module"].set_index("name")
    assert tensors.loc["lm_head.weight", "problems"] == "NaN"  # both paths show the badge
    root = insp.health[(insp.health["kind"] == "module") & (insp.health["name"] == "")].iloc[0]
    assert root.nan == 1 and root.problem_tensors == 1
    lines = str(insp).splitlines()
    start = lines.index(next(line for line in lines if line.startswith("Tensor ")))
    listed = [line.split()[0] for line in lines[start + 1 : lines.index("", start)]]
    assert listed == ["tok_emb.weight"]  # the printed list names the stored tensor once


def test_print_lists_problems_first():
    text = str(nbinspect.inspect(_broken_lm()))
    first = text.splitlines()[3]  # after the heading and its rule
    assert first.startswith("Problems: 1 tensor with NaN; 1 tensor with ±Inf; 1 tensor all zero")
    assert text.index("blocks.0.attn.qkv.weight") < text.index("Summary")


def test_meta_tensors_have_no_flags_and_bad_thresholds_are_refused():
    insp = nbinspect.inspect(examples.build("mlp").to("meta"))
    assert insp.problems() == {} and insp.health["nan"].isna().all()
    with pytest.raises(ValueError, match="exploding=-1"):
        nbinspect.HealthThresholds(exploding=-1)


def test_without_stats_health_says_how_to_get_them():
    insp = nbinspect.inspect(examples.build("mlp"), stats=False)
    assert insp.problems() == {}
    with pytest.raises(ValueError, match="stats=True"):
        insp.health
