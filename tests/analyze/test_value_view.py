"""Region requests on a comparison (Δ = b − a, a, b) and on an MLX model, against the
values computed here in float64."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import nbinspect


def values(access, request):
    header, buffers = access.region({"height": 512, "width": 512, **request})
    assert header["state"] == "ok", header["message"]
    return header, np.frombuffer(buffers[2]).reshape(header["grid"])


def test_the_delta_and_each_side_of_a_comparison():
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(40, 30), nn.Linear(30, 5))
    b = nn.Sequential(nn.Linear(40, 30), nn.Linear(30, 5), nn.Linear(5, 2))
    with torch.no_grad():
        b[0].weight.copy_(a[0].weight)
        b[0].weight[4, 6] += 0.5
        b[1].weight.copy_(a[1].weight)
    cmp = nbinspect.compare(a, b)
    header, delta = values(cmp.values, {"tensor": "0.weight", "side": "delta"})
    want = (b[0].weight - a[0].weight).double().detach().numpy()
    np.testing.assert_allclose(delta, want, atol=1e-7)
    assert np.argwhere(np.abs(delta) > 0.1).tolist() == [[4, 6]]
    for side, model in (("a", a), ("b", b)):
        _, got = values(cmp.values, {"tensor": "0.weight", "side": side})
        np.testing.assert_array_equal(got, model[0].weight.double().detach().numpy())
    # a tensor only b holds: b shows it, a and Δ say why not
    assert values(cmp.values, {"tensor": "2.weight", "side": "b"})[0]["shape"] == [2, 5]
    for side in ("a", "delta"):
        header, _ = cmp.values.region({"tensor": "2.weight", "side": side})
        assert header["state"] == "unavailable" and "not a tensor" in header["message"]
    header, _ = cmp.values.region({"tensor": "0.weight", "side": "c"})
    assert header["state"] == "unavailable"


def test_an_mlx_model_shows_its_values():
    from tests.mlx_models import MLP, mx

    model = MLP()
    w = np.array(model.layers[1].weight)
    w[7, 3] = np.nan
    model.layers[1].weight = mx.array(w)
    insp = nbinspect.inspect(model)
    header, got = values(insp.values, {"tensor": "layers.1.weight"})
    np.testing.assert_array_equal(got, w.astype(np.float64))
    assert header["counts"]["nan"] == 1 and header["dtype"] == "float32"
    frame = insp.locate("nan")
    assert frame["tensor"].tolist() == ["layers.1.weight"] and frame["index"].tolist() == [(7, 3)]
    model.layers[0].weight = model.layers[0].weight.astype(mx.bfloat16)
    header, got = values(nbinspect.inspect(model).values, {"tensor": "layers.0.weight"})
    np.testing.assert_array_equal(got, np.array(model.layers[0].weight.astype(mx.float32)).astype(np.float64))
