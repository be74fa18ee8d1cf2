"""Partially overlapping views (some elements in common, not all): every distinct element is
counted once, at the first path that holds it, in totals, layers and by_type; the params frame
says which paths overlap. Counts checked against hand counts."""

from __future__ import annotations

import torch
from torch import nn

import nbinspect
from nbinspect.backends import as_source
from nbinspect.core import overlap


def _holder(**tensors: torch.Tensor) -> nn.Module:
    """A module with one child per name, holding the tensor as a parameter (a Parameter
    passed in) or a buffer (a plain tensor)."""
    root = nn.Module()
    for name, t in tensors.items():
        child = nn.Module()
        if isinstance(t, nn.Parameter):
            child.register_parameter("w", t)
        else:
            child.register_buffer("w", t)
        root.add_module(name, child)
    return root


def test_two_contiguous_views_of_three_elements_count_three():
    x = torch.zeros(3)
    model = _holder(a=nn.Parameter(x[0:2]), b=nn.Parameter(x[1:3]))
    totals = nbinspect.totals(model)
    assert (totals["total_params"], totals["param_bytes"], totals["total_params_by_path"]) == (3, 12, 4)
    layers = nbinspect.layers(model).set_index("name")
    assert list(layers["params"]) == [3, 2, 2]  # each child alone holds its 2 elements
    assert list(layers["own_params"]) == [0, 2, 1]  # the shared element at its first path
    params = nbinspect.params(model).set_index("name")
    assert params["tied_to"].isna().all()
    assert params["overlaps"].isna()["a.w"] and params.loc["b.w", "overlaps"] == "a.w"


def test_strided_views_count_the_exact_elements():
    y = torch.zeros(4, 4)
    model = nn.Module()
    model.register_parameter("c", nn.Parameter(y[:, 0:2]))  # columns 0, 1: 8 elements
    model.register_parameter("d", nn.Parameter(y[:, 1:3], requires_grad=False))  # column 2 is new: 4
    model.register_parameter("f", nn.Parameter(y[:, 3]))  # column 3: 4 new, its span meets the others
    model.register_buffer("e", y[::2, ::2])  # (0,0) (0,2) (2,0) (2,2): all held by c and d
    totals = nbinspect.totals(model)
    assert totals["total_params"] == 16 and totals["trainable_params"] == 12
    assert totals["non_trainable_params"] == 4 and totals["buffer_numel"] == 0 and totals["buffer_bytes"] == 0
    overlaps = nbinspect.params(model).set_index("name")["overlaps"]
    assert overlaps["d"] == "c" and overlaps["e"] == "c, d" and overlaps.isna()["f"]


def test_interleaved_views_meet_in_span_but_share_nothing():
    x = torch.zeros(6)
    model = _holder(even=nn.Parameter(x[0::2]), odd=nn.Parameter(x[1::2]))
    assert nbinspect.totals(model)["total_params"] == 6
    assert nbinspect.params(model)["overlaps"].isna().all()


def test_parameter_and_buffer_overlapping_across_modules():
    x = torch.zeros(10)
    model = _holder(p=nn.Parameter(x[0:6]), b=x[4:10], q=nn.Parameter(x[8:10]))
    totals = nbinspect.totals(model)
    # p: 0..5 (6 parameter elements); b: 6..9 new (4 buffer elements); q: nothing new
    assert (totals["total_params"], totals["buffer_numel"], totals["buffer_bytes"]) == (6, 4, 16)
    layers = nbinspect.layers(model).set_index("name")
    assert layers.loc["q", "params"] == 2 and layers.loc["", "params"] == 6
    assert layers["own_params"].sum() == totals["total_params"]
    assert (
        nbinspect.params(model).set_index("name").loc["q.w", "overlaps"] == "b.w"
    )  # p.w (0..5) shares nothing with it
    by_type = nbinspect.by_type(model)
    assert by_type["params"].sum() == 6 and by_type["share"].sum() == 100.0


def test_ties_are_still_ties_beside_overlaps():
    x = torch.zeros(5)
    first = nn.Parameter(x[0:3])
    model = _holder(a=first, b=first, c=nn.Parameter(x[2:5]))
    params = nbinspect.params(model).set_index("name")
    assert params.loc["b.w", "tied_to"] == "a.w" and params.loc["c.w", "overlaps"] == "a.w"
    assert nbinspect.totals(model)["total_params"] == 5


def test_no_overlap_means_no_group():
    source = as_source(nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)))
    assert source.overlap_groups == {} and source.overlaps() == {}


def test_past_the_exact_limit_views_are_counted_per_view_and_said(monkeypatch):
    monkeypatch.setattr(overlap, "MAX_EXACT_ELEMENTS", 8)
    y = torch.zeros(4, 4)
    model = _holder(a=nn.Parameter(y[:, 0:2]), b=nn.Parameter(y[:, 1:3]))
    assert nbinspect.totals(model)["total_params"] == 16  # 8 + 8, as the note says
    note = nbinspect.params(model).set_index("name").loc["b.w", "overlaps"]
    assert note.startswith("a.w (strided views over 8 elements overlap: counted per view")


def test_views_of_different_element_sizes_are_counted_per_view_and_said():
    x = torch.zeros(4)
    model = _holder(a=nn.Parameter(x[0:2]), b=x.view(torch.int16)[2:6])  # bytes 0..8 and 4..12
    totals = nbinspect.totals(model)
    assert (totals["total_params"], totals["buffer_numel"]) == (2, 4)
    note = nbinspect.params(model).set_index("name").loc["b.w", "overlaps"]
    assert note == "a.w (views of different element sizes or alignments overlap: counted per view)"


def test_many_views_of_one_block_stay_fast_and_exact(monkeypatch):
    monkeypatch.setattr(overlap, "MAX_PAIRWISE", 4)
    flat = torch.zeros(20_000)
    model = nn.Module()
    for i in range(5_000):  # disjoint 4-element views, then one view over all of them
        model.register_parameter(f"v{i}", nn.Parameter(flat[4 * i : 4 * i + 4]))
    model.register_parameter("all", nn.Parameter(flat))
    assert nbinspect.totals(model)["total_params"] == 20_000
    overlaps = nbinspect.params(model).set_index("name")["overlaps"]
    assert overlaps["all"] == "20,000 elements held by earlier views (one of 5,001)"
    assert overlaps.drop("all").isna().all()


def _direct_groups(keys: list) -> dict:
    """overlap.groups the direct way: every pair's byte spans compared, groups as the
    connected spans in order of their starts (numbered by first start)."""
    spans = {}
    for key in keys:
        if isinstance(key, tuple) and len(key) == 4 and key[0] == "mem":
            count = key[2] if isinstance(key[2], int) else sum((n - 1) * st for n, st in key[2]) + 1
            spans[key] = (key[1], key[1] + count * key[3].itemsize)
    meets = {k: {j for j in spans if j != k and spans[j][0] < spans[k][1] and spans[k][0] < spans[j][1]} for k in spans}
    out, group = {}, 0
    for key in sorted(spans, key=lambda k: spans[k][0]):
        if key in out or not meets[key]:
            continue
        todo = [key]
        while todo:  # everything reached through meeting spans
            k = todo.pop()
            if k not in out:
                out[k] = group
                todo += meets[k]
        group += 1
    return out


def test_groups_equal_a_pairwise_comparison():
    """Contiguous keys (numpy's path), strided ones (the exact path), other keys and
    addresses past int64, on random spans: the same groups as comparing every pair."""
    gen = torch.Generator().manual_seed(0)
    dtypes = [torch.float32, torch.float16, torch.float64, torch.int8]
    for trial in range(300):
        keys: list = [("id", trial), "file-key"]
        for _ in range(int(torch.randint(2, 9, (), generator=gen))):
            start, n = (int(v) for v in torch.randint(0, 400, (2,), generator=gen))
            dtype = dtypes[int(torch.randint(0, 4, (), generator=gen))]
            count: object = n + 1
            if trial % 3 == 1:  # a strided view among them
                count = ((n % 7 + 2, 3),)
            keys.append(("mem", 1000 + start, count, dtype))
        if trial % 10 == 2:
            keys.append(("mem", 2**64 + 5, 4, torch.float32))  # not an address of this machine
        assert overlap.groups(keys) == _direct_groups(keys), keys
