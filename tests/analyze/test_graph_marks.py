"""The graph's constants and side inputs (analyze/graph.py ``_constants``, ``_side_inputs``)
equal a direct count from the dataflow: constants by passes over the edges until nothing
more is reached from an input, side inputs edge by edge against each run's members."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect.backends.torch.trace import run_trace
from nbinspect.inspection import with_trace
from tests.backends.test_graph_fast_path import CASES
from tests.backends.test_graph_zoo import ZOO


def _models() -> dict:
    out = dict(CASES)
    torch.manual_seed(0)
    out["stack"] = (nn.Sequential(*(nn.Linear(4, 4) for _ in range(6))), (torch.randn(1, 4),), {})  # no op nodes
    for name in ("llama", "gpt2"):  # runs of blocks with side inputs (rotary, masks) and constants
        make, kwargs = ZOO[name]
        out[name] = (make().eval(), (), kwargs)
    return out


MODELS = _models()


@pytest.mark.parametrize("name", list(MODELS))
def test_constants_and_side_inputs_equal_a_direct_count(name):
    model, args, kwargs = MODELS[name]
    result = run_trace(model, args, kwargs)
    frames = with_trace(nbinspect.inspect(model, stats=False), result).frames
    nodes, edges, flow = frames["graph_nodes"], frames["graph"], result.dataflow
    reached = {i for i, kind in enumerate(flow.kind) if kind == "input"}
    grown = True
    while grown:
        before = len(reached)
        reached |= {d for s, d in zip(flow.src, flow.dst) if s in reached}
        grown = len(reached) > before
    assert nodes["const"].tolist() == [kind == "op" and i not in reached for i, kind in enumerate(flow.kind)]

    first = [-1 if pd.isna(v) else int(v) for v in nodes["fold_first"].tolist()]
    side = [False] * len(flow.src)
    for run in {f for f in first if f >= 0}:
        members = [i for i, f in enumerate(first) if f == run]
        lo, hi = members[0], flow.last[members[-1]]
        hits: dict[tuple[int, int], set[int]] = {}
        for e, (s, d) in enumerate(zip(flow.src, flow.dst)):
            if lo <= d <= hi and not lo <= s <= hi:
                member = next(m for m in members if m <= d <= flow.last[m])
                hits.setdefault((s, flow.tensor[e]), set()).add(member)
        for e, (s, d) in enumerate(zip(flow.src, flow.dst)):
            if len(hits.get((s, flow.tensor[e]), ())) >= 2 and lo <= d <= hi:
                side[e] = True
    assert edges["side"].tolist() == side
    if name == "llama":  # rotary cos/sin reach every layer: the marks were exercised, not only all-False
        assert any(side) and nodes["const"].any()
