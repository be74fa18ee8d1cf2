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


def test_value_grid_from_python_on_a_model_and_a_result():
    torch.manual_seed(0)
    m = nn.Linear(30, 200)
    with torch.no_grad():
        m.weight[120, 7] = float("-inf")
    got = nbinspect.value_grid(m, "weight", height=20, width=30)
    assert got["header"]["block"] == [10, 1] and got["header"]["counts"]["neginf"] == 1
    x = m.weight.detach().double().numpy()
    want = np.array([[np.mean(c[np.isfinite(c)]) for c in x[10 * i : 10 * i + 10].T] for i in range(20)])
    np.testing.assert_allclose(got["value"], want, rtol=1e-6)
    assert got["index"][12, 7] == 253 and got["flags"][12, 7] & 4  # -Inf's colour and flag
    cmp = nbinspect.compare(m, m)
    delta = nbinspect.value_grid(cmp, "weight", side="delta")["value"]  # -inf - -inf is NaN; the rest 0
    assert delta.shape == (200, 30) and np.argwhere(np.isnan(delta)).tolist() == [[120, 7]]
    assert np.count_nonzero(np.nan_to_num(delta)) == 0
