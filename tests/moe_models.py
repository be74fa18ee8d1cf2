"""Mixture-of-experts models for the tests and benchmarks, built locally (no downloads)."""

from __future__ import annotations

import torch
from torch import nn


class Expert(nn.Module):
    """One SwiGLU expert as older code wrote it: three nn.Linear."""

    def __init__(self, d: int, ffn: int):
        super().__init__()
        self.w1 = nn.Linear(d, ffn, bias=False)
        self.w3 = nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class LinearExpertsBlock(nn.Module):
    """A router and one module per expert; every expert runs on every token, masked by the
    router's top-k (dense, so it traces on fake tensors too)."""

    def __init__(self, d: int, ffn: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(Expert(d, ffn) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        weights, chosen = self.gate(h).softmax(-1).topk(self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            share = (weights * (chosen == e)).sum(-1, keepdim=True)
            out = out + share * expert(h)
        return x + out


class LinearExpertsLM(nn.Module):
    """Embedding, `layers` MoE blocks of `experts` nn.Linear experts each, a head."""

    def __init__(self, layers: int = 2, experts: int = 8, d: int = 16, ffn: int = 32, top_k: int = 2, vocab: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LinearExpertsBlock(d, ffn, experts, top_k) for _ in range(layers))
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


LLAMA_70B = {  # Llama-2/3-70B shapes (transformers' LlamaConfig keywords)
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
}


def hf_moe(config_class: type, dtype: torch.dtype = torch.float32, device: str = "meta", **overrides) -> nn.Module:
    """A transformers causal LM from `config_class` defaults (plus overrides), built on `device`."""
    from transformers import AutoModelForCausalLM

    config = config_class(**overrides)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=dtype)
