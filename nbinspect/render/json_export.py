"""The JSON export: one document per inspection, described by `inspection.schema.json`.

Built from the frames only. Missing values become null; tuples become arrays.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from .format import is_missing, trainable_status

__all__ = ["SCHEMA_ID", "SCHEMA_VERSION", "inspection_dict", "json_schema", "jsonable", "tensors_by_module"]

SCHEMA_ID = "nbinspect/inspection"
SCHEMA_VERSION = 1


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) every exported document follows."""
    return json.loads(resources.files(__package__).joinpath("inspection.schema.json").read_text())


def jsonable(value: Any) -> Any:
    """`value` with numpy/pandas scalars, tuples and missing values made plain JSON."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if is_missing(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # JSON has no inf
    return value


def tensors_by_module(params: pd.DataFrame) -> dict[str, list[dict]]:
    """Each module path -> its own tensors (local name, kind, shape, dtype, requires_grad, tied_to)."""
    out: dict[str, list[dict]] = {}
    for row in params.itertuples(index=False):
        out.setdefault(row.module, []).append(
            {
                "name": row.name.rsplit(".", 1)[-1],
                "kind": row.kind,
                "shape": row.shape,
                "dtype": row.dtype,
                "requires_grad": row.requires_grad,
                "tied_to": row.tied_to,
            }
        )
    return out


def inspection_dict(
    name: str,
    framework: str,
    totals: Mapping[str, Any],
    layers: pd.DataFrame,
    params: pd.DataFrame,
    io: Mapping[str, Any] | None = None,
    memory: pd.DataFrame | None = None,
) -> dict:
    """The export document. `io` holds the model's top-level input/output once traced;
    `memory`, a training-memory plan, adds its rows."""
    tensors = tensors_by_module(params)
    records = []
    for row in layers.to_dict("records"):
        row["trainable"] = trainable_status(row["trainable_params"], row["frozen_params"]) or None
        row["tensors"] = tensors.get(row["name"], [])
        records.append(row)
    io = io or {}
    document = {
        "schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "model": {"name": name, "framework": framework},
        "totals": dict(totals),
        "input": io.get("input"),
        "output": io.get("output"),
        "layers": records,
    }
    if memory is not None:
        document["memory"] = memory.to_dict("records")
    return jsonable(document)
