"""The flow frame's columns packed by numpy equal pandas' own conversion of the calls."""

from __future__ import annotations

import contextlib

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


class _Aliased(torch.nn.Module):
    """A module at two paths, one called twice, a ModuleList that never runs itself, a
    module that never runs, and a call that fails and is caught."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a  # an alias path
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.ReLU()])
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x):
        x = self.a(x)
        for block in self.blocks:
            x = block(x)
        with contextlib.suppress(RuntimeError):  # a failing call, caught
            self.unused(torch.zeros(3))
        return self.b(x)


def _reference_trace_columns(layers: pd.DataFrame, result, flow_frame: pd.DataFrame) -> dict:
    """The trace columns of ``layers`` computed the plain way: a dict per path, then a roll-up
    of idle containers from their children."""
    sums, first = {}, {}
    for c in result.calls:
        row = sums.setdefault(c.name, [0, 0, 0, 0])
        first.setdefault(c.name, c.index)
        row[0] += 1
        row[1] += c.flops
        row[2] += c.backward_flops
        row[3] += c.activation_bytes
    paths = [a if isinstance(a, str) else n for a, n in zip(layers["alias_of"], layers["name"])]
    rows = [list(sums.get(p, [0, 0, 0, 0])) for p in paths]
    names, parents = layers["name"].tolist(), layers["parent"].tolist()
    for i in range(len(rows) - 1, 0, -1):
        j = names.index(parents[i])
        if paths[j] not in sums:
            for k in (1, 2, 3):
                rows[j][k] += rows[i][k]
    out = {
        "calls": [r[0] for r in rows],
        "flops": [r[1] for r in rows],
        "backward_flops": [r[2] for r in rows],
        "activation_bytes": [r[3] for r in rows],
    }
    for column in ("input_shapes", "output_shapes", "output_dtypes"):
        out[column] = [flow_frame[column][first[p]] if p in first else None for p in paths]
    return out


def test_layers_trace_columns_equal_a_plain_roll_up():
    from nbinspect.analyze import structure
    from nbinspect.analyze.trace_frames import layers_with_trace
    from nbinspect.backends.torch.source import from_module

    models = {name: (examples.build(name), examples.example_input(name)) for name in examples.names()}
    models["aliased"] = (_Aliased(), torch.randn(2, 4))
    for name, (model, x) in models.items():
        result = run_trace(model, (x,), backward=True)
        layers = structure.layers(from_module(model))
        frame = flow(result)
        before = layers.copy()
        got = layers_with_trace(layers, result, frame)
        pd.testing.assert_frame_equal(layers, before)  # the given frame unchanged
        for column, want in _reference_trace_columns(layers, result, frame).items():
            assert got[column].tolist() == want, (name, column)
