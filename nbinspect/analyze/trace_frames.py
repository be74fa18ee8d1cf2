"""Frames from a :class:`~.trace.TraceResult`: ``flow`` (one row per call) and the trace
columns of ``layers`` (per module path, over all its calls)."""

from __future__ import annotations

import pandas as pd

from ..dtypes import dtype_name
from ..schema import FLOW, LAYERS, TRACE_COLUMNS, FrameSchema
from .trace import Call, TraceResult

__all__ = ["flow", "layers_with_trace"]

_TRACE = FrameSchema("layer trace columns", TRACE_COLUMNS)


def _shapes(shapes: list | None) -> list | None:
    return None if shapes is None else [tuple(s) for s in shapes]


def _dtypes(dtypes: list | None) -> list | None:
    return None if dtypes is None else [dtype_name(d) for d in dtypes]


def flow(result: TraceResult) -> pd.DataFrame:
    """One row per module call in execution order (schema.FLOW), built column by column:
    no dict per call."""
    calls, n = result.calls, len(result.calls)
    missing = [None] * n

    def column(attr: str) -> list:
        return [getattr(c, attr) for c in calls]

    return FLOW.from_columns(
        {
            "index": column("index"),
            "name": column("name"),
            "type": column("type"),
            "depth": column("depth"),
            "parent": column("parent"),
            "call": column("call"),
            "input_shapes": [_shapes(c.input_shapes) for c in calls],
            "input_bytes": column("input_bytes"),
            "output_shapes": [_shapes(c.output_shapes) for c in calls],
            "output_dtypes": [_dtypes(c.output_dtypes) for c in calls],
            "flops": column("flops") if result.flops else missing,
            "own_flops": column("own_flops") if result.flops else missing,
            "backward_flops": column("backward_flops") if result.backward else missing,
            "activation_bytes": column("activation_bytes"),
            "own_activation_bytes": column("own_activation_bytes"),
            "status": column("status"),
        },
        n,
    )


def _per_module(calls: list[Call], backward: bool) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for c in calls:
        row = out.get(c.name)
        if row is None:
            out[c.name] = {
                "input_shapes": _shapes(c.input_shapes),
                "output_shapes": _shapes(c.output_shapes),
                "output_dtypes": _dtypes(c.output_dtypes),
                "calls": 1,
                "flops": c.flops,
                "backward_flops": c.backward_flops if backward else None,
                "activation_bytes": c.activation_bytes,
            }
            continue
        row["calls"] += 1
        row["flops"] += c.flops
        row["activation_bytes"] += c.activation_bytes
        if backward:
            row["backward_flops"] += c.backward_flops
    return out


def layers_with_trace(layers: pd.DataFrame, result: TraceResult) -> pd.DataFrame:
    """`layers` (schema.LAYERS) with its trace columns filled from `result`. A module
    registered at two paths shows its calls at both; a module that never ran has 0 calls."""
    stats = _per_module(result.calls, result.backward)
    if not result.flops:
        for row in stats.values():
            row["flops"] = None
    idle = {
        "calls": 0,
        "flops": 0 if result.flops else None,
        "backward_flops": 0 if result.backward else None,
        "activation_bytes": 0,
    }
    first = list(layers["alias_of"].fillna(layers["name"]))
    rows = [dict(stats.get(path, idle)) for path in first]
    _roll_up_idle_containers(rows, [path in stats for path in first], list(layers["name"]), list(layers["parent"]))
    filled = _TRACE.build(rows)
    out = layers.copy()
    for col in TRACE_COLUMNS:
        out[col.name] = filled[col.name].array
    LAYERS.validate(out)
    return out


def _roll_up_idle_containers(rows: list[dict], ran: list[bool], names: list[str], parents: list) -> None:
    """A container that never runs itself (ModuleList, ModuleDict) still holds the work its
    parent ran through its children: its subtree figures are the sum of theirs."""
    position = {name: i for i, name in enumerate(names)}
    for i in range(len(rows) - 1, 0, -1):  # reverse pre-order: children before parents
        parent = position[parents[i]]
        if ran[parent]:
            continue
        for key in ("flops", "backward_flops", "activation_bytes"):
            if rows[i][key] is not None:
                rows[parent][key] += rows[i][key]
