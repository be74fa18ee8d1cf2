"""Small MLX models for the MLX tests, and their torch twins for FLOP checks.

Importing this module fails the run in CI (CI=true) when mlx cannot be imported: the
project installs it for the tests, so a missing mlx is a broken set-up, not a skip.
"""

from __future__ import annotations

import os
from itertools import pairwise

import pytest

try:
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten  # re-exported: test modules import it from here
except ImportError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("mlx is not installed (pip install 'mlx[cpu]')", allow_module_level=True)

import torch
import torch.nn.functional as F

__all__ = ["CNN", "MLP", "TinyLM", "TorchCNN", "TorchMLP", "TorchTinyLM", "mx", "nn", "tree_flatten"]


class MLP(nn.Module):
    def __init__(self, dims=(8, 32, 16, 4)):
        super().__init__()
        self.layers = [nn.Linear(a, b) for a, b in pairwise(dims)]
        self.drop = nn.Dropout(0.25)

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.drop(nn.relu(layer(x)))
        return self.layers[-1](x)


class Attention(nn.Module):
    """Hand-written attention: q @ kᵀ with the @ operator, softmax, then einsum with v."""

    def __init__(self, dims: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dims, 3 * dims, bias=False)
        self.out = nn.Linear(dims, dims)

    def __call__(self, x):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, -1).transpose(0, 2, 1, 3) for t in mx.split(self.qkv(x), 3, axis=-1))
        probs = mx.softmax((q @ k.swapaxes(-1, -2)) * (q.shape[-1] ** -0.5), axis=-1)
        y = mx.einsum("bhqk,bhkd->bhqd", probs, v)
        return self.out(y.transpose(0, 2, 1, 3).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, dims: int, heads: int, custom: bool):
        super().__init__()
        self.norm1 = nn.LayerNorm(dims)
        self.attn = Attention(dims, heads) if custom else nn.MultiHeadAttention(dims, heads)
        self.norm2 = nn.LayerNorm(dims)
        self.mlp = nn.Sequential(nn.Linear(dims, 4 * dims), nn.GELU(), nn.Linear(4 * dims, dims))

    def __call__(self, x):
        h = self.norm1(x)
        x = x + (self.attn(h) if isinstance(self.attn, Attention) else self.attn(h, h, h))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Embedding, two blocks (one nn.MultiHeadAttention, one hand-written), a head tied to the embedding."""

    def __init__(self, vocab: int = 50, dims: int = 32, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dims)
        self.blocks = [Block(dims, heads, custom=False), Block(dims, heads, custom=True)]
        self.norm = nn.RMSNorm(dims)
        self.head = nn.Linear(dims, vocab, bias=False)
        self.head.weight = self.embed.weight

    def __call__(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, groups=2)
        self.bn = nn.BatchNorm(16)
        self.up = nn.ConvTranspose2d(16, 4, 2, stride=2)
        self.conv1d = nn.Conv1d(4, 6, 3)
        self.fc = nn.Linear(6, 10)

    def __call__(self, x):  # x: (N, 32, 32, 3), channels last
        x = self.pool(nn.relu(self.conv1(x)))
        x = self.up(self.bn(self.conv2(x)))
        x = self.conv1d(x.reshape(x.shape[0], -1, x.shape[-1]))
        return self.fc(x.mean(axis=1))


# ------------------------------------------------------------------ torch twins (FLOPs only)


class TorchMLP(torch.nn.Module):
    def __init__(self, dims=(8, 32, 16, 4)):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in pairwise(dims))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class TorchBlock(torch.nn.Module):
    def __init__(self, dims: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dims), torch.nn.LayerNorm(dims)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dims, dims) for _ in range(4))
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dims, 4 * dims), torch.nn.GELU(), torch.nn.Linear(4 * dims, dims)
        )

    def forward(self, x):
        b, s, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, s, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(y.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


class TorchTinyLM(torch.nn.Module):
    def __init__(self, vocab: int = 50, dims: int = 32, heads: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dims)
        self.blocks = torch.nn.ModuleList([TorchBlock(dims, heads), TorchBlock(dims, heads)])
        self.head = torch.nn.Linear(dims, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, groups=2)
        self.up = torch.nn.ConvTranspose2d(16, 4, 2, stride=2)
        self.conv1d = torch.nn.Conv1d(4, 6, 3)
        self.fc = torch.nn.Linear(6, 10)

    def forward(self, x):  # x: (N, 3, 32, 32)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = self.up(self.conv2(x))
        x = self.conv1d(x.flatten(2))
        return self.fc(x.mean(dim=2))
