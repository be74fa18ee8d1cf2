"""Frames from a :class:`~.trace.TraceResult`: ``flow`` (one row per call) and the trace
columns of ``layers`` (per module path, over all its calls)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, repeat
from typing import Any

import numpy as np
import pandas as pd

from ..core.trace import TraceResult
from ..dtypes import dtype_name
from ..schema import FLOW, LAYERS, TRACE_COLUMNS, FrameSchema

__all__ = ["flow", "layers_with_trace"]

_TRACE = FrameSchema("layer trace columns", TRACE_COLUMNS)


def flow(result: TraceResult) -> pd.DataFrame:
    """One row per module call in execution order (schema.FLOW), built from the columns
    ``finish`` set: no dict per call."""
    cols = _columns(result)
    n = len(cols["index"])
    missing = [None] * n

    def ints(attr: str) -> np.ndarray:
        """The recorder's own counters (ints by construction), packed without numpy's type discovery."""
        return np.fromiter(cols[attr], dtype=np.int64, count=n)

    return FLOW.from_columns(
        {
            "index": ints("index"),
            "name": cols["name"],
            "type": cols["type"],
            "depth": ints("depth"),
            "parent": _parents(cols["parent"]),
            "call": ints("call"),
            # the recorder's lists of shape tuples as they are; None where the call raised
            "input_shapes": cols["input_shapes"],
            "input_bytes": cols["input_bytes"],
            "output_shapes": cols["output_shapes"],
            "output_dtypes": _dtype_names(cols["output_dtypes"]),
            "flops": cols["flops"] if result.flops else missing,
            "own_flops": cols["own_flops"] if result.flops else missing,
            "backward_flops": cols["backward_flops"] if result.backward else missing,
            "activation_bytes": cols["activation_bytes"],
            "own_activation_bytes": cols["own_activation_bytes"],
            "status": cols["status"],
        },
        n,
    )


def _columns(result: TraceResult) -> dict:
    if result.columns is None:
        raise ValueError("the trace result is not finished (core.trace.finish sets its columns)")
    return result.columns


def _dtype_names(dtypes: Sequence[list | None]) -> list[list[str] | None]:
    """Each call's output dtypes by name (None where it raised): a dict look-up in C per
    dtype, named once per distinct dtype, not a function call each."""
    names = {d: dtype_name(d) for d in set(chain.from_iterable(filter(None, dtypes)))}
    name = names.__getitem__
    return [None if d is None else list(map(name, d)) for d in dtypes]


_ROOT: dict[int | None, int] = {None: -1}


def _parents(parents: Sequence[int | None]) -> pd.arrays.IntegerArray:
    """The parent call indices (None for a root call) as an Int64 column, packed by numpy:
    with a None among them, numpy would pack objects and pandas test each value."""
    data = np.fromiter(map(_ROOT.get, parents, parents), dtype=np.int64, count=len(parents))  # None -> -1, in C
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
    columns = _columns(result)
    names = columns["name"]
    n = len(names)
    # module path -> the index of its first call (the later of two equal keys wins: reversed)
    first = dict(zip(reversed(names), range(n - 1, -1, -1)))
    # tolist(), not list(): list() reads a string column one cell at a time (40x slower)
    aliases = layers["alias_of"]
    paths = layers["name"].tolist() if aliases.isna().all() else aliases.fillna(layers["name"]).tolist()
    ran = list(map(first.__contains__, paths))
    at = list(map(first.get, paths, repeat(n)))  # n: a module that never ran

    def at_first_call(values: list, idle: Any = None) -> list:
        """Each path's value of its module's first call (`idle` for one that never ran):
        a list indexes in C, without numpy's scalar per read."""
        values.append(idle)
        return list(map(values.__getitem__, at))

    # [calls, flops, backward_flops, activation_bytes] per path; columns, each path on its own
    sums: list[Any]
    if len(first) == n:  # each path called once (most models): its call's figures, looked up in C
        sums = [np.array(ran, dtype=np.int64)]  # 1 call or none: packed from bools, no type discovery
        sums += [at_first_call(list(columns[a]), 0) for a in _SUMMED]
    else:
        sums = _summed_per_path(columns, paths)
    if not all(ran):
        _roll_up_idle_containers(sums[1:], ran, layers["name"].tolist(), layers["parent"].tolist())
    missing = [None] * len(paths)

    filled = _TRACE.from_columns(
        {
            "input_shapes": at_first_call(flow_frame["input_shapes"].tolist()),
            "output_shapes": at_first_call(flow_frame["output_shapes"].tolist()),
            "output_dtypes": at_first_call(flow_frame["output_dtypes"].tolist()),
            "calls": sums[0],
            "flops": sums[1] if result.flops else missing,
            "backward_flops": sums[2] if result.backward else missing,
            "activation_bytes": sums[3],
        },
        len(paths),
    )
    out = layers.copy(deep=False)  # copy-on-write: the columns set below leave `layers` as it is
    for col in TRACE_COLUMNS:
        out[col.name] = filled[col.name].array
    # `layers` was built by its schema and the trace columns by theirs: only a frame whose
    # columns are not the schema's needs the full check (a Series made per column)
    if list(out.columns) != LAYERS.names:
        LAYERS.validate(out)
    return out


_SUMMED = ("flops", "backward_flops", "activation_bytes")


def _summed_per_path(columns: dict, paths: list[str]) -> list[list[int]]:
    """[calls, flops, backward_flops, activation_bytes] columns over `paths`, each the sum
    over every call of the module at that path (0 for one that never ran)."""
    sums: dict[str, list[int]] = {}
    for name, flops, backward_flops, activation_bytes in zip(
        columns["name"], columns["flops"], columns["backward_flops"], columns["activation_bytes"]
    ):
        row = sums.get(name)
        if row is None:
            sums[name] = [1, flops, backward_flops, activation_bytes]
        else:
            row[0] += 1
            row[1] += flops
            row[2] += backward_flops
            row[3] += activation_bytes
    idle = [0, 0, 0, 0]
    rows = [sums.get(path, idle) for path in paths]
    return [[r[i] for r in rows] for i in range(4)]


def _roll_up_idle_containers(sums: list[list[int]], ran: list[bool], names: list[str], parents: list) -> None:
    """A container that never runs itself (ModuleList, ModuleDict) still holds the work its
    parent ran through its children: its subtree figures (`sums`: columns over the paths,
    all but the call count) are the sum of theirs."""
    position = {name: i for i, name in enumerate(names)}
    for i in range(len(names) - 1, 0, -1):  # reverse pre-order: children before parents
        parent = position[parents[i]]
        if ran[parent]:
            continue
        for column in sums:
            column[parent] += column[i]
