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
