"""The dataflow of transformers architectures (tiny configs built locally, no downloads) and of
Llama 7B/70B configs on the meta device: every output is reached from an input, the meta graph
equals the real one, and repeated layers fold with rotary cos/sin as side inputs. (No attention
mask is passed: transformers skips an all-ones mask after reading its values, which fake
tensors do not have, so that branch may differ between a meta and a real trace.)"""

from __future__ import annotations

import pytest
import torch

import nbinspect

T = pytest.importorskip("transformers")

SMALL = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 100,
}


def ids(n: int = 8) -> torch.Tensor:
    return torch.ones(1, n, dtype=torch.long)


ZOO = {
    "gpt2": (
        lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100)),
        {"input_ids": ids()},
    ),
    "bert": (lambda: T.BertModel(T.BertConfig(**SMALL)), {"input_ids": ids(), "token_type_ids": ids() * 0}),
    "t5": (
        lambda: T.T5Model(T.T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=2, vocab_size=100, d_kv=16)),
        {"input_ids": ids(), "decoder_input_ids": ids(4)},
    ),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**SMALL, num_key_value_heads=1)), {"input_ids": ids()}),
    "mixtral": (
        lambda: T.MixtralForCausalLM(T.MixtralConfig(**SMALL, num_key_value_heads=1, num_local_experts=4)),
        {"input_ids": ids()},
    ),
    "vit": (
        lambda: T.ViTModel(
            T.ViTConfig(**{k: v for k, v in SMALL.items() if k != "vocab_size"}, image_size=32, patch_size=8)
        ),
        {"pixel_values": torch.zeros(1, 3, 32, 32)},
    ),
    "whisper": (
        lambda: T.WhisperModel(
            T.WhisperConfig(
                vocab_size=100,
                num_mel_bins=16,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=2,
                decoder_attention_heads=2,
                d_model=32,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                max_source_positions=50,
                max_target_positions=32,
                pad_token_id=0,
                decoder_start_token_id=1,
            )
        ),
        {"input_features": torch.zeros(1, 16, 100), "decoder_input_ids": ids(4)},
    ),
    "wav2vec2": (
        lambda: T.Wav2Vec2Model(
            T.Wav2Vec2Config(
                **SMALL,
                conv_dim=(16, 16),
                conv_stride=(5, 2),
                conv_kernel=(10, 3),
                num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=4,
            )
        ),
        {"input_values": torch.zeros(1, 4000)},
    ),
    "resnet": (
        lambda: T.ResNetModel(T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])),
        {"pixel_values": torch.zeros(1, 3, 32, 32)},
    ),
}


def unreached_outputs(insp) -> list[str]:
    nodes, g = insp.frames["graph_nodes"], insp.graph
    after: dict[int, list[int]] = {}
    for s, d in zip(g["producer"].tolist(), g["consumer"].tolist()):
        after.setdefault(s, []).append(d)
    kinds = dict(zip(nodes["node"].tolist(), nodes["kind"].tolist()))
    todo, seen = [n for n, k in kinds.items() if k == "input"], set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += after.get(n, [])
    return [name for n, k, name in zip(nodes["node"], nodes["kind"], nodes["name"]) if k == "output" and n not in seen]


@pytest.mark.parametrize("name", sorted(ZOO))
def test_every_output_is_reached_from_an_input_and_meta_equals_real(name):
    build, inputs = ZOO[name]
    torch.manual_seed(0)
    real_model = build().eval()
    with torch.device("meta"):
        meta_model = build().eval()
    real = nbinspect.trace(real_model, **inputs)
    meta = nbinspect.trace(meta_model, **inputs)
    nodes = real.frames["graph_nodes"]
    assert (nodes["kind"] == "output").any() and (nodes["kind"] == "input").any()
    assert unreached_outputs(real) == []
    assert meta.frames["graph"].equals(real.frames["graph"])
    assert meta.frames["graph_nodes"].equals(nodes)


@pytest.mark.parametrize(
    ("config", "layers"),
    [
        ({}, 32),
        (
            {
                "hidden_size": 8192,
                "intermediate_size": 28672,
                "num_hidden_layers": 80,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
            },
            80,
        ),
    ],
    ids=["7b", "70b"],
)
def test_llama_configs_on_meta_fold_and_mark_rotary_as_side_input(config, layers):
    with torch.device("meta"):
        model = T.AutoModelForCausalLM.from_config(T.LlamaConfig(**config))
    insp = nbinspect.trace(model, (1, 128), input_dtype=torch.long)
    nodes, g = insp.frames["graph_nodes"], insp.graph
    assert set(nodes["fold_label"].dropna()) == {f"layers.0–{layers - 1} ×{layers}"}
    assert (nodes["fold_count"] == layers).sum() == layers
    side = g[g["side"]]
    assert set(side["producer_name"]) == {"model.rotary_emb"}
    assert len(side) == 4 * layers  # cos and sin, into q's and k's rotation, in every layer
    assert unreached_outputs(insp) == []
