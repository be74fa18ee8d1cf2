"""An Inspection is copied one way, ``dataclasses.replace``: fields given change, the rest
(frames shared, not copied) and the class stay."""

from __future__ import annotations

import dataclasses

import pytest

import nbinspect
from nbinspect import examples
from nbinspect.inspection import with_memory


def test_replace_changes_the_fields_given_and_shares_the_frames():
    model = examples.build("mlp")
    insp = nbinspect.inspect(model)
    copy = dataclasses.replace(insp, name="renamed", metadata={"epoch": 3})
    assert (copy.name, copy.framework, dict(copy.metadata)) == ("renamed", "torch", {"epoch": 3})
    assert all(copy.frames[k] is insp.frames[k] for k in insp.frames) and copy.frames.keys() == insp.frames.keys()
    assert copy.totals == insp.totals and copy.io == insp.io and insp.name == "MLP" and not insp.metadata
    with pytest.raises(TypeError):
        copy.frames["params"] = insp.frames["layers"]  # the mappings are read-only


def test_a_copy_keeps_the_subclass():
    model = examples.build("mlp")
    summary = nbinspect.mlx.summary(model, (32,), batch_size=2).inspection  # a SummaryInspection, traced
    planned = with_memory(summary, nbinspect.memory(model, batch_size=2))
    assert type(planned) is nbinspect.mlx.SummaryInspection  # was a plain Inspection: print() lost the table
    assert str(planned) == str(summary) and "memory" in planned.frames and "memory" not in summary.frames
    assert planned.io == summary.io and planned.frames["flow"] is summary.frames["flow"]
