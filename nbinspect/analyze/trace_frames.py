"""Frames from a :class:`~.trace.TraceResult`: ``flow`` (one row per call) and the trace
columns of ``layers`` (per module path, over all its calls)."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter

import numpy as np
import pandas as pd

from ..core.trace import TraceResult
from ..dtypes import dtype_name
from ..schema import FLOW, LAYERS, TRACE_COLUMNS, FrameSchema

__all__ = ["flow", "layers_with_trace"]

_TRACE = FrameSchema("layer trace columns", TRACE_COLUMNS)


def flow(result: TraceResult) -> pd.DataFrame:
    """One row per module call in execution order (schema.FLOW), built column by column:
    no dict per call."""
    calls, n = result.calls, len(result.calls)
    missing = [None] * n

    def column(attr: str) -> list:
        return list(map(attrgetter(attr), calls))

    def ints(attr: str) -> np.ndarray:
        """The recorder's own counters (ints by construction), packed without numpy's type discovery."""
        return np.fromiter(map(attrgetter(attr), calls), dtype=np.int64, count=n)

    return FLOW.from_columns(
        {
            "index": ints("index"),
            "name": column("name"),
            "type": column("type"),
            "depth": ints("depth"),
            "parent": _parents(column("parent")),
            "call": ints("call"),
            # the recorder's lists of shape tuples as they are; None where the call raised
            "input_shapes": column("input_shapes"),
            "input_bytes": column("input_bytes"),
            "output_shapes": column("output_shapes"),
            "output_dtypes": _dtype_names(column("output_dtypes")),
            "flops": column("flops") if result.flops else missing,
            "own_flops": column("own_flops") if result.flops else missing,
            "backward_flops": column("backward_flops") if result.backward else missing,
            "activation_bytes": column("activation_bytes"),
            "own_activation_bytes": column("own_activation_bytes"),
            "status": column("status"),
        },
        n,
    )


def _dtype_names(dtypes: list[list | None]) -> list[list[str] | None]:
    """Each call's output dtypes by name (None where it raised): a dict look-up in C per
    dtype, named once per distinct dtype, not a function call each."""
    names = {d: dtype_name(d) for d in set(chain.from_iterable(filter(None, dtypes)))}
    name = names.__getitem__
    return [None if d is None else list(map(name, d)) for d in dtypes]


def _parents(parents: list[int | None]) -> pd.arrays.IntegerArray:
    """The parent call indices (None for a root call) as an Int64 column, packed by numpy:
    with a None among them, numpy would pack objects and pandas test each value."""
    data = np.array([-1 if p is None else p for p in parents], dtype=np.int64)
    return pd.arrays.IntegerArray(data, data < 0)


def layers_with_trace(
    layers: pd.DataFrame, result: TraceResult, flow_frame: pd.DataFrame | None = None
) -> pd.DataFrame:
    """`layers` (schema.LAYERS) with its trace columns filled from `result`. A module
    registered at two paths shows its calls at both; a module that never ran has 0 calls.
    The shapes and dtypes of each module's first call are `flow_frame`'s (the flow of
    `result`, made if not given). Built column by column: no dict per module."""
    if flow_frame is None:
        flow_frame = flow(result)
    first: dict[str, int] = {}  # module path -> the index of its first call
    sums: dict[str, list[int]] = {}  # module path -> [calls, flops, backward_flops, activation_bytes]
    for c in result.calls:
        row = sums.get(c.name)
        if row is None:
            first[c.name] = c.index
            sums[c.name] = [1, c.flops, c.backward_flops, c.activation_bytes]
        else:
            row[0] += 1
            row[1] += c.flops
            row[2] += c.backward_flops
            row[3] += c.activation_bytes
    idle = [0, 0, 0, 0]
    # tolist(), not list(): list() reads a string column one cell at a time (40x slower)
    paths = layers["alias_of"].fillna(layers["name"]).tolist()
    rows = [list(sums.get(path, idle)) for path in paths]  # copies: each alias path rolls up on its own
    _roll_up_idle_containers(rows, [path in sums for path in paths], layers["name"].tolist(), layers["parent"].tolist())
    missing = [None] * len(paths)
    calls = [first.get(path) for path in paths]

    def of_first_call(column: str) -> list:
        values = flow_frame[column].tolist()  # the same objects; a list indexes without numpy's scalar per read
        return [None if i is None else values[i] for i in calls]

    filled = _TRACE.from_columns(
        {
            "input_shapes": of_first_call("input_shapes"),
            "output_shapes": of_first_call("output_shapes"),
            "output_dtypes": of_first_call("output_dtypes"),
            "calls": [r[0] for r in rows],
            "flops": [r[1] for r in rows] if result.flops else missing,
            "backward_flops": [r[2] for r in rows] if result.backward else missing,
            "activation_bytes": [r[3] for r in rows],
        },
        len(paths),
    )
    out = layers.copy()
    for col in TRACE_COLUMNS:
        out[col.name] = filled[col.name].array
    LAYERS.validate(out)
    return out


def _roll_up_idle_containers(rows: list[list[int]], ran: list[bool], names: list[str], parents: list) -> None:
    """A container that never runs itself (ModuleList, ModuleDict) still holds the work its
    parent ran through its children: its subtree figures (all but the call count) are the
    sum of theirs."""
    position = {name: i for i, name in enumerate(names)}
    for i in range(len(rows) - 1, 0, -1):  # reverse pre-order: children before parents
        parent = position[parents[i]]
        if ran[parent]:
            continue
        into, child = rows[parent], rows[i]
        into[1] += child[1]
        into[2] += child[2]
        into[3] += child[3]
