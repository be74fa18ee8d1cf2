"""The flow frame's columns packed by numpy equal pandas' own conversion of the calls."""

from __future__ import annotations

import pandas as pd
import torch

from nbinspect import examples
from nbinspect.analyze.trace_frames import flow
from nbinspect.backends.torch.trace import run_trace


def test_flow_parent_column_is_each_calls_parent_with_the_roots_missing():
    for name in examples.names():
        result = run_trace(examples.build(name), (examples.example_input(name),))
        frame = flow(result)
        want = pd.array([c.parent for c in result.calls], dtype="Int64")
        pd.testing.assert_extension_array_equal(frame["parent"].array, want)
        assert frame["parent"].isna().sum() == 1  # one root call
    leaf_root = run_trace(torch.nn.Linear(2, 2), (torch.zeros(1, 2),))
    assert flow(leaf_root)["parent"].isna().tolist() == [True]


def test_flow_counter_columns_are_each_calls_numbers():
    """index, depth and call are packed from the calls without numpy's type discovery."""
    repeated = 0
    for name in examples.names():
        result = run_trace(examples.build(name), (examples.example_input(name),), backward=True)
        frame = flow(result)
        for column in ("index", "depth", "call"):
            want = pd.array([getattr(c, column) for c in result.calls], dtype="Int64")
            pd.testing.assert_extension_array_equal(frame[column].array, want)
        repeated += int(frame["call"].max())
    assert repeated  # a module called twice (examples' "shared") numbers its calls
