"""Every frame and total any analysis produces is declared in nbinspect.schema, the one place a
newcomer looks for a column or a total's meaning."""

from __future__ import annotations

import pytest
import torch

import nbinspect
from nbinspect import examples, schema
from nbinspect.backends.torch.watch import watch
from nbinspect.inspection import inspect, with_trace


def _inspections():
    model = examples.build("tiny_lm")
    yield "inspect", nbinspect.inspect(model)
    yield "trace", nbinspect.trace(model, (2, 8), input_dtype=torch.long, backward=True)
    with watch(model) as recorded:
        model(torch.zeros(1, 4, dtype=torch.long))
    yield "watch", with_trace(inspect(model, stats=False), recorded)
    yield "meta", nbinspect.trace(examples.build("mlp").to("meta"), (2, 32))
    yield "from_config", nbinspect.from_config(examples.TinyLM, {"n_layer": 1}, input=(2, 8), input_dtype=torch.long)


@pytest.mark.parametrize(("route", "insp"), list(_inspections()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_frame_and_total_is_declared(route, insp):
    for key, frame in insp.frames.items():
        assert key in schema.FRAME_KEYS, f"{route}: frame {key!r} is not in schema.FRAME_KEYS"
        schema.FRAME_KEYS[key].validate(frame)
    undeclared = set(insp.totals) - set(schema.TOTALS)
    assert not undeclared, f"{route}: totals {sorted(undeclared)} are not documented in schema.TOTALS"
    assert set(schema.STRUCTURE_TOTALS) <= set(insp.totals)


def test_comparison_frames_are_declared():
    a, b = examples.build("mlp"), examples.build("mlp")
    with torch.no_grad():
        next(b.parameters()).add_(1)
    comparison = nbinspect.compare(a, b)
    for key, frame in comparison.frames.items():
        schema.FRAME_KEYS[key].validate(frame)
    schema.COMPARE_GROUPS.validate(comparison.by_module())
    assert "changed" in set(comparison.frame["status"])
