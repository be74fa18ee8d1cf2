"""Adding a framework is one backend folder plus one registry line: a toy framework (a model
that is a dict of numpy arrays) gets every frame, statistics, the JSON export and the widget
payload without any other part of nbinspect knowing it."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import torch

import nbinspect
from nbinspect import backends
from nbinspect.core.tree import StoredTensor, build_source


class ToyModel:
    """The toy framework's model: named arrays, dotted paths for modules."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = arrays


class ToyBackend:
    name = "toy"

    def recognizes(self, obj):
        return isinstance(obj, ToyModel)

    def source(self, obj, name):
        stored = []
        for k, a in obj.arrays.items():
            t = torch.from_numpy(a)
            stored.append(StoredTensor(k, a.shape, str(t.dtype).removeprefix("torch."), a.nbytes, ("toy", k), t))
        return build_source(name or "ToyModel", stored, framework=self.name)


@pytest.fixture
def toy(monkeypatch):
    module = types.ModuleType("nbinspect.backends.toy")
    module.BACKEND = ToyBackend()  # what backends/toy/__init__.py would define
    monkeypatch.setitem(sys.modules, "nbinspect.backends.toy", module)
    monkeypatch.setattr(backends, "_REGISTRY", ("toy", *backends._REGISTRY))  # the one registry line
    backends.backend_named.cache_clear()
    yield
    backends.backend_named.cache_clear()


def test_a_new_framework_needs_only_its_backend(toy):
    rng = np.random.default_rng(0)
    arrays = {"enc.w": rng.standard_normal((4, 3)).astype(np.float32), "head.w": np.zeros((2, 4), np.float32)}
    insp = nbinspect.inspect(ToyModel(arrays))
    assert insp.framework == "toy" and insp.totals["total_params"] == 12 + 8
    assert insp.layers["name"].tolist() == ["", "enc", "head"]
    stats = insp.stats.set_index("name")
    assert stats.loc["enc.w", "mean"] == pytest.approx(float(arrays["enc.w"].astype(np.float64).mean()), rel=1e-12)
    assert stats.loc["head.w", "zeros"] == 1.0
    problems = dict(zip(insp.health["name"], insp.health["problems"]))
    assert problems["head.w"] == "all zero" and not problems["enc.w"]
    assert insp.to_dict()["model"]["framework"] == "toy" and insp._payload()["model"]["framework"] == "toy"
