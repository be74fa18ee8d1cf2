"""Built-in example models: small, seeded, local code only. Docs, tests and the demo use them.

>>> from nbinspect import examples
>>> model = examples.build("tiny_lm")
>>> x = examples.example_input("tiny_lm")

Building a model seeds its own RNG fork, so it is the same every time and the caller's
global RNG state is left as it was.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "MLP",
    "PartlyFrozenNet",
    "SharedLayerNet",
    "SmallCNN",
    "TinyLM",
    "build",
    "example_input",
    "names",
]


class SmallCNN(nn.Module):
    """Two conv blocks with BatchNorm and a linear classifier, for 3x32x32 images."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class MLP(nn.Module):
    def __init__(self, in_features: int = 32, hidden: tuple[int, ...] = (64, 64), out_features: int = 10):
        super().__init__()
        dims = (in_features, *hidden)
        blocks: list[nn.Module] = []
        for a, b in itertools.pairwise(dims):
            blocks += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(*blocks)
        self.head = nn.Linear(dims[-1], out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head)
        self.ln_2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyLM(nn.Module):
    """A GPT-style language model whose output head shares the token embedding's weight."""

    def __init__(self, vocab_size: int = 256, d_model: int = 64, n_layer: int = 2, n_head: int = 4, context: int = 32):
        super().__init__()
        self.context = context
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied: one tensor at two paths

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class SharedLayerNet(nn.Module):
    """Calls one Linear twice in forward, and also registers it under a second name."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.inp = nn.Linear(8, width)
        self.shared = nn.Linear(width, width)
        self.again = self.shared  # the same module object at a second path
        self.out = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.inp(x))
        x = torch.relu(self.shared(x))
        x = torch.relu(self.shared(x))
        return self.out(x)


class PartlyFrozenNet(nn.Module):
    """A frozen backbone, a trainable head, buffers of several dtypes, and a raw parameter
    on a parent that also has children."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU())
        self.head = nn.Linear(32, 3)
        self.temperature = nn.Parameter(torch.ones(1))
        self.register_buffer("class_mask", torch.ones(3, dtype=torch.int8))
        self.register_buffer("label_smoothing", torch.tensor([0.1], dtype=torch.float16))
        self.backbone.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.backbone(x)) / self.temperature
        return logits.masked_fill(self.class_mask == 0, float("-inf"))


@dataclass(frozen=True)
class _Example:
    factory: Callable[[], nn.Module]
    make_input: Callable[[], torch.Tensor]
    doc: str


_EXAMPLES: dict[str, _Example] = {
    "cnn": _Example(SmallCNN, lambda: torch.randn(2, 3, 32, 32), "small CNN with BatchNorm"),
    "mlp": _Example(MLP, lambda: torch.randn(4, 32), "three-layer MLP"),
    "tiny_lm": _Example(TinyLM, lambda: torch.randint(0, 256, (2, 16)), "tiny transformer LM, tied head"),
    "shared": _Example(SharedLayerNet, lambda: torch.randn(4, 8), "one Linear called twice"),
    "frozen": _Example(PartlyFrozenNet, lambda: torch.randn(4, 16), "frozen backbone and buffers"),
}


def names() -> list[str]:
    """The names :func:`build` accepts."""
    return list(_EXAMPLES)


def _lookup(name: str) -> _Example:
    try:
        return _EXAMPLES[name]
    except KeyError:
        raise ValueError(f"unknown example {name!r}; choose one of {names()}") from None


def build(name: str, seed: int = 0) -> nn.Module:
    """A freshly initialised example model, the same for the same seed."""
    example = _lookup(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return example.factory()


def example_input(name: str, seed: int = 0) -> torch.Tensor:
    """A batch the example model accepts."""
    example = _lookup(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return example.make_input()
