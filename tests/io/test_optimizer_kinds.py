"""A bare state_dict's parameters and buffers told apart by the optimizer state saved beside it
(issue 26, seed 002: a sinusoidal `freqs` buffer was counted as a trainable parameter)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nbinspect
from nbinspect.schema import BUFFER, PARAMETER


class WithBuffers(nn.Module):
    """Floating buffers between parameters, one of a parameter's shape (16,)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 16)
        self.register_buffer("freqs", torch.arange(8.0))
        self.norm = nn.LayerNorm(16)
        self.register_buffer("mask", torch.ones(16))
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h = self.norm(self.embed(x)) * self.mask
        return self.head(h) + self.freqs[:2]


def _saved(tmp_path, model, optimizer, **extra):
    model(torch.randn(3, 4)).pow(2).mean().backward()
    optimizer.step()
    path = tmp_path / "ckpt.pt"
    torch.save({"model_state_dict": model.state_dict(), "optimizer_state_dict": optimizer.state_dict(), **extra}, path)
    return path


def _kinds(path):
    source = nbinspect.load_checkpoint(path)
    return {t.name: t.kind for t in source.tensors}, source


@pytest.mark.parametrize("optimizer", [torch.optim.AdamW, torch.optim.RMSprop, torch.optim.Adagrad])
def test_kinds_from_the_optimizer_state_are_the_models(tmp_path, optimizer):
    torch.manual_seed(0)
    model = WithBuffers()
    kinds, source = _kinds(_saved(tmp_path, model, optimizer(model.parameters(), lr=1e-3)))
    truth = {n: PARAMETER for n, _ in model.named_parameters()} | {n: BUFFER for n, _ in model.named_buffers()}
    assert kinds == truth
    trainable = sum(t.numel for t in source.tensors if t.requires_grad)
    assert trainable == sum(p.numel() for p in model.parameters()) == 4 * 16 + 16 + 32 + 16 * 2 + 2
    assert "the 6 tensors it trains are parameters, the other 2" in source.metadata["kinds"]


def test_sgd_momentum_and_a_frozen_parameter(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    model[0].requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    model(torch.randn(3, 4)).pow(2).mean().backward()
    opt.step()
    path = tmp_path / "frozen.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    kinds, source = _kinds(path)
    # a frozen parameter is not in the optimizer: it reads as a buffer, and the note says it might be one
    assert kinds == {"0.weight": BUFFER, "0.bias": BUFFER, "2.weight": PARAMETER, "2.bias": PARAMETER}
    assert "a frozen parameter would be among them" in source.metadata["kinds"]


def test_shapes_that_fit_two_ways_are_not_guessed(tmp_path):
    torch.manual_seed(0)
    model = WithBuffers()  # embed.bias (16,) could be matched by norm.*, or mask, as well
    trained = [model.embed.weight, model.embed.bias, model.head.weight, model.head.bias]
    kinds, source = _kinds(_saved(tmp_path, model, torch.optim.SGD(trained, lr=0.1, momentum=0.9)))
    assert set(kinds.values()) == {PARAMETER} and "more than one way" in source.metadata["kinds"]


def test_an_ambiguous_layout_keeps_the_kinds_by_name(tmp_path):
    class Ambiguous(nn.Module):  # parameter (16,), buffer (16,), parameter (16,): the buffer could be either
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.ones(16))
            self.register_buffer("b", torch.ones(16))
            self.c = nn.Parameter(torch.ones(16))

        def forward(self, x):
            return (x * self.a * self.b * self.c).sum()

    model = Ambiguous()
    path = tmp_path / "amb.pt"
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(16)).backward()
    opt.step()
    torch.save({"state_dict": model.state_dict(), "optimizer": opt.state_dict()}, path)
    kinds, source = _kinds(path)
    assert set(kinds.values()) == {PARAMETER}  # as before: by name
    assert "more than one way" in source.metadata["kinds"]


def test_without_a_usable_optimizer_state_the_kinds_are_by_name(tmp_path):
    torch.manual_seed(0)
    model = WithBuffers()
    groups = [{"params": [model.embed.weight, model.head.weight]}, {"params": [model.embed.bias, model.head.bias]}]
    two = torch.optim.Adam([*groups, {"params": list(model.norm.parameters())}])
    kinds, source = _kinds(_saved(tmp_path, model, two))
    assert kinds["freqs"] == PARAMETER and "param groups" in source.metadata["kinds"]  # the order is not the model's

    plain = tmp_path / "plain.pt"
    torch.save(model.state_dict(), plain)
    kinds, source = _kinds(plain)
    assert kinds["mask"] == PARAMETER and "kinds" not in source.metadata  # nothing says otherwise: unchanged
