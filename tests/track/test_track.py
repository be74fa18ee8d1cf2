"""nbinspect.track: snapshots, deltas and metrics against float64 hand computations, the
manager's lifecycle, restoring the model exactly, and failures that never stop training."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.schema import COMPARE, TRACK_HISTORY
from nbinspect.track import (
    ActivationMetrics,
    AnalysisConfig,
    AnalysisContext,
    GradientMetrics,
    MetricComputer,
    ModelAnalysisManager,
    OptimizerStateMetrics,
    ParameterChangeMetrics,
    ParameterDelta,
    ParameterSnapshot,
    SparseQualityMetrics,
    TrackingWarning,
)

THRESHOLDS = (1e-8, 1e-6, 1e-4)


@pytest.fixture(params=["torch", "fused"])
def path(request, monkeypatch):
    """Each delta test runs on both paths: the torch one and the fused kernel (forced here
    for small models; a tracker uses it from fused.LOADED_ABOVE bytes when numba loads)."""
    from nbinspect.analyze import fused

    if request.param == "fused":
        pytest.importorskip("numba")
        monkeypatch.setattr(fused, "FUSED_ABOVE", 0)
        monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    else:
        monkeypatch.setattr(fused, "kernels", lambda nbytes, recurring=False: None)
    return request.param


class Layered(nn.Module):
    """Two numbered layers with q/k projections and an MLP, plus an embedding and a head."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.embed = nn.Embedding(10, width)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"q_proj": nn.Linear(width, width), "up_proj": nn.Linear(width, width)}) for _ in range(2)
        )
        self.head = nn.Linear(width, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for layer in self.layers:
            h = h + torch.relu(layer["up_proj"](layer["q_proj"](h)))
        return self.head(h)


def _seeded(model_cls=Layered, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return model_cls()


def _move(model: nn.Module, seed: int = 1) -> dict[str, torch.Tensor]:
    """Add a known change to every parameter: magnitudes on both sides of each threshold."""
    g = torch.Generator().manual_seed(seed)
    choices = torch.tensor([0.0, 3e-7, 4e-5, 2e-3, -5e-3])
    with torch.no_grad():
        for p in model.parameters():
            p.add_(choices[torch.randint(0, len(choices), p.shape, generator=g)])
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _reference(old: ParameterSnapshot, model: nn.Module) -> dict[str, np.ndarray]:
    return {
        n: p.detach().double().numpy().ravel() - old.tensors[n].double().numpy() for n, p in model.named_parameters()
    }


# ---------------------------------------------------------------- snapshot


def test_snapshot_is_a_copy_that_cannot_change():
    model = _seeded()
    snap = ParameterSnapshot.take(model, step=3)
    assert snap.step == 3 and snap.names == [n for n, _ in model.named_parameters()]
    w = model.head.weight
    assert snap["head.weight"].data_ptr() != w.data_ptr()
    before = snap["head.weight"].clone()
    with torch.no_grad():
        w.add_(1.0)
    assert torch.equal(snap["head.weight"], before)  # the model moved, the snapshot did not
    assert snap.norms_sq["head.weight"] == pytest.approx(float((before.double() ** 2).sum()), rel=1e-6)


@pytest.mark.parametrize(
    "write",
    [
        lambda t: t.add_(1.0),
        lambda t: t.copy_(torch.ones_like(t)),
        lambda t: t.data.add_(1.0),
        lambda t: t.mul_(2.0),
    ],
    ids=["add_", "copy_", "data.add_", "mul_"],
)
@pytest.mark.parametrize("how", ["getitem", "tensors"])
def test_a_write_into_what_the_snapshot_hands_out_changes_nothing(write, how):
    """Issue 26: add_/copy_ raised and still wrote, .data.add_ wrote silently, and the next
    delta came out 0.99 instead of 0.01. Now every access hands out a copy."""
    model = _seeded()
    snap = ParameterSnapshot.take(model)
    name = "head.weight"
    before = snap[name].clone()
    write(snap[name] if how == "getitem" else snap.tensors[name])
    assert torch.equal(snap[name], before)
    with torch.no_grad():
        model.get_parameter(name).add_(0.01)
    delta = ParameterDelta.between(snap, model)
    expected = (model.get_parameter(name).detach().double() - before.double()).abs().max()
    assert delta.max_abs == pytest.approx(float(expected), rel=1e-6)
    assert delta.max_abs == pytest.approx(0.01, rel=1e-3)


def test_float16_snapshot_halves_memory():
    model = examples.build("tiny_lm")
    full = ParameterSnapshot.take(model, dtype=torch.float32)
    half = ParameterSnapshot.take(model, dtype=torch.float16)
    assert full.nbytes == 4 * full.numel == 4 * sum(p.numel() for p in model.parameters())
    assert half.nbytes * 2 == full.nbytes
    assert half.tensors["tok_emb.weight"].dtype == torch.float16


def test_snapshot_leaves_frozen_parameters_out():
    model = examples.build("frozen")
    snap = ParameterSnapshot.take(model)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad and p.is_floating_point()}
    assert set(snap.names) == trainable and len(trainable) < len(list(model.parameters()))


# ---------------------------------------------------------------- delta and change metrics


def test_delta_statistics_match_float64(path):
    model = _seeded()
    old = ParameterSnapshot.take(model)
    _move(model)
    delta = ParameterDelta.between(old, model, step=7, thresholds=THRESHOLDS)
    ref = _reference(old, model)
    d = np.concatenate(list(ref.values()))
    w = np.concatenate([old.tensors[n].double().numpy() for n in ref])
    COMPARE.validate(delta.frame)
    assert (delta.old_step, delta.new_step) == (0, 7)
    assert delta.total.l2 == pytest.approx(np.sqrt((d**2).sum()), rel=1e-6)
    assert delta.total.abs_sum == pytest.approx(np.abs(d).sum(), rel=1e-6)
    assert delta.max_abs == np.abs(d).max()
    assert delta.total.mean == pytest.approx(d.mean(), rel=1e-6, abs=1e-12)
    assert delta.total.std == pytest.approx(d.std(), rel=1e-6)
    assert delta.rel_change == pytest.approx(np.linalg.norm(d) / np.linalg.norm(w), rel=1e-6)
    for t in THRESHOLDS:  # float32 b - a is exact here (Sterbenz): the counts are exact
        assert delta.changed_ratio(t) == np.count_nonzero(np.abs(d) > t) / d.size
        assert delta.sparsity(t) == np.count_nonzero(np.abs(d) <= t) / d.size
    row = delta.frame.set_index("name").loc["head.weight"]
    a, b = old.tensors["head.weight"].double().numpy(), model.head.weight.detach().double().numpy().ravel()
    assert row["l2_b"] == pytest.approx(np.linalg.norm(b), rel=1e-6)
    assert row["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-6)


def test_counts_exact_across_chunks_that_all_move_and_chunks_that_straddle(path):
    from nbinspect.track.snapshot import CHUNK

    model = nn.Linear(1000, 700)  # 700,700 weights: three chunks
    old = ParameterSnapshot.take(model)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        flat = model.weight.view(-1)
        flat[:CHUNK] += 1e-3 * torch.sign(torch.randn(CHUNK, generator=g))  # all of chunk 1 moves (Adam-like)
        flat[CHUNK:] += torch.randn(flat.numel() - CHUNK, generator=g) * 1e-6  # the rest straddles 1e-6
        flat[-5:] = old["weight"].view(-1)[-5:]  # and a few do not move at all
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    d = _reference(old, model)["weight"]
    frac_above = delta.frame.set_index("name").loc["weight", "frac_above"]
    for k, t in enumerate(THRESHOLDS):
        assert round(frac_above[k] * d.size) == np.count_nonzero(np.abs(d) > t)
    assert delta.moments["weight"].zeros == np.count_nonzero(d == 0) >= 5


@pytest.mark.parametrize(
    ("model_dtype", "snapshot_dtype"),
    [
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16),
        (torch.float32, torch.float16),
        (torch.bfloat16, torch.float32),
    ],
)
@pytest.mark.usefixtures("split_threads")
def test_half_precision_pairs_match_float64_across_threads(path, model_dtype, snapshot_dtype, monkeypatch):
    from nbinspect.analyze import fused

    monkeypatch.setattr(fused, "_CHUNK", 1 << 17)  # several widened chunks per thread's share
    torch.manual_seed(0)
    model = nn.Linear(1100, 1000).to(model_dtype)  # 1.1M weights: two threads' shares
    old = ParameterSnapshot.take(model, dtype=snapshot_dtype)
    assert old.norms_sq["weight"] == pytest.approx(float((old["weight"].double() ** 2).sum()), rel=1e-7)
    assert torch.equal(old["weight"], model.weight.detach().to(snapshot_dtype))  # the norms left the copy alone
    _move(model)
    with torch.no_grad():
        model.weight.view(-1)[-7:] = old["weight"].view(-1)[-7:].to(model_dtype)  # a few do not move
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    ref = _reference(old, model)
    # the torch path adds float32 dots of half-precision values: ~2e-6 typically, 1.1e-5 seen for fp16
    rel = 1e-9 if path == "fused" else 3e-5
    for name, d in ref.items():
        m, row = delta.moments[name], delta.frame.set_index("name").loc[name]
        a = old.tensors[name].double().numpy()
        b = a + d
        assert (m.count, m.nan, m.inf, m.zeros) == (d.size, 0, 0, np.count_nonzero(d == 0))
        assert (m.min, m.max) == (d.min(), d.max())
        assert m.l2 == pytest.approx(np.linalg.norm(d), rel=rel)
        assert m.abs_sum == pytest.approx(np.abs(d).sum(), rel=rel)
        assert m.mean == pytest.approx(d.mean(), rel=rel, abs=1e-15)
        for k, t in enumerate(THRESHOLDS):
            assert round(row["frac_above"][k] * d.size) == np.count_nonzero(np.abs(d) > t), t
        assert row["l2_b"] == pytest.approx(np.linalg.norm(b), rel=1e-6)
        assert row["cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-6)


def test_a_nan_or_inf_in_the_change_is_counted_apart(path):
    model = nn.Linear(40, 30)
    old = ParameterSnapshot.take(model)
    with torch.no_grad():
        model.weight.add_(1e-3)
        model.weight[0, :3] = torch.tensor([math.nan, math.inf, -math.inf])
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    m = delta.moments["weight"]
    finite = _reference(old, model)["weight"][3:]
    assert (m.nan, m.inf, m.count) == (1, 2, finite.size)
    assert m.l2 == pytest.approx(np.linalg.norm(finite), rel=1e-6)
    assert delta.moments["bias"].max == 0 and delta.moments["bias"].zeros == 30


def test_delta_agrees_with_the_comparison_engine(path):
    model = _seeded()
    old = ParameterSnapshot.take(model)
    _move(model)
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    import nbinspect

    before = {n: old[n] for n in old.names}
    engine = nbinspect.compare(before, model).frame.set_index("name")
    ours = delta.frame.set_index("name")
    for column in ("l2_a", "l2_b", "l2_delta", "rel_change", "max_abs_delta", "cosine", "mean_drift"):
        assert np.allclose(ours[column].astype(float), engine.loc[ours.index, column].astype(float), rtol=1e-6)
    assert list(ours["frac_above"]) == list(engine.loc[ours.index, "frac_above"])


def test_change_metrics_keys_and_breakdowns(path):
    model = _seeded()
    old = ParameterSnapshot.take(model)
    _move(model)
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    ctx = AnalysisContext(model, 1)
    out = ParameterChangeMetrics(THRESHOLDS, per_layer=True, components=True).compute(delta, old, ctx)
    ref = _reference(old, model)
    d = np.concatenate(list(ref.values()))
    assert out["param_change/norm_l2"] == pytest.approx(np.linalg.norm(d), rel=1e-6)
    assert out["param_change/norm_l1"] == pytest.approx(np.abs(d).sum(), rel=1e-6)
    assert out["param_change/norm_max"] == np.abs(d).max()
    assert out["param_change/sparsity_at_1e-06"] == np.count_nonzero(np.abs(d) <= 1e-6) / d.size
    assert out["param_change/changed_ratio_at_0.0001"] == np.count_nonzero(np.abs(d) > 1e-4) / d.size
    layer1 = np.concatenate([v for n, v in ref.items() if n.startswith("layers.1.")])
    w1 = np.concatenate([old.tensors[n].double().numpy() for n in ref if n.startswith("layers.1.")])
    assert out["param_change/layer_1/mean_abs_delta"] == pytest.approx(np.abs(layer1).mean(), rel=1e-6)
    assert out["param_change/layer_1/relative_change"] == pytest.approx(
        np.linalg.norm(layer1) / np.linalg.norm(w1), rel=1e-6
    )
    assert out["param_change/layer_1/sparsity_at_1e-08"] == np.count_nonzero(np.abs(layer1) <= 1e-8) / layer1.size
    # the document's `sparsity`: at 1e-06 (the reference threshold) when measured
    assert out["param_change/layer_1/sparsity"] == np.count_nonzero(np.abs(layer1) <= 1e-6) / layer1.size
    q = np.concatenate([v for n, v in ref.items() if ".q_proj." in n])
    assert out["param_change/attn.q/mean_abs_delta"] == pytest.approx(np.abs(q).mean(), rel=1e-6)
    assert {
        "param_change/embedding/mean_abs_delta",
        "param_change/mlp.up/mean_abs_delta",
        "param_change/head/mean_abs_delta",
    } <= set(out)
    assert "param_change/layer_2/mean_abs_delta" not in out
    assert not any(k.endswith("/mean_abs") for k in out)  # the old name is a lookup alias only
    # the document's family: grouped by the owning module's own name, in float64
    wq = np.concatenate([old.tensors[n].double().numpy() for n in ref if ".q_proj." in n])
    assert out["param_change/component/q_proj/mean_abs_delta"] == pytest.approx(np.abs(q).mean(), rel=1e-6)
    assert out["param_change/component/q_proj/sparsity"] == np.count_nonzero(np.abs(q) <= 1e-6) / q.size
    assert out["param_change/component/q_proj/relative_change"] == pytest.approx(
        np.linalg.norm(q) / np.linalg.norm(wq), rel=1e-6
    )
    owners = {n.split(".")[-2] if "." in n else "(root)" for n in ref}
    assert {k.split("/")[2] for k in out if k.startswith("param_change/component/")} == owners


def test_nothing_moved(path):
    model = _seeded()
    old = ParameterSnapshot.take(model)
    delta = ParameterDelta.between(old, model, thresholds=THRESHOLDS)
    out = ParameterChangeMetrics(THRESHOLDS).compute(delta, old, AnalysisContext(model, 1))
    assert out["param_change/norm_l2"] == 0 and out["param_change/relative_change"] == 0
    assert out["param_change/sparsity_at_1e-08"] == 1.0
    assert set(delta.frame["status"]) == {"same"}


# ---------------------------------------------------------------- sparse quality


def _one_sgd_step() -> tuple[nn.Module, torch.Tensor, ParameterSnapshot, ParameterDelta]:
    """A Layered model after one SGD step (gradients left in place), its input, the snapshot
    from before the step and the delta."""
    model = _seeded()
    x = torch.randint(0, 10, (4, 6))
    old = ParameterSnapshot.take(model)
    model(x).float().pow(2).mean().backward()
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    return model, x, old, ParameterDelta.between(old, model)


def test_sparse_quality_threshold_zero_is_the_full_update():
    model, x, old, delta = _one_sgd_step()
    out = SparseQualityMetrics([0.0], include_random=False).compute(delta, old, AnalysisContext(model, 1, x))
    assert out["sparse/kl_at_0"] == 0.0
    assert out["sparse/cosine_at_0"] == pytest.approx(1.0, abs=1e-12)
    assert out["sparse/mse_at_0"] == 0.0
    assert out["sparse/top1_agree_at_0"] == 1.0
    changed = sum(int((p.detach() != old[n]).sum()) for n, p in model.named_parameters())
    assert out["sparse/kept_ratio_at_0"] == changed / old.numel


def test_random_mask_is_worse_than_magnitude_when_the_update_is_concentrated():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 10))
    x = torch.randn(64, 16)
    old = ParameterSnapshot.take(model)
    with torch.no_grad():  # a few large changes, and many tiny ones
        for p in model.parameters():
            p.add_(1e-7 * torch.randn_like(p))
            flat = p.view(-1)
            flat[torch.randperm(flat.numel())[: flat.numel() // 10]] += 0.5
    delta = ParameterDelta.between(old, model)
    out = SparseQualityMetrics([1e-6], seed=0).compute(delta, old, AnalysisContext(model, 1, x))
    assert 0.08 < out["sparse/kept_ratio_at_1e-06"] < 0.12
    assert out["sparse/kl_at_1e-06"] < 1e-6
    assert out["sparse/kl_at_1e-06_random"] > 100 * max(out["sparse/kl_at_1e-06"], 1e-9)
    assert out["sparse/cosine_at_1e-06_random"] < out["sparse/cosine_at_1e-06"]
    assert out["sparse/top1_agree_at_1e-06"] == 1.0


def test_analysis_restores_weights_modes_grads_buffers_and_rng_bit_exactly():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.ReLU(), nn.Linear(8, 3))
    x = torch.randn(16, 8)
    old = ParameterSnapshot.take(model)
    model(x).pow(2).mean().backward()  # leaves .grad set and BatchNorm stats updated
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    model[1].eval()  # mixed modes must come back as they were
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    modes = [m.training for m in model.modules()]
    versions = {n: p._version for n, p in model.named_parameters()}
    rng = torch.get_rng_state()
    hooks = [len(m._forward_hooks) for m in model.modules()]
    delta = ParameterDelta.between(old, model)
    ctx = AnalysisContext(model, 1, x)
    SparseQualityMetrics(THRESHOLDS).compute(delta, old, ctx)
    ActivationMetrics().compute(delta, old, ctx)
    for n, p in model.named_parameters():
        assert torch.equal(p, weights[n]) and p._version == versions[n]
        assert torch.equal(p.grad, grads[n])
    for n, b in model.named_buffers():
        assert torch.equal(b, buffers[n])
    assert [m.training for m in model.modules()] == modes
    assert torch.equal(torch.get_rng_state(), rng)
    assert [len(m._forward_hooks) for m in model.modules()] == hooks


# ---------------------------------------------------------------- gradients, optimizer, activations


def test_gradient_metrics_match_the_gradients():
    model, _, old, delta = _one_sgd_step()
    out = GradientMetrics().compute(delta, old, AnalysisContext(model, 1))
    grads = {n: p.grad.double() for n, p in model.named_parameters()}
    assert out["gradient/norm"] == pytest.approx(math.sqrt(sum(float((g**2).sum()) for g in grads.values())), rel=1e-6)
    head = math.sqrt(float((grads["head.weight"] ** 2).sum() + (grads["head.bias"] ** 2).sum()))
    assert out["gradient/head/norm"] == pytest.approx(head, rel=1e-6)
    ref = _reference(old, model)
    moved = math.sqrt(sum(float((ref[n] ** 2).sum()) for n in ("head.weight", "head.bias")))
    weight = math.sqrt(old.norms_sq["head.weight"] + old.norms_sq["head.bias"])
    assert out["gradient/head/update_ratio"] == pytest.approx(moved / weight, rel=1e-6)
    assert out["gradient/update_ratio"] == pytest.approx(delta.rel_change)
    assert out["gradient/nonfinite"] == 0


def test_optimizer_step_size_is_the_step_adam_took():
    model = _seeded()
    x = torch.randint(0, 10, (4, 6))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):  # past the first step, where every element moves by exactly lr
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    old = ParameterSnapshot.take(model)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
    delta = ParameterDelta.between(old, model)
    out = OptimizerStateMetrics().compute(delta, old, AnalysisContext(model, 4, optimizer=opt))
    d = np.concatenate(list(_reference(old, model).values()))
    assert out["optimizer/step_size"] == pytest.approx(np.sqrt((d**2).mean()), rel=1e-4)
    head = np.concatenate([_reference(old, model)[n] for n in ("head.weight", "head.bias")])
    assert out["optimizer/head/step_size"] == pytest.approx(np.sqrt((head**2).mean()), rel=1e-4)
    m = torch.cat([opt.state[p]["exp_avg"].double().ravel() for p in model.parameters()])
    assert out["optimizer/exp_avg_norm"] == pytest.approx(float(m.norm()), rel=1e-6)
    assert OptimizerStateMetrics().compute(delta, old, AnalysisContext(model, 4)) == {}


def test_activation_metrics_count_dead_and_saturated_units():
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 4), nn.Tanh())
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.copy_(torch.tensor([-1.0, -2.0, 1.0, 1.0, 1.0, -0.5]))  # units 0, 1, 5 never fire
        model[2].weight.fill_(10.0)
        model[2].bias.copy_(torch.tensor([0.0, 0.0, 0.0, -30.0]))
    x = torch.randn(8, 4)
    old = ParameterSnapshot.take(model)
    out = ActivationMetrics().compute(ParameterDelta.between(old, model), old, AnalysisContext(model, 1, x))
    # both figures through the derivative: saturated where |f'(x)| < 1e-2, dead when
    # saturated on every input. ReLU: f' = 0 on units 0, 1, 5 (never positive), 1 elsewhere
    assert out["activation/1/dead"] == 3 / 6
    assert out["activation/1/saturated"] == 3 * 8 / (6 * 8)
    # Tanh input: 30 for the first three units (1 − tanh²(30) ≈ 0: saturated, dead), 0 for the last
    assert out["activation/3/saturated"] == 3 / 4
    assert out["activation/3/dead"] == 3 / 4
    assert out["activation/dead_fraction"] == (3 + 3) / (6 + 4)
    assert out["activation/saturated_fraction"] == (3 * 8 + 3 * 8) / (6 * 8 + 4 * 8)


class SiLUActivation(nn.Module):
    """transformers' spelling: a parameter-free module that is not a torch.nn activation."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


@pytest.mark.parametrize("act", [nn.SiLU, nn.GELU, SiLUActivation])
def test_smooth_activations_have_dead_and_saturated_units(act):
    """Issue 26: nothing was reported for SiLU/GELU models (Llama). Reference: the
    derivative of x·σ(x) / the exact GELU, by hand in float64."""
    model = nn.Sequential(nn.Linear(3, 4), act())
    with torch.no_grad():
        model[0].weight.fill_(0.1)
        model[0].bias.copy_(torch.tensor([-20.0, 0.0, 1.0, -3.0]))
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
    old = ParameterSnapshot.take(model)
    out = ActivationMetrics().compute(ParameterDelta.between(old, model), old, AnalysisContext(model, 1, x))
    z = (x.double() @ model[0].weight.detach().double().T + model[0].bias.detach().double()).numpy()
    if act is nn.GELU:
        erf = np.vectorize(math.erf)
        slope = 0.5 * (1 + erf(z / math.sqrt(2))) + z * np.exp(-(z**2) / 2) / math.sqrt(2 * math.pi)
    else:
        s = 1 / (1 + np.exp(-z))
        slope = s * (1 + z * (1 - s))
    saturated = np.abs(slope) < 1e-2
    assert saturated[:, 0].all()  # bias −20: unit 0 is dead
    assert out["activation/1/dead"] == saturated.all(0).sum() / 4
    assert out["activation/1/saturated"] == saturated.sum() / saturated.size
    assert out["activation/dead_fraction"] == out["activation/1/dead"]


# ---------------------------------------------------------------- config


def test_config_presets_and_errors():
    minimal, full = AnalysisConfig.minimal(), AnalysisConfig.comprehensive()
    assert minimal.interval > full.interval
    assert minimal.param_change_enabled and not minimal.sparse_quality_enabled
    assert all(
        getattr(full, f)
        for f in ("sparse_quality_enabled", "gradient_enabled", "optimizer_state_enabled", "activation_enabled")
    )
    assert AnalysisConfig(snapshot_dtype=torch.bfloat16).snapshot_dtype == "bfloat16"
    assert AnalysisConfig(param_change_thresholds=[1e-4, 1e-8]).param_change_thresholds == (1e-8, 1e-4)
    with pytest.raises(ValueError, match="interval"):
        AnalysisConfig(interval=0)
    with pytest.raises(ValueError, match=r"param_change_thresholds.*>= 0"):
        AnalysisConfig(param_change_thresholds=[1e-6, -1.0])
    with pytest.raises(ValueError, match=r"param_change_thresholds.*>= 0, got \[-1.0\]"):
        AnalysisConfig(param_change_thresholds=-1.0)  # one number, as a list of one
    with pytest.raises(ValueError, match=r"snapshot_dtype.*'int8'"):
        AnalysisConfig(snapshot_dtype="int8")
    with pytest.raises(ValueError, match="snapshot_device"):
        AnalysisConfig(snapshot_device="nowhere")
    with pytest.raises(ValueError, match="sparse_quality_enabled"):
        AnalysisConfig(sparse_quality_enabled="yes")


# ---------------------------------------------------------------- the manager


def _loop(manager: ModelAnalysisManager, steps: int, model=None, seed: int = 0):
    model = model or examples.build("tiny_lm")
    x = examples.example_input("tiny_lm")
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    results = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        results.append(manager.on_optimizer_step(model, inputs=x, optimizer=opt))
    return model, results


def test_training_loop_history():
    config = AnalysisConfig(
        interval=3, gradient_enabled=True, sparse_quality_enabled=True, optimizer_state_enabled=True
    )
    manager = ModelAnalysisManager.create(config)
    _, results = _loop(manager, 9)
    assert [bool(r) for r in results] == [False, False, True, False, False, True, False, False, True]
    for key in (
        "param_change/norm_l2",
        "param_change/sparsity_at_1e-06",
        "sparse/kl_at_1e-06",
        "sparse/top1_agree_at_1e-06",
        "sparse/kl_at_1e-06_random",
        "gradient/norm",
        "optimizer/step_size",
    ):
        assert key in results[2], key
    history = manager.history
    assert list(history.columns[:3]) == TRACK_HISTORY.names
    TRACK_HISTORY.validate(history[TRACK_HISTORY.names])
    assert history["step"].tolist() == [3, 6, 9] and history["since_step"].tolist() == [1, 3, 6]
    assert all(str(history[k].dtype) == "float64" for k in manager.metric_keys())
    assert history.loc[2, "param_change/norm_l2"] == results[8]["param_change/norm_l2"]
    assert manager.current_snapshot.step == 9 and manager.errors == []
    assert manager.last_change is not None and set(manager.last_change["status"]) == {"changed"}
    data = json.loads(manager.to_json())
    assert data["config"]["interval"] == 3 and [r["step"] for r in data["history"]] == [3, 6, 9]
    fig = manager.plot(["param_change/norm_l2", "sparse/kl_*"])
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()][:2] == ["param_change/norm_l2", "sparse/kl_at_1e-08"]
    with pytest.raises(ValueError, match="no metric matches 'nothing'"):
        manager.plot("nothing")


class Broken(MetricComputer):
    name = "broken"

    def compute(self, delta, snapshot, context):
        raise RuntimeError("kaput")


class Steps(MetricComputer):
    name = "steps"

    def compute(self, delta, snapshot, context):
        return {"custom/span": context.step - snapshot.step}


def test_a_failing_metric_does_not_stop_the_others(caplog):
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2)).add_metric(Broken()).add_metric(Steps())
    with caplog.at_level(logging.WARNING, logger="nbinspect.track"), pytest.warns(TrackingWarning, match="broken"):
        _, results = _loop(manager, 4)
    assert results[1]["custom/span"] == 1 and results[3]["custom/span"] == 2
    assert "param_change/norm_l2" in results[3]
    assert [e["metric"] for e in manager.errors] == ["broken", "broken"]
    assert "broken failed at step 2: RuntimeError: kaput" in caplog.text


def test_an_architecture_change_says_to_reset():
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=1))
    model, _ = _loop(manager, 2)
    model.extra = nn.Linear(2, 2)
    with pytest.warns(TrackingWarning, match=r"added: extra.weight, extra.bias.*call reset\(\)"):
        assert manager.on_optimizer_step(model) == {}
    manager.reset()
    assert manager.on_optimizer_step(model) == {}  # a new snapshot
    assert "param_change/norm_l2" in manager.on_optimizer_step(model)


def test_public_names():
    import nbinspect.track as track

    assert set(track.__all__) == {
        "ActivationMetrics", "AnalysisConfig", "AnalysisContext", "ArchitectureChanged", "GradientMetrics",
        "MetricComputer", "ModelAnalysisManager", "OptimizerStateMetrics", "ParameterChangeMetrics",
        "ParameterDelta", "ParameterSnapshot", "SparseQualityMetrics", "TrackingWarning",
        # issue 26: the original framework's classes, the key aliases, the keyword call
        "ParamChangeTracker", "SparseQualityAnalyzer", "KEY_ALIASES", "call_compute",
    }  # fmt: skip
    assert all(getattr(track, n) is not None for n in track.__all__)


def test_add_metric_refuses_other_objects():
    with pytest.raises(TypeError, match="MetricComputer"):
        ModelAnalysisManager().add_metric(lambda d, s, c: {})


def test_widget_follows_the_measurements():
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2))
    model = examples.build("tiny_lm")
    widget = manager.widget(model, metrics=["param_change/norm_l2"])
    assert widget.payload["timeline"]["steps"] == [] and "compare" not in widget.payload["tensors"]
    _loop(manager, 4, model)
    payload = widget.payload
    assert payload["timeline"]["steps"] == [2, 4]
    assert payload["timeline"]["series"][0]["key"] == "param_change/norm_l2"
    assert payload["timeline"]["series"][0]["values"][1] == pytest.approx(
        manager.history["param_change/norm_l2"][1], rel=1e-5
    )
    change = manager.last_change.set_index("name")["change"]
    compare = dict(zip(_tensor_paths(payload), payload["tensors"]["compare"]))
    assert compare["tok_emb.weight"][1] == pytest.approx(change["tok_emb.weight"], rel=1e-5)
    first = manager._rows[0]["since_step"]
    title = f"steps {first}→4, measured every 2 steps · Change: the last interval, steps 2→4"
    assert repr(widget) == f"<TrackWidget TinyLM: {title}, selected=None>"
    assert payload["timeline"]["shown"] == 1  # the chosen metric drawn, the others offered in the picker
    assert {s["key"] for s in payload["timeline"]["series"]} >= {"param_change/norm_l2", "param_change/norm_max"}


def test_saved_curves_are_a_light_card_with_transparent_corners():
    """The saved notebook's image of the curves (read without the widget, in any theme): an
    opaque white card with a grey border, the image transparent outside its rounded corners
    (it was an opaque white rectangle to the edges: a glare on a dark page)."""
    import io

    from PIL import Image

    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2))
    model = examples.build("tiny_lm")
    widget = manager.widget(model, metrics=["param_change/norm_l2"])
    _loop(manager, 4, model)
    _, png = widget._saved_view()
    image = Image.open(io.BytesIO(png)).convert("RGBA")
    w, h = image.size
    assert [image.getpixel(corner)[3] for corner in [(0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1)]] == [0] * 4
    assert image.getpixel((w // 2, 8)) == (255, 255, 255, 255)  # inside the card, above the title
    border = image.getpixel((w // 2, 1))
    assert border[3] > 0 and max(border[:3]) < 230  # the grey border along the top edge


def test_widget_reads_the_model_once(calls):
    from nbinspect.backends import backend_named

    model = examples.build("tiny_lm")
    built = calls(backend_named("torch"), "source")  # the model read into a source
    widget = ModelAnalysisManager.create(AnalysisConfig(interval=2)).widget(model)
    assert built == [id(model)]  # was three times: for layers, params and totals
    assert widget.payload["totals"]["total_params"] == nbinspect.totals(model)["total_params"] == 118_528


def test_widget_payload_keeps_the_contract():
    from nbinspect.payload_schema import check_payload

    manager = ModelAnalysisManager.create(AnalysisConfig(interval=1))
    model, _ = _loop(manager, 3)
    payload = manager.widget(model).payload
    check_payload(payload, deep=True)
    bad = {**payload, "timeline": {**payload["timeline"], "steps": [1]}}
    with pytest.raises(ValueError, match="one number or null per step"):
        check_payload(bad)


def _tensor_paths(payload: dict) -> list[str]:
    modules, tensors = payload["modules"], payload["tensors"]
    paths = []
    for owner, key in zip(tensors["module"], tensors["key"]):
        parts, i = [key], owner
        while i > 0:
            parts.insert(0, modules["key"][i])
            i = modules["parent"][i]
        paths.append(".".join(parts))
    return paths


# ---------------------------------------------------------------- issue 26: the document's plugin API


class GradientNormMetric(MetricComputer):
    """The document's plugin, verbatim in shape: compute(self, **kwargs)."""

    name = "gradient"

    def compute(self, **kwargs):
        model = kwargs["context"].model
        total = sum(float(p.grad.norm() ** 2) for p in model.parameters() if p.grad is not None)
        return {"gradient/total_norm": total**0.5}


class MyMetric(MetricComputer):
    """The document's second plugin: compute(self, delta, context, **kwargs)."""

    name = "my_metric"

    def compute(self, delta, context, **kwargs):
        return {"my_metric/value": float(delta.total.l2), "my_metric/step": float(context.step)}


class Positional(MetricComputer):
    """A plugin written against the old positional call, with its own parameter names."""

    name = "positional"

    def compute(self, d, s, c):  # type: ignore[override]
        return {"positional/step": float(c.step), "positional/names": float(len(s.names))}


def _train(model: nn.Module, manager: ModelAnalysisManager, steps: int, inputs=None, **kw) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randint(0, 10, (4, 3), generator=torch.Generator().manual_seed(0))
    for _ in range(steps):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        manager.on_optimizer_step(model, inputs=inputs, optimizer=opt, **kw)


def test_plugins_are_called_with_keywords():
    """Issue 26: both document plugins failed on every call (compute() got positional arguments)."""
    model = _seeded()
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2, sparse_quality_enabled=False))
    manager.add_metric(GradientNormMetric()).add_metric(MyMetric()).add_metric(Positional())
    _train(model, manager, 4)
    assert manager.errors == []
    last = manager.history.iloc[-1]
    grad = math.sqrt(sum(float(p.grad.double().norm() ** 2) for p in model.parameters()))
    assert last["gradient/total_norm"] == pytest.approx(grad, rel=1e-5)
    assert last["my_metric/value"] == pytest.approx(last["param_change/norm_l2"], rel=1e-12)
    assert last["my_metric/step"] == 4 and last["positional/step"] == 4
    assert last["positional/names"] == len(list(model.parameters()))


def test_defaults_are_the_documents():
    config = AnalysisConfig()
    assert config.interval == 100 and config.param_change_enabled and config.sparse_quality_enabled
    assert config.momentum_enabled is False
    assert config.sparse_quality_thresholds == config.param_change_thresholds
    names = [m.name for m in ModelAnalysisManager.create(AnalysisConfig(momentum_enabled=True)).metrics]
    assert "optimizer" in names or any("optimizer" in n for n in names)
    assert not AnalysisConfig.minimal().sparse_quality_enabled


def test_without_inputs_sparse_quality_is_skipped_with_one_warning():
    model = _seeded()
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2))
    with pytest.warns(TrackingWarning) as caught:
        _train(model, manager, 20)
    said = [str(w.message) for w in caught if "sparse" in str(w.message)]
    assert len(said) == 1 and "inputs=" in said[0] and "sparse_quality_enabled=False" in said[0]
    assert max(len(line) for line in said[0].splitlines()) <= 80  # readable where it is not wrapped
    assert manager.skipped == {"sparse": 10}  # step 1 takes the snapshot; steps 2, 4, ..., 20 measure
    assert manager.errors == []
    assert "param_change/norm_l2" in manager.metric_keys()


def test_a_wrong_inputs_is_one_clear_message(caplog):
    """Issue 26: a function instead of a batch gave ~240 repeated warnings that never said
    what inputs must be."""
    model = _seeded()
    x = torch.randint(0, 10, (4, 3))
    manager = ModelAnalysisManager.create(AnalysisConfig.comprehensive(interval=2))
    with caplog.at_level(logging.WARNING, logger="nbinspect.track"), pytest.warns(TrackingWarning) as caught:
        _train(model, manager, 40, inputs=lambda: x)
    assert len(caught) == 1 and len(caplog.records) == 1
    message = str(caught[0].message)
    assert "inputs= must be the batch the model is called with (a tensor" in message
    assert "function" in message and "pass its result" in message
    assert manager.skipped["sparse"] == manager.skipped["activation"] == 20
    assert "param_change/norm_l2" in manager.metric_keys()


def test_old_key_names_are_aliases_in_plot():
    pytest.importorskip("matplotlib")
    model = _seeded()
    manager = ModelAnalysisManager.create(
        AnalysisConfig(interval=1, param_change_per_layer=True, sparse_quality_enabled=False)
    )
    _train(model, manager, 3)
    assert "param_change/layer_0/mean_abs" not in manager.metric_keys()
    assert manager._aliased(["param_change/layer_0/mean_abs"]) == ["param_change/layer_0/mean_abs_delta"]
    manager.plot(["param_change/layer_0/mean_abs"])


def test_the_legacy_classes_of_the_migration_blocks():
    from nbinspect.track import ParamChangeTracker, SparseQualityAnalyzer

    model = _seeded()
    tracker = ParamChangeTracker(measure_interval=100)
    assert not tracker.has_snapshot() and tracker.compute_metrics(model) == {}
    tracker.capture_snapshot(model)
    moved = _move(model)
    metrics = tracker.compute_metrics(model)
    d = np.concatenate([(moved[n].double() - tracker.snapshot[n].double()).numpy().ravel() for n in moved])
    assert metrics["param_change/norm_l2"] == pytest.approx(np.linalg.norm(d), rel=1e-6)
    x = torch.randint(0, 10, (4, 3))
    out = SparseQualityAnalyzer(tracker, enabled=True).analyze(model, x)
    assert {"sparse/kl_at_1e-06", "sparse/unchanged_ratio_at_1e-06"} <= set(out)
    assert out["sparse/unchanged_ratio_at_1e-06"] == pytest.approx(1 - out["sparse/kept_ratio_at_1e-06"])
    assert SparseQualityAnalyzer(tracker, enabled=False).analyze(model, x) == {}
