"""Frames built column by column hold exactly what pandas' own conversion gives."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbinspect.schema import LAYERS, Column, FrameSchema

_CASES = [
    [],
    [None],
    [None] * 5,
    [0, 1, 2**62],
    [None, 3, None, -7],
    [True, False],
    [None, True, False],
    [True, 2],  # bools among ints
    [1, 0],  # ints in a boolean column
    [np.int32(4), 5, np.int64(-1)],
    [np.bool_(True), False],
    [1.0, 2.0],  # integral floats: pandas converts them
    [1.5, 2],  # pandas refuses these for Int64
    [float("nan"), 1],
    [2**63],  # past int64: numpy makes it uint64
    [2**64],
    [pd.NA, 1],
    [None, pd.NA],
    ["a", None],
    ["a", "b", "a"],  # strings only: made as a StringArray directly
    ["a", float("nan"), pd.NA],
    [np.str_("a"), "b"],
    ["a", 1],  # a number among strings: pandas converts it
    ["a", b"b"],
    [(1, 2), (3, 4)],  # numpy would make a 2-d array of these
]


def _reference(values: list, dtype: str) -> pd.Series | type[Exception]:
    try:
        return pd.Series(pd.array(values, dtype=dtype))
    except Exception as exc:  # whatever pandas raises, the frame raises too
        return type(exc)


@pytest.mark.parametrize("dtype", ["Int64", "boolean", "string"])
@pytest.mark.parametrize("values", _CASES, ids=repr)
def test_columns_match_pandas_conversion(values: list, dtype: str) -> None:
    schema = FrameSchema("t", (Column("x", dtype, ""),))
    expected = _reference(values, dtype)
    if isinstance(expected, type):
        with pytest.raises(expected):
            schema.from_columns({"x": values}, len(values))
        return
    got = schema.from_columns({"x": values}, len(values))["x"]
    assert str(got.dtype) == str(expected.dtype)
    assert got.reset_index(drop=True).equals(expected), (list(got), list(expected))
    assert list(got.isna()) == list(expected.isna())


def test_left_out_columns_are_missing_in_their_dtype() -> None:
    frame = LAYERS.from_columns({"name": ["", "a"]}, 2)
    for column in LAYERS.columns:
        if column.name != "name":
            assert frame[column.name].isna().all(), column.name
    LAYERS.validate(frame)


@pytest.mark.parametrize("dtype", ["Int64", "boolean", "string", "object", "float64"])
@pytest.mark.parametrize("length", [0, 1, 5])
def test_left_out_columns_equal_pandas_missing_values(dtype: str, length: int) -> None:
    """A column left out is made directly: the same array as pandas' own from Nones (for the
    masked ones, the same data under the mask as a take of nothing), and owned by the frame."""
    schema = FrameSchema("t", (Column("x", dtype, ""), Column("y", dtype, "")))
    frame = schema.from_columns({"y": [None] * length}, length)
    expected = pd.Series(pd.array([None] * length, dtype=dtype) if dtype != "float64" else np.full(length, np.nan))
    for name in ("x", "y"):
        got = frame[name]
        assert str(got.dtype) == str(expected.dtype)
        assert got.reset_index(drop=True).equals(expected.astype(got.dtype))
        if dtype in ("Int64", "boolean"):
            taken = pd.array([], dtype=dtype).take(np.full(length, -1), allow_fill=True)
            assert (got.array._data == taken._data).all() and got.array._mask.all()
    if length:  # the two columns are separate arrays: changing one leaves the other
        frame.loc[0, "x"] = {"Int64": 1, "boolean": True, "string": "a", "object": (1,), "float64": 1.0}[dtype]
        assert frame["y"].isna().all()
