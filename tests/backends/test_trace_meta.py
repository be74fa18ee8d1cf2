"""Models on the meta device trace with shapes, FLOPs and saved-tensor sizes (on fake
tensors, nothing allocated), including transformers' Llama whose mask code calls .item()."""

from __future__ import annotations

import pytest
import torch

import nbinspect
from nbinspect import examples

from ..conftest import assert_unchanged, model_state


def _meta(name: str) -> torch.nn.Module:
    with torch.device("meta"):
        return examples.build(name)


@pytest.mark.parametrize("name", ["cnn", "mlp", "tiny_lm", "shared", "frozen"])
def test_meta_matches_real(name):
    x = examples.example_input(name)
    dtype = torch.long if name == "tiny_lm" else None
    real = nbinspect.trace(examples.build(name), tuple(x.shape), input_dtype=dtype)
    meta = nbinspect.trace(_meta(name), tuple(x.shape), input_dtype=dtype)
    columns = ["name", "input_shapes", "output_shapes", "output_dtypes", "calls", "flops"]
    assert meta.layers[columns].equals(real.layers[columns])
    assert meta.totals["fake_tensors"] and not real.totals["fake_tensors"]
    assert meta.totals["activation_bytes"] == real.totals["activation_bytes"]


@pytest.mark.parametrize("name", ["cnn", "mlp", "tiny_lm", "shared", "frozen"])
def test_meta_backward_flops_per_call_match_real(name):
    """Per call, not only in total: on fake tensors autograd nodes are found by sequence
    number (issue 29: every backward FLOP used to land on the root)."""
    x = examples.example_input(name)
    dtype = torch.long if name == "tiny_lm" else None
    real = nbinspect.trace(examples.build(name), tuple(x.shape), input_dtype=dtype, backward=True)
    meta = nbinspect.trace(_meta(name), tuple(x.shape), input_dtype=dtype, backward=True)
    assert meta.flow["backward_flops"].tolist() == real.flow["backward_flops"].tolist()
    assert real.flow["backward_flops"].iloc[1:].sum() > 0  # children carry backward FLOPs of their own


@pytest.mark.parametrize("name", ["cnn", "tiny_lm", "shared"])
def test_meta_graph_matches_real(name):
    x = examples.example_input(name)
    dtype = torch.long if name == "tiny_lm" else None
    real = nbinspect.trace(examples.build(name), tuple(x.shape), input_dtype=dtype)
    meta = nbinspect.trace(_meta(name), tuple(x.shape), input_dtype=dtype)
    assert meta.frames["graph"].equals(real.frames["graph"])
    assert meta.frames["graph_nodes"].equals(real.frames["graph_nodes"])


def test_meta_model_unchanged_and_accepts_real_inputs():
    model = _meta("cnn")
    params = dict(model.named_parameters())
    before = model_state(model)
    insp = nbinspect.trace(model, examples.example_input("cnn"))  # a real tensor: moved to meta, not copied
    assert insp.io["output"] == [{"path": "output", "shape": [2, 10], "dtype": "float32"}]
    assert_unchanged(before, model_state(model))
    assert all(dict(model.named_parameters())[n] is p and p.is_meta for n, p in params.items())
    assert type(model.features[0].weight) is torch.nn.Parameter


def _llama(**overrides):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        **{
            "hidden_size": 64,
            "intermediate_size": 160,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 100,
            "max_position_embeddings": 64,
            "use_cache": False,
            **overrides,
        }
    )
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config), config


def test_llama_on_meta_fails_plainly_but_traces():
    model, _config = _llama()
    # the reason fake tensors are needed: .item() on meta in the mask code (its error type varies by version)
    with pytest.raises(Exception):  # noqa: B017
        model(torch.zeros(2, 12, dtype=torch.long, device="meta"))
    before = model_state(model)
    insp = nbinspect.trace(model, (2, 12), input_dtype=torch.long)
    assert_unchanged(before, model_state(model))
    assert insp.io["output"] == [{"path": "logits", "shape": [2, 12, 100], "dtype": "float32"}]
    layers = insp.layers.set_index("name")
    assert layers.loc["model.layers.1.self_attn.k_proj", "output_shapes"] == [(2, 12, 32)]  # 2 kv heads x 16
    assert layers.loc["model.layers.1.mlp.down_proj", "input_shapes"] == [(2, 12, 160)]

    B, T, d, ff, V, kv = 2, 12, 64, 160, 100, 32
    attention = 2 * (2 * B * T * d * d) + 2 * (2 * B * T * d * kv) + 4 * B * T * T * d
    mlp = 3 * (2 * B * T * d * ff)
    assert layers.loc["model.layers.0", "flops"] == attention + mlp
    assert insp.totals["flops"] == 2 * (attention + mlp) + 2 * B * T * d * V
    assert insp.totals["activation_bytes"] > 0


def test_llama_7b_config_gives_its_full_layer_table():
    model, _config = _llama(
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
        vocab_size=32000,
        max_position_embeddings=2048,
    )
    insp = nbinspect.trace(model, (1, 32), input_dtype=torch.long)
    assert insp.totals["total_params"] == 6_738_415_616
    layers = insp.layers.set_index("name")
    decoder = [f"model.layers.{i}" for i in range(32)]
    assert all(layers.loc[p, "output_shapes"] == [(1, 32, 4096)] for p in decoder)
    called = insp.layers[insp.layers["type"] != "ModuleList"]
    assert (called["calls"] == 1).all() and called["output_shapes"].notna().all()
    per_layer = 2 * 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 4 * 32 * 32 * 4096
    assert insp.totals["flops"] == 32 * per_layer + 2 * 32 * 4096 * 32000


def test_float32_mixtral_traces_on_meta_as_on_the_cpu():
    """The meta kernel of aten._grouped_mm takes only bf16 (the CPU one takes float32 too):
    the trace stands in for it on fake tensors, so figures and dataflow equal the real run."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.MixtralConfig(
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        num_local_experts=4,
        vocab_size=64,
    )
    with torch.device("meta"):
        meta = transformers.AutoModelForCausalLM.from_config(cfg)
    torch.manual_seed(0)
    real = transformers.AutoModelForCausalLM.from_config(cfg)
    m = nbinspect.trace(meta, (1, 8), input_dtype=torch.long, backward=True)
    r = nbinspect.trace(real, torch.zeros(1, 8, dtype=torch.long), backward=True)
    assert m.flow["flops"].tolist() == r.flow["flops"].tolist()
    assert m.flow["backward_flops"].tolist() == r.flow["backward_flops"].tolist()
    assert m.flow["output_dtypes"].tolist() == r.flow["output_dtypes"].tolist()
    assert m.frames["graph"].equals(r.frames["graph"])
