"""Mixture-of-experts models: activated parameters, per-expert rows, expert comparisons,
frontier-sized configs on the meta device (transformers config classes with their defaults)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import nbinspect

from ..moe_models import LLAMA_70B, LinearExpertsLM, hf_moe

transformers = pytest.importorskip("transformers")


def _routed(layers: int, experts: int, per_expert: int, top_k: int, total: int) -> int:
    """Activated parameters by hand: everything but the routed experts, plus top_k of them."""
    return total - layers * experts * per_expert + layers * top_k * per_expert


def test_deepseek_v3_config_total_and_activated_parameters():
    config = transformers.DeepseekV3Config()
    model = hf_moe(transformers.DeepseekV3Config)
    report = nbinspect.moe(model)
    total = sum(p.numel() for p in model.parameters())
    assert total == report.totals["total_params"] == 671_026_404_352
    per_expert = 3 * config.hidden_size * config.moe_intermediate_size
    layers = config.num_hidden_layers - config.first_k_dense_replace
    expected = _routed(layers, config.n_routed_experts, per_expert, config.num_experts_per_tok, total)
    assert report.totals["activated_params"] == expected == 37_552_282_624  # the model card's "37B activated"
    frame = report.frame
    assert len(frame) == layers == 58
    assert set(frame["layout"]) == {"fused"}
    assert set(frame["experts"]) == {256} and set(frame["top_k"]) == {8}
    assert set(frame["shared_params"]) == {per_expert * config.n_shared_experts}
    text = str(report)
    assert "model.layers.3–60.mlp.experts ×58" in text
    assert "37,552,282,624 (5.6%)" in text
    insp = nbinspect.inspect(model, stats=False)  # the summary says it beside the total too
    assert insp.totals["activated_params"] == expected
    assert "activated per token   37,552,282,624  5.6%" in str(insp)
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(insp.to_dict(), nbinspect.json_schema())


@pytest.mark.parametrize(
    ("config_class", "expected"),
    [
        ("MixtralConfig", 12_879_925_248),  # the model card's 12.9B active of 46.7B
        ("Qwen2MoeConfig", 2_689_173_504),  # Qwen1.5-MoE-A2.7B
        ("Qwen3MoeConfig", None),
    ],
)
def test_mixtral_and_qwen_configs(config_class, expected):
    cls = getattr(transformers, config_class)
    config, model = cls(), hf_moe(cls)
    total = sum(p.numel() for p in model.parameters())
    experts = getattr(config, "num_local_experts", None) or config.num_experts
    ffn = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    per_expert = 3 * config.hidden_size * ffn
    activated = _routed(config.num_hidden_layers, experts, per_expert, config.num_experts_per_tok, total)
    report = nbinspect.moe(model)
    assert report.totals["activated_params"] == activated
    assert expected is None or activated == expected
    shared = getattr(config, "shared_expert_intermediate_size", None)
    if shared:  # Qwen2-MoE: a shared expert and its sigmoid gate, used by every token
        assert set(report.frame["shared_params"]) == {3 * config.hidden_size * shared + config.hidden_size}


def test_top_k_from_the_caller_when_the_checkpoint_does_not_say(tmp_path):
    from safetensors.torch import save_file

    model = hf_moe(transformers.MixtralConfig, device="cpu", **TINY)
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    unknown = nbinspect.moe(tmp_path / "model.safetensors")
    assert unknown.totals["activated_params"] is None
    assert "pass top_k=" in str(unknown)
    given = nbinspect.moe(tmp_path / "model.safetensors", top_k=2)
    assert given.totals["activated_params"] == nbinspect.moe(model).totals["activated_params"]


def test_a_model_with_one_linear_per_expert_and_tens_of_thousands_of_modules():
    with torch.device("meta"):
        model = LinearExpertsLM(layers=32, experts=160, d=64, ffn=128, top_k=4)
    modules = sum(1 for _ in model.modules())
    assert modules > 20_000
    report = nbinspect.moe(model)
    total = sum(p.numel() for p in model.parameters())
    assert report.totals["activated_params"] == _routed(32, 160, 3 * 64 * 128, 4, total)
    assert set(report.frame["layout"]) == {"modules"}
    text = nbinspect.inspect(model, stats=False).summary(depth=None)
    assert "0–159 ×160" in text and "0–31 ×32" in text
    assert len(text.splitlines()) < 40  # folded: not one line per module


TINY = {
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_local_experts": 4,
    "vocab_size": 64,
}


@pytest.fixture
def tiny_mixtral():
    torch.manual_seed(0)
    return hf_moe(transformers.MixtralConfig, device="cpu", **TINY)


def test_per_expert_rows_under_fused_tensors(tiny_mixtral):
    split = nbinspect.split_experts(tiny_mixtral)
    fused = tiny_mixtral.model.layers[1].mlp.experts.gate_up_proj
    stats = nbinspect.stats(split).set_index("name")
    row = stats.loc["model.layers.1.mlp.experts.2.gate_up_proj"]
    x = fused[2].detach().double().numpy().ravel()
    assert row["numel"] == x.size
    assert row["mean"] == pytest.approx(x.mean(), rel=1e-12)
    assert row["std"] == pytest.approx(x.std(), rel=1e-12)
    assert (row["min"], row["max"]) == (x.min(), x.max())
    np.testing.assert_array_equal(row["hist_counts"], np.histogram(x, 64, range=(x.min(), x.max()))[0])
    by_module = nbinspect.stats(split, by="module").set_index("name")
    both = np.concatenate([x, tiny_mixtral.model.layers[1].mlp.experts.down_proj[2].detach().double().numpy().ravel()])
    assert by_module.loc["model.layers.1.mlp.experts.2", "l2"] == pytest.approx(np.linalg.norm(both), rel=1e-12)
    split_totals, totals = nbinspect.totals(split), nbinspect.totals(tiny_mixtral)
    assert split_totals == {**totals, "num_modules": totals["num_modules"] + 2 * 4}  # the same parameters, split
    insp = nbinspect.inspect(split)
    assert "0–3 ×4" in insp.summary(depth=None)
    assert {"0", "1", "2", "3"} <= set(insp.widget().payload["modules"]["key"])  # the widget folds them


def test_which_experts_moved_and_which_are_dead(tiny_mixtral):
    before = {k: v.clone() for k, v in tiny_mixtral.state_dict().items()}
    torch.manual_seed(1)
    with torch.no_grad():
        for layer in tiny_mixtral.model.layers:
            for p in (layer.mlp.experts.gate_up_proj, layer.mlp.experts.down_proj):
                p.add_(torch.randn_like(p) * 1e-2)
        experts = tiny_mixtral.model.layers[0].mlp.experts
        for name in ("gate_up_proj", "down_proj"):
            p = getattr(experts, name)
            p[3] = before[f"model.layers.0.mlp.experts.{name}"][3]  # never routed to: no update
            p[1] += torch.randn_like(p[1]) * 0.2
    frame = nbinspect.expert_changes(before, tiny_mixtral)
    layer0 = frame[frame["group"] == "model.layers.0.mlp.experts"].set_index("expert")
    assert layer0.loc[3, "dead"] and layer0.loc[3, "rel_change"] == 0
    assert not layer0["dead"].drop(3).any()
    assert layer0["rel_change"].idxmax() == 1
    a = torch.cat(
        [before[f"model.layers.0.mlp.experts.{n}"][1].double().ravel() for n in ("gate_up_proj", "down_proj")]
    )
    b = torch.cat([getattr(experts, n)[1].detach().double().ravel() for n in ("gate_up_proj", "down_proj")])
    assert layer0.loc[1, "rel_change"] == pytest.approx(float((b - a).norm() / a.norm()), rel=1e-6)
    assert len(frame) == 2 * 4


def test_deepseek_v3_memory_plan_and_trace_on_meta():
    model = hf_moe(transformers.DeepseekV3Config, dtype=torch.bfloat16)
    plan = nbinspect.memory(model, optimizer="adamw", precision="bf16").set_index("component")
    total = 671_026_404_352
    assert plan.loc["parameters", "bytes"].iloc[0] == 2 * total
    assert plan.loc["gradients", "bytes"].iloc[0] == 2 * total
    small = hf_moe(transformers.DeepseekV3Config, dtype=torch.bfloat16, num_hidden_layers=4)
    traced = nbinspect.trace(small, (1, 32), input_dtype=torch.long)
    layers = traced.layers.set_index("name")
    config = transformers.DeepseekV3Config()
    experts = layers.loc["model.layers.3.mlp.experts", "flops"]
    # 32 tokens x 8 experts, each a [7168 -> 2 x 2048] and a [2048 -> 7168] multiply
    assert experts == 2 * 32 * config.num_experts_per_tok * 3 * config.hidden_size * config.moe_intermediate_size
    assert "_grouped_mm" not in traced.totals["flops_note"]


def test_llama_70b_config_traces_on_meta():
    model = hf_moe(transformers.LlamaConfig, **LLAMA_70B)
    traced = nbinspect.trace(model, (1, 128), input_dtype=torch.long)
    assert traced.totals["total_params"] == 70_553_706_496
    layers = traced.layers.set_index("name")
    assert layers.loc["model.layers.79.mlp.down_proj", "output_shapes"] == [(1, 128, 8192)]
    assert layers.loc["model.layers.0.mlp.up_proj", "flops"] == 2 * 128 * 8192 * 28672
    assert traced.totals["activation_bytes"] > 0
    assert all(p.is_meta for p in model.parameters())


def test_the_quick_no_experts_test_never_misses_a_module_that_says_experts():
    """``_may_say_experts`` (one test over all names and types) is False only where no
    module's last name part or type says "expert" (``_says_experts``, one module at a time)."""
    from nbinspect.analyze.moe import _may_say_experts, _says_experts
    from nbinspect.core.source import ModelSource, ModuleEntry

    def columns(modules: tuple[ModuleEntry, ...]) -> Any:
        return ModelSource("m", "torch", modules, ()).module_columns

    rng = np.random.default_rng(0)
    parts = ["mlp", "Experts", "EXPERT", "exp", "ert", "0", "1", "gate", "ΣExpertΣ", "İexpert", "x\nexpert", "éxpert"]
    types = ["Linear", "MoEExperts", "ExpertMLP", "Block", "ExPeRt", "Σς"]
    for _ in range(500):
        modules = tuple(
            ModuleEntry(".".join(rng.choice(parts, size=rng.integers(1, 4))), str(rng.choice(types)), True, True, {})
            for _ in range(rng.integers(1, 4))
        )
        if any(_says_experts(m) for m in modules):
            assert _may_say_experts(columns(modules)), modules
    plain = (ModuleEntry("", "Sequential", False, True, {}), ModuleEntry("0", "Linear", True, True, {}))
    assert not _may_say_experts(columns(plain))
