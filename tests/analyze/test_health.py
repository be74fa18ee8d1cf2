"""Weight health: each flag against a model built to have exactly that problem, counted by hand."""

from __future__ import annotations

import itertools
import math

import pandas as pd
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


_ORDER = ("NaN", "Inf", "all zero", "constant", "exploding", "vanishing")  # as the document lists them


def _planted(seed: int) -> nn.Module:
    """A random nested model with problems planted at random, and some weights tied."""
    g = torch.Generator().manual_seed(seed)

    def pick(n: int) -> int:
        return int(torch.randint(n, (1,), generator=g))

    def block(depth: int) -> nn.Module:
        if depth == 0 or pick(10) < 3:
            layer = nn.Linear(1 + pick(6), 1 + pick(6), bias=pick(2) == 0)
            with torch.no_grad():
                kind = pick(12)
                if kind == 0:
                    layer.weight[0, 0] = math.nan
                elif kind == 1:
                    layer.weight.zero_()
                elif kind == 2:
                    layer.weight.fill_(2.0)
                elif kind == 3:
                    layer.weight.mul_(1e5)
                elif kind == 4:
                    layer.weight.mul_(1e-8)
                elif kind == 5:
                    layer.weight[-1, -1] = -math.inf
                elif kind == 6 and layer.bias is not None:
                    layer.bias.fill_(math.nan)
            return layer
        seq = nn.Sequential(*(block(depth - 1) for _ in range(1 + pick(3))))
        if pick(4) == 0:
            seq.register_buffer("counts", torch.zeros(3))
        return seq

    model = nn.Sequential(block(4), block(3))
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    for a, b in itertools.pairwise(linears):
        if a.weight.shape == b.weight.shape and pick(2) == 0:
            b.weight = a.weight  # tied: its elements count once, at the first path
    head = nn.Linear(linears[0].in_features, linears[0].out_features)
    head.weight = linears[0].weight  # as a language model's head shares its embedding
    with torch.no_grad():
        head.bias.mul_(1e-8)  # a vector: never vanishing (only matrices are)
    model.append(head)
    return model


def _expected_flags(t: torch.Tensor, parameter: bool, thresholds) -> list[str]:
    """The documented problems of one tensor, from its values in float64."""
    x = t.detach().double().reshape(-1)
    finite = x[torch.isfinite(x)]
    matrix = parameter and t.dim() >= 2 and t.numel() > 0
    largest = finite.abs().max().item() if len(finite) else 0.0
    mean_abs = finite.abs().mean().item() if len(finite) else 0.0
    found = {
        "NaN": bool(torch.isnan(x).any()),
        "Inf": bool(torch.isinf(x).any()),
        "all zero": matrix and bool((x == 0).all()),
        "constant": matrix and len(finite) > 0 and bool((finite == finite[0]).all()) and finite[0].item() != 0,
        "exploding": parameter and len(finite) > 0 and largest > thresholds.exploding,
        "vanishing": matrix and len(finite) > 0 and 0 < mean_abs < thresholds.vanishing,
    }
    return [label for label in _ORDER if found[label]]


@pytest.mark.parametrize("seed", range(12))
def test_every_row_of_random_models_matches_the_values_and_their_subtrees(seed):
    """Each tensor's flags from its own values (float64), and each module row as the sum or
    union over the distinct tensors under its path, tied paths counted once."""
    model = _planted(seed)
    for thresholds in (nbinspect.HealthThresholds(), nbinspect.HealthThresholds(exploding=1.5, vanishing=0.05)):
        health = nbinspect.health(model, **vars(thresholds)).set_index(["kind", "name"])
        distinct: dict[str, tuple[torch.Tensor, bool, list[str]]] = {}
        seen: set[int] = set()
        for path, t in [*model.named_parameters(remove_duplicate=False), *model.named_buffers()]:
            parameter = isinstance(t, nn.Parameter)
            flags = _expected_flags(t, parameter, thresholds)
            row = health.loc[("parameter" if parameter else "buffer", path)]
            assert row.problems == ", ".join(flags), path
            assert (row.nan, row.inf) == (int(torch.isnan(t).sum()), int(torch.isinf(t).sum())), path
            assert row.zeros == pytest.approx(float((t == 0).double().mean()) if t.numel() else math.nan, nan_ok=True)
            if id(t) not in seen:
                seen.add(id(t))
                distinct[path] = (t, parameter, flags)
        for path, _ in model.named_modules():
            under = {p: v for p, v in distinct.items() if path == "" or p.startswith(path + ".")}
            row = health.loc[("module", path)]
            labels = {f for _, _, flags in under.values() for f in flags}
            assert row.problems == ", ".join(x for x in _ORDER if x in labels), path
            assert row.problem_tensors == sum(1 for _, _, flags in under.values() if flags), path
            assert row.numel == sum(t.numel() for t, _, _ in under.values()), path
            nan = sum(int(torch.isnan(t).sum()) for t, _, _ in under.values())
            assert (row.nan == nan) if under else row.nan is pd.NA, path  # no tensors: nothing read
            zeros = sum(int((t == 0).sum()) for t, _, _ in under.values())
            total = sum(t.numel() for t, _, _ in under.values())
            assert row.zeros == pytest.approx(zeros / total if total else math.nan, rel=1e-12, nan_ok=True), path
