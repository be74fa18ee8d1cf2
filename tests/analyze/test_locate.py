"""locate(): exact against numpy references (np.argwhere, row/column scans), with and
without the statistics frame, on live models, a comparison's Δ, and tied weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect.schema import LOCATE


def planted(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(300, 500), nn.ReLU(), nn.Linear(500, 40))
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        w = m[0].weight
        for _ in range(14):
            w[int(rng.integers(500)), int(rng.integers(300))] = float("nan")
        w[3, 7] = float("inf")
        w[400, 2] = float("-inf")
        w[17].zero_()
        w[250].zero_()
        w[:, 123] = 0.0
        w[60, 61] = 5.0  # |x| > 6 std (std ~ 0.033)
        m[2].weight[5, 5] = float("nan")
    return m


def reference(t: torch.Tensor, what: str, k: float = 6.0) -> tuple[list[tuple[int, ...]], int]:
    x = t.detach().double().numpy()
    if what == "nan":
        hits = np.argwhere(np.isnan(x))
    elif what == "posinf":
        hits = np.argwhere(np.isposinf(x))
    elif what == "neginf":
        hits = np.argwhere(np.isneginf(x))
    elif what == "outlier":
        fin = x[np.isfinite(x)]
        hits = np.argwhere(np.abs(np.nan_to_num(x, nan=0, posinf=0, neginf=0)) > k * fin.std())
    elif what == "zero_row":
        hits = np.argwhere(np.all(x.reshape(x.shape[0], -1) == 0, axis=1))
    else:
        hits = np.argwhere(np.all(x.reshape(x.shape[0], -1) == 0, axis=0))
    return [tuple(int(i) for i in h) for h in hits], len(hits)


@pytest.mark.parametrize("stats", [True, False])
def test_locate_matches_numpy(stats):
    m = planted()
    insp = nbinspect.inspect(m, stats=stats)
    frame = insp.locate(["nan", "inf", "outliers", "dead"], first=5)
    LOCATE.validate(frame)
    for name, t in m.named_parameters():
        for what in ("nan", "posinf", "neginf", "outlier", "zero_row", "zero_column"):
            want, total = reference(t, what)
            rows = frame[(frame["tensor"] == name) & (frame["what"] == what)]
            assert [tuple(i) for i in rows["index"]] == want[:5], (name, what)
            assert rows["rank"].tolist() == list(range(len(rows)))
            assert (rows["total"] == total).all(), (name, what)
            if what in ("nan", "posinf", "neginf", "outlier"):
                vals = [t[i].item() for i in want[:5]]
                np.testing.assert_array_equal(rows["value"].to_numpy(), np.array(vals))
    assert frame.attrs["skipped"] == {}


def test_first_limits_the_listing_not_the_total():
    m = planted()
    insp = nbinspect.inspect(m)
    frame = insp.locate("nan", first=3)
    w = frame[frame["tensor"] == "0.weight"]
    assert len(w) == 3 and (w["total"] == int(torch.isnan(m[0].weight).sum())).all()
    assert insp.locate("nan", first=0).empty
    with pytest.raises(ValueError, match="unknown"):
        insp.locate("nans")


def test_tied_weights_are_listed_once_and_meta_tensors_are_skipped():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.emb.weight
            self.ghost = nn.Linear(3, 3, device="meta")

    m = Tied()
    with torch.no_grad():
        m.emb.weight[2, 1] = float("nan")
    frame = nbinspect.inspect(m, stats=False).locate("nan")
    assert frame["tensor"].tolist() == ["emb.weight"]
    assert frame["index"].tolist() == [(2, 1)]
    assert set(frame.attrs["skipped"]) == {"ghost.weight", "ghost.bias"}


def test_comparison_locates_in_the_delta():
    a = planted(1)
    b = planted(1)
    with torch.no_grad():
        for p in a.parameters():
            p.nan_to_num_(0.0, 0.0, 0.0)
        for p in b.parameters():
            p.nan_to_num_(0.0, 0.0, 0.0)
        b[0].weight[8, 9] += 3.0  # the one big change
        b[2].weight[1, 1] = float("nan")
    cmp = nbinspect.compare(a, b)
    outliers = cmp.locate("outliers")
    assert outliers[outliers["tensor"] == "0.weight"]["index"].tolist() == [(8, 9)]
    assert outliers[outliers["tensor"] == "0.weight"]["value"].tolist() == pytest.approx([3.0])
    nan = cmp.locate("nan")
    assert nan["index"].tolist() == [(1, 1)] and nan["tensor"].tolist() == ["2.weight"]
    assert cmp.locate("nan", side="a").empty


def test_locate_leaves_the_model_unchanged():
    from tests.conftest import assert_unchanged, model_state

    m = nn.Sequential(nn.Linear(30, 20), nn.Linear(20, 5))
    with torch.no_grad():
        m[0].weight[3].zero_()
        m[1].weight[0, 0] = float("inf")
    before = model_state(m)
    nbinspect.inspect(m).locate(["nan", "inf", "outliers", "dead"])
    assert_unchanged(before, model_state(m))


def test_a_deleted_model_has_no_values_and_says_so():
    import gc

    insp = nbinspect.inspect(planted())  # nothing else holds the model: the Inspection does not keep it alive
    gc.collect()
    with pytest.raises(ValueError, match="no longer exists"):
        insp.locate("nan")
    header, buffers = insp.values.region({"tensor": "0.weight"})
    assert header["state"] == "unavailable" and "no longer exists" in header["message"] and buffers == []
