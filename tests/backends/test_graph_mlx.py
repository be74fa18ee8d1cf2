"""The MLX trace records the dataflow too: module calls and the array operations between
them, checked against hand-written dataflow of small models."""

from __future__ import annotations

from collections import Counter

import pytest

import nbinspect

mx = pytest.importorskip("mlx.core")
nn = pytest.importorskip("mlx.nn")


def finest(insp) -> Counter:
    nodes = insp.frames["graph_nodes"]
    label = {
        int(n): f"{k}:{name}" if k in ("input", "output") else name or "<root>"
        for n, k, name in zip(nodes["node"], nodes["kind"], nodes["name"])
    }
    g = insp.graph
    return Counter(zip((label[int(s)] for s in g["producer"]), (label[int(d)] for d in g["consumer"])))


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)

    def __call__(self, x):
        return x + self.fc(self.norm(x))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(8, 8) for _ in range(4))

    def __call__(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        a = mx.softmax(q @ k.swapaxes(-1, -2) / 8**0.5, axis=-1)
        return self.o(a @ v)


def test_residual():
    insp = nbinspect.trace(Residual(), mx.zeros((2, 8)))
    assert finest(insp) == Counter(
        [("input:0", "norm"), ("norm", "fc"), ("fc", "add"), ("input:0", "add"), ("add", "output:output")]
    )
    assert set(insp.graph["dtype"]) == {"float32"}
    assert set(insp.graph["bytes"]) == {2 * 8 * 4}


def test_attention_with_functional_matmul_and_softmax():
    insp = nbinspect.trace(Attention(), mx.zeros((2, 4, 8)))
    assert finest(insp) == Counter(
        [
            ("input:0", "q"),
            ("input:0", "k"),
            ("input:0", "v"),
            ("q", "matmul"),
            ("k", "matmul"),
            ("matmul", "truediv"),
            ("truediv", "softmax"),
            ("softmax", "matmul"),
            ("v", "matmul"),
            ("matmul", "o"),
            ("o", "output:output"),
        ]
    )
    via = insp.graph[insp.graph["producer_name"] == "k"]["via"].tolist()
    assert via == ["swapaxes"]


def test_functions_are_put_back():
    before = (mx.array.__add__, mx.softmax, mx.array.swapaxes)
    nbinspect.trace(Attention(), mx.zeros((2, 4, 8)))
    assert (mx.array.__add__, mx.softmax, mx.array.swapaxes) == before
