"""Checkpoint weights vLLM fuses are matched to the served names; the rest are unmatched.
Runs without vLLM: a torch model laid out as vLLM serves Llama, and an HF-style folder."""

from __future__ import annotations

import torch
from safetensors.torch import save_file
from torch import nn

from nbinspect.analyze.compare import compare_frame
from nbinspect.backends.torch.source import from_module
from nbinspect.backends.vllm.worker import fused_checkpoint


class Served(nn.Module):
    """One layer of a Llama as vLLM holds it: q/k/v and gate/up fused, plus a projection
    whose fusion nbinspect is not told about (wqkv)."""

    def __init__(self):
        super().__init__()
        self.self_attn = nn.Module()
        self.self_attn.qkv_proj = nn.Linear(8, 8 + 4 + 4, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_up_proj = nn.Linear(8, 2 * 12, bias=False)
        self.mlp.down_proj = nn.Linear(12, 8, bias=False)
        self.other = nn.Module()
        self.other.wqkv = nn.Linear(8, 24, bias=False)


def test_fused_weights_match_and_unknown_fusions_are_unmatched(tmp_path):
    torch.manual_seed(0)
    served = Served()
    w = served.self_attn.qkv_proj.weight.detach()
    g = served.mlp.gate_up_proj.weight.detach()
    ckpt = {
        "self_attn.q_proj.weight": w[:8].clone(),
        "self_attn.k_proj.weight": w[8:12].clone(),
        "self_attn.v_proj.weight": w[12:].clone() + 1,  # differs: the fused row says changed
        "mlp.gate_proj.weight": g[:12].clone(),
        "mlp.up_proj.weight": g[12:].clone(),
        "mlp.down_proj.weight": served.mlp.down_proj.weight.detach().clone(),
        "other.wq.weight": torch.zeros(8, 8),  # fused into wqkv: a mapping nbinspect does not know
        "rotary.inv_freq": torch.ones(4),
    }
    save_file(ckpt, tmp_path / "model.safetensors")
    source = from_module(served)
    mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
    frame = compare_frame(fused_checkpoint(str(tmp_path), source, mapping), source).set_index("name")
    status = frame["status"].to_dict()
    assert status == {
        "mlp.down_proj.weight": "same",
        "other.wq.weight": "removed",  # only in the checkpoint: unmatched
        "rotary.inv_freq": "removed",
        "self_attn.qkv_proj.weight": "changed",
        "mlp.gate_up_proj.weight": "same",
        "other.wqkv.weight": "added",  # only served: unmatched
    }
    # the change is v's +1 over 4*8 of the 16*8 fused elements: |delta|^2 = 32
    assert abs(frame.loc["self_attn.qkv_proj.weight", "l2_delta"] - 32**0.5) < 1e-12
    assert frame.loc["self_attn.qkv_proj.weight", "shape_a"] == (16, 8)
