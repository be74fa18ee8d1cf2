"""How a frame is declared and built: :class:`Column`, :class:`FrameSchema` and the fast conversions.

Analyzers build frames with :meth:`FrameSchema.build`, which refuses unknown or missing
columns, so a frame can never drift from what its schema says.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["Column", "FrameSchema", "is_missing", "unit_of"]


def is_missing(value: Any) -> bool:
    """A missing cell: None, pandas' NA or a float NaN."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # a pandas dtype name: "string", "Int64", "boolean", "float64", "object"
    doc: str


def unit_of(column: str) -> str:
    """The unit a column's numbers are in, read from its name (the naming rule every frame
    keeps): 'bytes' for bytes and *_bytes, 'flops' for flops and *_flops, 'percent' for
    share (0-100), 'fraction' for zeros (0-1), '' otherwise. Displays format by it
    (KiB/MiB, G/T FLOPs, %)."""
    if column == "bytes" or column.endswith("_bytes"):
        return "bytes"
    if column == "flops" or column.endswith("_flops"):
        return "flops"
    return {"share": "percent", "zeros": "fraction"}.get(column, "")


@dataclass(frozen=True)
class FrameSchema:
    name: str
    columns: tuple[Column, ...]
    doc: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def build(self, records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
        """A frame from row dicts. Every key must be a column of this schema; columns a row
        leaves out become missing values (e.g. trace columns before a forward pass)."""
        records = list(records)
        expected = set(self.names)
        for i, row in enumerate(records):
            if not expected.issuperset(row):
                raise ValueError(f"{self.name} row {i}: unknown columns {sorted(set(row) - expected)}")
        # map over dict.get runs in C: a third of the cost of a comprehension on frames of many rows
        get: Callable[[Any, str], Any] = dict.get if all(type(row) is dict for row in records) else _get
        data = {c.name: _array(list(map(get, records, repeat(c.name))), c.dtype) for c in self.columns}
        return pd.DataFrame(data, columns=self.names)

    def from_columns(self, columns: Mapping[str, Sequence[Any] | np.ndarray], length: int) -> pd.DataFrame:
        """A frame of `length` rows from column sequences (None for missing values) or arrays
        (NaN / a masked pandas array for missing), the fast way for frames of many rows.
        Columns left out are missing; unknown ones are refused."""
        unknown = set(columns) - set(self.names)
        if unknown:
            raise ValueError(f"{self.name}: unknown columns {sorted(unknown)}")
        data = {}
        for c in self.columns:
            values = columns.get(c.name)
            if values is None:
                data[c.name] = _missing(c.dtype, length)
            elif isinstance(values, (np.ndarray, pd.api.extensions.ExtensionArray)) and c.dtype != "object":
                data[c.name] = pd.array(values, dtype=_pandas_dtype(c.dtype))  # numpy/pandas arrays: no Python loop
            else:
                data[c.name] = _array(list(values), c.dtype)
        # not copy=False: pandas would then leave the blocks of one dtype apart (not consolidated)
        return pd.DataFrame(data, columns=self.names)

    def validate(self, frame: pd.DataFrame) -> None:
        """Raise ValueError if `frame` does not have exactly this schema's columns and dtypes."""
        if list(frame.columns) != self.names:
            raise ValueError(f"{self.name} frame columns {list(frame.columns)} != schema {self.names}")
        for c in self.columns:
            actual = str(frame[c.name].dtype)
            if actual != c.dtype and not (c.dtype == "string" and actual.startswith("string")):
                raise ValueError(f"{self.name}.{c.name} has dtype {actual}, schema says {c.dtype}")


def _get(row: Mapping[str, Any], key: str) -> Any:
    return row.get(key)


@functools.cache
def _pandas_dtype(name: str) -> Any:
    """A dtype name's pandas dtype, looked up once (pandas searches its registry of dtypes
    for each name it is given: 4k instructions)."""
    return pd.api.types.pandas_dtype(name)


@functools.cache
def _empty(dtype: str) -> Any:
    return pd.array([], dtype=_pandas_dtype(dtype))  # never handed out: takes make new arrays


def _missing(dtype: str, length: int) -> Any:
    """A column of `length` missing values, as `_array` makes it from Nones."""
    if dtype == "object":
        return np.full(length, None, dtype=object)
    if dtype == "float64":
        return np.full(length, np.nan)
    if dtype == "Int64":  # made as a take of nothing makes it (its data 1 where masked), without the take
        return pd.arrays.IntegerArray(np.ones(length, dtype=np.int64), np.ones(length, dtype=bool))
    if dtype == "boolean":
        return pd.arrays.BooleanArray(np.zeros(length, dtype=bool), np.ones(length, dtype=bool))
    # pandas infers missing values at 80-150 ns a value, a take of nothing fills them at 6
    return _empty(dtype).take(np.full(length, -1), allow_fill=True)


def _array(values: list, dtype: str):
    if dtype == "object":
        # one object per element (tuples stay tuples, not rows), filled in C
        return np.fromiter(values, dtype=object, count=len(values))
    if dtype == "float64":
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if not any(map(operator.is_not, values, repeat(None))):  # all missing (trace columns before a forward pass)
        return _missing(dtype, len(values))
    if dtype in _PACKED:
        packed = _packed(values, *_PACKED[dtype])
        if packed is not None:
            return packed
    if dtype == "string" and _PLAIN_STRINGS:
        try:  # strings (and missing values) only, as frames hold: checked in C, not converted one by one
            return pd.arrays.StringArray(np.fromiter(values, dtype=object, count=len(values)))
        except ValueError:  # a value that is not a string: pandas converts it (or refuses it) as before
            pass
    return pd.array(values, dtype=_pandas_dtype(dtype))


# Whether pandas' "string" arrays are the Python-object StringArray (not pyarrow's), so one
# can be made from strings directly: 0.25 against 0.42 k instructions a value.
_PLAIN_STRINGS = pd.array([], dtype="string").dtype == pd.arrays.StringArray(np.array([], dtype=object)).dtype


# Int64 and boolean columns hold Python ints and bools, which numpy packs in C: a third to a
# tenth of pandas' per-value checks. Whatever numpy packs as another kind (floats, huge or
# unsigned ints, pd.NA) goes to pandas, which converts or refuses it as before.
_PACKED: dict[str, tuple[type, str, type]] = {
    "Int64": (pd.arrays.IntegerArray, "i", np.int64),
    "boolean": (pd.arrays.BooleanArray, "b", np.bool_),
}


def _packed(values: list, array: type, kind: str, numpy_dtype: type) -> Any:
    """`values` (None for missing) as a masked pandas `array`, or None to leave them to pandas."""
    n = len(values)
    packed = np.array(values)
    if packed.dtype.kind == kind and packed.ndim == 1:  # nothing missing
        return array(packed.astype(numpy_dtype, copy=False), np.zeros(n, dtype=bool))
    if packed.dtype != object:
        return None
    missing = np.fromiter(map(operator.is_, values, repeat(None)), dtype=bool, count=n)
    present = np.array([v for v in values if v is not None])
    if present.dtype.kind != kind or present.ndim != 1:
        return None
    data: np.ndarray = np.zeros(n, dtype=numpy_dtype)
    data[~missing] = present
    return array(data, missing)
