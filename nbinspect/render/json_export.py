"""The JSON export: one document per inspection, described by `inspection.schema.json`.

Built from the frames only. Missing values become null; tuples become arrays.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd

from .format import is_missing, trainable_status

__all__ = [
    "SCHEMA_ID",
    "SCHEMA_VERSION",
    "column_values",
    "inspection_dict",
    "json_schema",
    "jsonable",
    "records",
    "tensors_by_module",
]

SCHEMA_ID = "nbinspect/inspection"
SCHEMA_VERSION = 1


def json_schema() -> dict:
    """The JSON Schema (draft 2020-12) every exported document follows."""
    return json.loads(resources.files(__package__).joinpath("inspection.schema.json").read_text())


_PLAIN = frozenset({str, int, bool, type(None)})  # JSON values as they are


def jsonable(value: Any) -> Any:
    """`value` with numpy/pandas scalars, tuples and missing values made plain JSON."""
    kind = type(value)
    if kind in _PLAIN:  # the common cells, at once
        return value
    if kind is float:
        return value if math.isfinite(value) else None  # JSON has no NaN or inf
    if kind is list or kind is tuple:  # shapes and the like: their plain items are kept without a call each
        return [v if type(v) in _PLAIN else jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): v if type(v) in _PLAIN else jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v) for v in value]
    if is_missing(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # JSON has no inf
    return value


def column_values(column: pd.Series, box: bool = False) -> list:
    """``[jsonable(v) for v in column.tolist()]``, read a whole column at a time where its
    dtype allows (numbers, booleans, strings). `box` first makes each numpy scalar of an
    object column a Python one, as ``DataFrame.to_dict`` does (a NaN of any width then
    becomes null, as Python's own does)."""
    array = column.array
    if isinstance(array, _MASKED):  # Int64, boolean, Float64: the values, then null where missing
        values = array.to_numpy(dtype=array.dtype.numpy_dtype, na_value=_FILL[array.dtype.kind])
        missing, nonfinite = array.isna(), _nonfinite(values)
        return _with_nulls(values.tolist(), missing if nonfinite is None else missing | nonfinite)
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "fiub":
        values = column.to_numpy()
        return _with_nulls(values.tolist(), _nonfinite(values))
    if isinstance(column.dtype, pd.StringDtype):
        return _with_nulls(column.tolist(), column.isna().to_numpy())
    values = column.tolist()
    if box:
        values = [v.item() if isinstance(v, np.generic) else v for v in values]
    return [jsonable(v) for v in values]


_MASKED = (pd.arrays.IntegerArray, pd.arrays.BooleanArray, pd.arrays.FloatingArray)
_FILL = {"i": 0, "u": 0, "b": False, "f": 0.0}  # stands in for a missing value until it is made null


def _nonfinite(values: np.ndarray) -> np.ndarray | None:
    return ~np.isfinite(values) if values.dtype.kind == "f" else None


def _with_nulls(values: list, null: np.ndarray | None) -> list:
    """`values` with None where `null` is true."""
    if null is not None:
        for i in np.flatnonzero(null).tolist():
            values[i] = None
    return values


def tensors_by_module(params: pd.DataFrame) -> dict[str, list[dict]]:
    """Each module path -> its own tensors (local name, kind, shape, dtype, requires_grad,
    tied_to), as plain JSON values."""
    out: dict[str, list[dict]] = {}
    columns = ("kind", "shape", "dtype", "requires_grad", "tied_to")
    rows = zip(params["module"].tolist(), params["name"].tolist(), *(column_values(params[c]) for c in columns))
    for module, name, kind, shape, dtype, requires_grad, tied_to in rows:
        out.setdefault(module, []).append(
            {
                "name": name.rsplit(".", 1)[-1],
                "kind": kind,
                "shape": shape,
                "dtype": dtype,
                "requires_grad": requires_grad,
                "tied_to": tied_to,
            }
        )
    return out


def records(frame: pd.DataFrame) -> list[dict]:
    """``jsonable(frame.to_dict("records"))``, read column by column."""
    columns = [str(c) for c in frame.columns]
    values = [column_values(frame[c], box=True) for c in frame.columns]
    return [dict(zip(columns, row)) for row in zip(*values)]


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
    layer_records = records(layers)
    for row in layer_records:
        row["trainable"] = trainable_status(row["trainable_params"], row["frozen_params"]) or None
        row["tensors"] = tensors.get(row["name"], [])
    io = io or {}
    document = jsonable(
        {
            "schema": SCHEMA_ID,
            "schema_version": SCHEMA_VERSION,
            "model": {"name": name, "framework": framework},
            "totals": dict(totals),
            "input": io.get("input"),
            "output": io.get("output"),
        }
    )
    document["layers"] = layer_records
    if memory is not None:
        document["memory"] = records(memory)
    return document
