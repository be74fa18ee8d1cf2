"""The dataflow capture's inlined path for calls with one tensor argument and one tensor
output (``DataflowCapture.enter_one`` / ``exit_one``, most calls) records exactly what the
general path (``enter`` / ``exit``) records: every frame of the trace equal with each."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.backends.torch.dataflow import DataflowCapture
from tests.backends.test_graph_edges import InPlaceAndIdentity, KeywordInputs, Residual, TiedHead, Twice


class PassThrough(nn.Module):
    """A leaf returning its input, a container returning its child's input, a tensor made,
    dropped and its id possibly reused, and a call inside a call with children."""

    def __init__(self):
        super().__init__()
        self.same = nn.Identity()
        self.drop = nn.Dropout(0.5).eval()
        self.inner = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Sequential(nn.Identity(), nn.Linear(8, 8)))

    def forward(self, x):
        for _ in range(3):
            y = self.inner(x) * 2  # a temporary whose id a later tensor may take
            del y
        h = self.same(x)
        return self.drop(self.inner(h)) + h


def cases() -> dict:
    torch.manual_seed(0)
    out = {name: (examples.build(name), (examples.example_input(name),), {}) for name in examples.names()}
    out.update(
        residual=(Residual(), (torch.randn(2, 8),), {}),
        twice=(Twice(), (torch.randn(2, 8),), {}),
        tied=(TiedHead(), (torch.tensor([[1, 2, 3]]),), {}),
        keywords=(KeywordInputs(), (torch.randn(2, 4),), {"mask": torch.ones(2, 4)}),
        inplace=(InPlaceAndIdentity(), (torch.randn(4, 4),), {}),
        pass_through=(PassThrough(), (torch.randn(2, 8),), {}),
        leaf_root=(nn.Linear(8, 8), (torch.randn(2, 8),), {}),
    )
    return out


CASES = cases()


def general(monkeypatch) -> None:
    """Route the inlined calls through the general methods."""
    monkeypatch.setattr(
        DataflowCapture,
        "enter_one",
        lambda self, key, index, name, x, shape, nbytes: self.enter_key(key, index, name, (x,), {}),
    )
    monkeypatch.setattr(DataflowCapture, "exit_one", lambda self, key, node, out: self.exit_by_key(key, node, out))


@pytest.mark.parametrize("case", sorted(CASES))
def test_inlined_calls_record_what_the_general_path_records(case, monkeypatch):
    model, args, kwargs = CASES[case]
    taken = []
    real = DataflowCapture.enter_one

    def counting(self, *a):
        taken.append(1)
        return real(self, *a)

    with monkeypatch.context() as m:
        m.setattr(DataflowCapture, "enter_one", counting)
        fast = nbinspect.trace(model, *args, **kwargs)
    assert taken, "the inlined path was not taken"
    general(monkeypatch)
    slow = nbinspect.trace(model, *args, **kwargs)
    assert fast.frames.keys() == slow.frames.keys()
    for key in fast.frames:
        pd.testing.assert_frame_equal(fast.frames[key], slow.frames[key], check_exact=True, obj=key)
    assert repr(fast.totals) == repr(slow.totals) and repr(fast.io) == repr(slow.io)
    assert len(fast.frames["graph"]) > 0


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.int64, torch.bool, torch.complex64]
)
def test_the_recorders_byte_count_is_the_general_paths(dtype):
    """The inlined path takes the recorder's ``x.nbytes`` for an edge's bytes; the general
    path counts ``numel() * element_size()``: the same for every dtype, views included."""
    from nbinspect.backends.torch.dataflow import _torch_nbytes

    t = torch.zeros(3, 5, dtype=dtype)
    for x in (t, t[:, 1:], t.T, t[0]):
        assert x.nbytes == _torch_nbytes(x)
