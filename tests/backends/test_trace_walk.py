"""``nbinspect.trace`` walks the model once: the source's walk (``ModelSource.walk``) is what
``run_trace`` would gather by walking the model itself, and every frame of a trace that
takes it equals the frames of one that walks again."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import inspection
from nbinspect.backends.torch.source import from_module
from nbinspect.backends.torch.trace import _tensor_paths, named_modules_of, tensors_of
from tests.backends.test_graph_edges import FunctionalTiedHead
from tests.backends.test_graph_fast_path import CASES


class Hooked(nn.Module):
    """Hooks that change inputs and outputs, buffers (one None), BatchNorm, and a module
    registered at two paths and called at both."""

    def __init__(self):
        super().__init__()
        self.a, self.bn, self.b = nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 8)
        self.a.register_forward_pre_hook(lambda m, a: (a[0] * 2,))
        self.b.register_forward_hook(lambda m, a, o: o + 1)
        self.register_buffer("scale", torch.ones(8))
        self.register_buffer("none_buf", None)
        self.shared = self.a

    def forward(self, x):
        return self.b(self.bn(self.a(x))) * self.scale + self.shared(x)


class Experts(nn.Module):
    """A routed mixture of experts beside a fused 3-D expert weight."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(8, 4)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8)) for _ in range(4))
        self.w3 = nn.Parameter(torch.randn(4, 8, 8))

    def forward(self, x):
        idx = self.gate(x).argmax(-1)
        out = torch.stack([self.experts[int(i)](row) for i, row in zip(idx, x)])
        return out + torch.einsum("bi,eij->bj", x, self.w3)


class TiedLM(nn.Module):
    """A tied head, a frozen layer and modules that are not Linear (Embedding, Conv1d, GRU)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 20, bias=False)
        self.head.weight = self.emb.weight
        self.frozen = nn.Linear(8, 8).requires_grad_(False)

    def forward(self, ids):
        h = self.conv(self.emb(ids).transpose(1, 2)).transpose(1, 2)
        h, _ = self.gru(h)
        return self.head(self.frozen(self.norm(h)))


def _cases() -> dict:
    torch.manual_seed(0)
    out = {name: (m, args, kwargs) for name, (m, args, kwargs) in CASES.items()}
    with warnings.catch_warnings():  # torch.ao's deprecation notes
        warnings.simplefilter("ignore")
        quantized = torch.ao.quantization.quantize_dynamic(nn.Sequential(nn.Linear(8, 8), nn.ReLU()), {nn.Linear})
    out.update(
        functional_tied=(FunctionalTiedHead(), (torch.tensor([[1, 2, 3]]),), {}),
        hooked=(Hooked(), (torch.randn(4, 8),), {}),
        experts=(Experts(), (torch.randn(3, 8),), {}),
        tied_lm=(TiedLM(), (torch.tensor([[1, 2, 3, 4]]),), {}),
        quantized=(quantized, (torch.randn(2, 8),), {}),
    )
    with torch.device("meta"):
        out["meta"] = (TiedLM(), (torch.tensor([[1, 2, 3]]),), {})
    return out


WALK_CASES = _cases()


@pytest.mark.parametrize("case", sorted(WALK_CASES))
def test_the_sources_walk_is_the_trace_set_up_walk(case):
    model = WALK_CASES[case][0]
    walk = from_module(model).walk
    named = named_modules_of(model)
    assert [p for p, _ in walk.named_modules] == [p for p, _ in named]
    assert all(a is b for (_, a), (_, b) in zip(walk.named_modules, named, strict=True))
    assert all(a is b for a, b in zip(walk.tensors, tensors_of([m for _, m in named]), strict=True))
    assert walk.paths == _tensor_paths(named)


@pytest.mark.parametrize("case", sorted(WALK_CASES))
@pytest.mark.parametrize("backward", [False, True])
def test_a_trace_with_the_walk_equals_one_that_walks_again(case, backward, monkeypatch):
    model, args, kwargs = WALK_CASES[case]
    if backward and case in ("quantized", "meta"):
        pytest.skip("no backward through packed weights; meta covered forward")
    given = []
    real = inspection._walk

    def spying(found, model):
        given.append(real(found, model))
        return given[-1]

    with monkeypatch.context() as m:
        m.setattr(inspection, "_walk", spying)
        once = nbinspect.trace(model, *args, backward=backward, **kwargs)
    assert given and given[0] is not None, "the trace did not take the source's walk"
    monkeypatch.setattr(inspection, "_walk", lambda found, model: None)  # run_trace walks the model itself
    again = nbinspect.trace(model, *args, backward=backward, **kwargs)
    assert once.frames.keys() == again.frames.keys()
    for key in once.frames:
        pd.testing.assert_frame_equal(once.frames[key], again.frames[key], check_exact=True, obj=key)
    assert repr(once.totals) == repr(again.totals) and repr(once.io) == repr(again.io)


def test_inspect_with_an_input_takes_the_walk_too(monkeypatch):
    model, args, _ = WALK_CASES["tied_lm"]
    given = []
    real = inspection._walk
    monkeypatch.setattr(inspection, "_walk", lambda found, model: given.append(real(found, model)) or given[-1])
    traced = nbinspect.inspect(model, input=args[0])
    assert given and given[0] is not None
    monkeypatch.setattr(inspection, "_walk", lambda found, model: None)
    again = nbinspect.inspect(model, input=args[0])
    for key in traced.frames:
        pd.testing.assert_frame_equal(traced.frames[key], again.frames[key], check_exact=True, obj=key)


def test_a_source_made_earlier_is_walked_again(monkeypatch):
    """A ModelSource given to inspect was made before the model may have changed: its walk
    is not taken."""
    from nbinspect.backends import as_source

    model = nn.Sequential(nn.Linear(8, 8))
    source = as_source(model)
    model.append(nn.Linear(8, 4))  # changed after its source was made
    given = []
    real = inspection._walk
    monkeypatch.setattr(inspection, "_walk", lambda found, m: given.append(real(found, m)) or given[-1])
    traced = nbinspect.inspect(source, input=torch.randn(2, 8), stats=False)
    assert given == [None]
    assert traced.flow["name"].tolist() == ["", "0", "1"]


def test_leaves_are_the_modules_without_children():
    """The dataflow's leaves: modules with no children, or only None in their place."""
    from nbinspect.backends.torch.trace import _leaves

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.gone = None  # a child slot emptied
            self.register_module("empty", None)

    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.ModuleList()), Holder())
    modules = list(model.modules())
    want = {id(m) for m in modules if not any(c is not None for c in m._modules.values())}
    assert _leaves(modules) == want
    assert id(model[2]) in want and id(model[1][1]) in want and id(model) not in want


def _shared_and_none() -> list[nn.Module]:
    leaf, block = nn.Linear(2, 2), nn.Sequential(nn.ReLU(), nn.Linear(2, 2))
    holes = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    holes.register_module("gone", None)
    holes.register_buffer("none_buf", None)
    return [
        nn.Sequential(leaf, leaf),  # one leaf twice among siblings
        nn.Sequential(nn.Sequential(leaf), leaf, nn.Sequential(nn.Tanh(), leaf)),  # seen in an earlier branch
        nn.Sequential(block, nn.Sequential(block, nn.ReLU())),  # a block at two paths
        holes,  # a None child and a None buffer
        nn.Linear(2, 2),  # no children
        nn.Sequential(*(nn.Linear(2, 2) for _ in range(50))),
    ]


@pytest.mark.parametrize("zoo", [False, True])
def test_named_modules_and_tensors_as_torch_lists_them(zoo):
    """The trace's own walk (children that are all new leaves added at once) lists the
    modules as ``named_modules()`` does, and their tensors as a plain loop does."""
    from nbinspect import examples

    models = [examples.build(name) for name in examples.names()] if zoo else _shared_and_none()
    for model in models:
        named = named_modules_of(model)
        assert [(p, id(m)) for p, m in named] == [(p, id(m)) for p, m in model.named_modules()]
        modules = [m for _, m in named]
        plain = [t for m in modules for t in (*m._parameters.values(), *m._buffers.values()) if t is not None]
        assert list(map(id, tensors_of(modules))) == list(map(id, plain))
