"""The backend conformance suite: the same model in every backend gives the same frames.

One small network (two Linears with a ReLU between, the same weights everywhere) is built in
each backend that runs here; every frame that does not depend on the framework must agree
with torch's: parameter names, shapes, counts and bytes, the module tree's counts, the
weight statistics (float tolerance, identical histograms), the traced shapes and FLOPs, the
memory plan, and nothing about the model may change. A new backend adds one builder to
``BUILDERS`` (vLLM's engines are checked against the same figures in tests/vllm/).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import nbinspect

DIMS = (8, 16, 4)
BATCH = 3


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for i, (a, b) in enumerate(itertools.pairwise(DIMS)):
        out[f"layers.{i}.weight"] = rng.standard_normal((b, a)).astype(np.float32)
        out[f"layers.{i}.bias"] = rng.standard_normal(b).astype(np.float32)
    return out


def _torch(weights: dict[str, np.ndarray]) -> tuple[Any, Any, Callable[[Any], dict[str, np.ndarray]]]:
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in itertools.pairwise(DIMS))

        def forward(self, x):
            return self.layers[1](torch.relu(self.layers[0](x)))

    net = Net()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    values = lambda m: {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}  # noqa: E731
    return net, torch.zeros(BATCH, DIMS[0]), values


def _mlx(weights: dict[str, np.ndarray]) -> tuple[Any, Any, Callable[[Any], dict[str, np.ndarray]]]:
    from tests.mlx_models import mx, nn, tree_flatten

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(a, b) for a, b in itertools.pairwise(DIMS)]

        def __call__(self, x):
            return self.layers[1](nn.relu(self.layers[0](x)))

    net = Net()
    net.load_weights([(k, mx.array(v)) for k, v in weights.items()])
    values = lambda m: {k: np.array(v) for k, v in tree_flatten(m.parameters())}  # noqa: E731
    return net, mx.zeros((BATCH, DIMS[0])), values


BUILDERS = {"torch": _torch, "mlx": _mlx}
TENSOR_COLUMNS = ["name", "module", "kind", "shape", "dtype", "numel", "bytes", "requires_grad"]
LAYER_COLUMNS = ["name", "parent", "depth", "is_leaf", "params", "own_params", "trainable_params", "param_bytes"]
STAT_COLUMNS = ["numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf"]


@pytest.fixture(scope="module")
def reference():
    model, x, _ = _torch(_weights())
    return nbinspect.inspect(model, input=x), nbinspect.memory(model, input=x, optimizer="adam")


@pytest.mark.parametrize("backend", sorted(BUILDERS))
def test_equivalent_models_give_equal_frames(backend, reference):
    want, want_plan = reference
    model, x, values = BUILDERS[backend](_weights())
    before = values(model)
    got = nbinspect.inspect(model, input=x)
    plan = nbinspect.memory(model, input=x, optimizer="adam")

    assert got.framework == backend
    for key in ("total_params", "trainable_params", "non_trainable_params", "param_bytes", "num_modules"):
        assert got.totals[key] == want.totals[key], key
    order = lambda f: f.sort_values("name").reset_index(drop=True)  # noqa: E731
    params, ref_params = order(got.params), order(want.params)
    assert params["name"].tolist() == ref_params["name"].tolist()
    assert params["shape"].tolist() == ref_params["shape"].tolist()
    for col in ("kind", "numel", "bytes", "requires_grad"):
        assert params[col].tolist() == ref_params[col].tolist(), col
    for col in ("name", "depth", "is_leaf", "params", "own_params", "trainable_params", "param_bytes"):
        assert got.layers[col].tolist() == want.layers[col].tolist(), col

    stats, ref_stats = order(got.stats), order(want.stats)
    for col in STAT_COLUMNS:
        np.testing.assert_allclose(stats[col].astype(float), ref_stats[col].astype(float), rtol=1e-6, err_msg=col)
    for a, b in zip(stats["hist_counts"], ref_stats["hist_counts"]):
        assert np.array_equal(a, b)

    assert got.totals["flops"] == want.totals["flops"] > 0
    shapes = dict(zip(got.layers["name"], got.layers["output_shapes"]))
    assert shapes == dict(zip(want.layers["name"], want.layers["output_shapes"]))
    whole = lambda p: dict(p[p["layer"].isna()][["component", "bytes"]].itertuples(index=False))  # noqa: E731
    for component in ("parameters", "gradients", "inputs"):
        assert whole(plan)[component] == whole(want_plan)[component], component
    # Activations follow each backend's documented rule, hand-counted here: torch measures the
    # tensors autograd saves (ReLU's output, which the second Linear reuses: 3 x 16 float32);
    # MLX has no saved-tensor hooks and counts every module call's output arrays (the first
    # Linear's 3 x 16 and the second's 3 x 4; its ReLU is a function, not a module).
    hand = {"torch": BATCH * DIMS[1] * 4, "mlx": BATCH * (DIMS[1] + DIMS[2]) * 4}
    assert whole(plan)["activations"] == hand[backend]
    # Adam's two moments per parameter are the same bytes everywhere; the step and learning-rate
    # scalars are each library's own (torch.optim: a float32 step per tensor; mlx.optimizers:
    # one uint64 step and one float32 rate), so only they may differ.
    moments = 2 * whole(want_plan)["parameters"]
    assert moments < whole(plan)["optimizer_state"] <= moments + 8 * len(params)

    after = values(model)  # no side effects: every value as it was
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)
