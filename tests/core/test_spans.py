"""The torch walk's byte spans prove a model free of ties and overlapping views without
indexing storage keys (ModelSource._apart). Checked against the same source without the
spans (the general path: storage keys indexed, overlap groups built) on models with and
without ties, aliases, overlapping, transposed, meta, lazy and packed tensors."""

from __future__ import annotations

import dataclasses
import warnings

import pandas as pd
import pytest
import torch
from torch import nn

from nbinspect.analyze import structure
from nbinspect.backends import as_source
from nbinspect.backends.torch.source import storage_key


def _tied() -> nn.Module:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
    model[1].weight = model[0].weight
    return model


def _aliased() -> nn.Module:
    shared = nn.Linear(4, 4)
    return nn.Sequential(shared, nn.ReLU(), shared)


def _views(a: slice, b: slice) -> nn.Module:
    x = torch.zeros(8)
    model = nn.Module()
    model.register_parameter("a", nn.Parameter(x[a]))
    model.register_buffer("b", x[b])
    return model


def _transposed() -> nn.Module:
    model = nn.Linear(4, 3)
    model.register_buffer("t", model.weight.detach().T)  # the weight's elements again, transposed
    return model


def _same_memory_twice() -> nn.Module:
    x = torch.zeros(6)
    model = nn.Module()
    model.register_buffer("a", x.view(2, 3))
    model.register_buffer("b", x.view(3, 2))  # another tensor object, the same elements
    return model


def _meta() -> nn.Module:
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))


def _packed() -> nn.Module:
    return torch.ao.nn.quantized.Linear(4, 4)


def _not_strided() -> nn.Module:
    model = nn.Linear(3, 3)
    model.register_buffer("coo", torch.eye(3).to_sparse())
    with warnings.catch_warnings():  # "beta"
        warnings.simplefilter("ignore")
        model.register_buffer("csr", torch.eye(3).to_sparse_csr())
    model.register_buffer("mkldnn", torch.eye(3).to_mkldnn())
    return model


MODELS = {
    "plain": lambda: nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)),
    "tied": _tied,
    "aliased": _aliased,
    "overlapping": lambda: _views(slice(0, 5), slice(3, 8)),
    "touching": lambda: _views(slice(0, 4), slice(4, 8)),
    "inside": lambda: _views(slice(0, 8), slice(2, 4)),
    "transposed": _transposed,
    "same_memory_twice": _same_memory_twice,
    "meta": _meta,
    "lazy": lambda: nn.Sequential(nn.LazyLinear(3), nn.Linear(3, 3)),
    "packed": _packed,
    "empty": nn.Module,
    "not_strided": _not_strided,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_spans_decide_as_the_storage_keys_do(name):
    source = as_source(MODELS[name]())
    general = dataclasses.replace(source)  # the same entries, no spans
    assert "spans" not in general.derived
    assert source.overlap_groups == general.overlap_groups
    assert source.tied() == general.tied()
    assert source.overlaps() == general.overlaps()
    if source._apart:  # a proof: no storage at two paths, nothing overlapping
        assert len(source.unique_tensors()) == len(source.tensors) and not general.overlap_groups
    for frame in (structure.params, structure.layers, structure.by_type):
        pd.testing.assert_frame_equal(frame(source), frame(general), check_exact=True)
    assert structure.totals(source) == structure.totals(general)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_walk_keys_tensors_as_storage_key_does(name):
    """The walk's shortcut for contiguous tensors gives each the key storage_key gives it."""
    source = as_source(MODELS[name]())
    for t in source.tensors:
        if t.shape is not None:  # lazy ones are keyed by identity
            assert t.storage_key == storage_key(t.tensor), t.name
            assert t.device == str(t.tensor.device) and t.requires_grad == (
                t.kind == "parameter" and t.tensor.requires_grad
            )


def test_spans_prove_a_plain_model_and_not_a_tied_one():
    assert as_source(MODELS["plain"]())._apart
    assert as_source(MODELS["touching"]())._apart  # spans that touch share no element
    for name in ("tied", "aliased", "overlapping", "inside", "transposed", "same_memory_twice", "meta", "packed"):
        assert not as_source(MODELS[name]())._apart, name


def _mixed(gone: bool = True) -> nn.Module:
    """Frozen, empty, strided, None, half-precision and grad-requiring tensors in one model."""
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.Embedding(4, 2), nn.Linear(2, 2).half())
    model[0].weight.requires_grad_(False)
    if gone:  # a parameter set to None: read tensor by tensor
        model[0].register_parameter("gone", None)
    model[1].register_buffer("grad_buffer", torch.ones(2, requires_grad=True))
    model[2].register_parameter("empty", nn.Parameter(torch.zeros(0)))
    model[2].register_buffer("strided", torch.zeros(4, 4)[:, ::2])
    return model


@pytest.mark.parametrize("name", [*MODELS, "mixed", "mixed_read_at_once"])
def test_the_columns_read_at_once_are_the_rows_read_tensor_by_tensor(name):
    """from_module reads each field of every tensor by one C loop (or, where it cannot, tensor
    by tensor): the same entries and spans as _tensor_row gives each tensor on its own."""
    from nbinspect.backends.torch.source import _tensor_row

    model = MODELS[name]() if name in MODELS else _mixed(gone=name == "mixed")
    source = as_source(model)
    own = {id(t) for t in source.walk.tensors}
    spans: list[int] = []
    for t in source.tensors:
        if id(t.tensor) in own:  # not a packed weight (its bytes add the quantization's)
            grad = t.kind == "parameter" and t.tensor.requires_grad
            row = _tensor_row(t.name, t.module, t.kind, t.tensor, grad, spans)
            fields = [f.name for f in dataclasses.fields(t)][:10]  # up to the storage key
            assert tuple(getattr(t, f) for f in fields) == row[:10] and row[10] is t.tensor, t.name
    if len(spans) == 2 * len(source.tensors):  # every tensor's span: the proof's
        assert source.derived["spans"] == (spans[0::2], spans[1::2])
    else:  # no proof without every tensor's
        assert "spans" not in source.derived


def test_a_plain_model_is_read_column_by_column(monkeypatch):
    """The test above compares the column reads, not _tensor_row with itself."""
    from nbinspect.backends.torch import source as torch_source

    monkeypatch.setattr(torch_source, "_tensor_row", None)
    for name in ("plain", "tied", "aliased", "overlapping", "transposed", "meta"):
        assert as_source(MODELS[name]()).tensors
    assert as_source(_mixed(gone=False)).tensors
