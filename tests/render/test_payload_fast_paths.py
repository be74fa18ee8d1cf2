"""The fast paths of the payload and the JSON export against the per-value code they stand
in for: whole columns read as ``jsonable`` reads each cell, whole arrays rounded as Python's
formatting rounds each value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nbinspect.render.json_export import column_values, jsonable, records
from nbinspect.render.rounding import significant

_COLUMNS = {
    "float64": np.array([1.5, np.nan, np.inf, -np.inf, -0.0]),
    "float32": np.array([1.5, np.nan, np.inf, 2, 3], dtype=np.float32),
    "float16": np.array([1.5, np.nan, -np.inf, 2, 3], dtype=np.float16),
    "int64": np.arange(5),
    "uint8": np.arange(5, dtype=np.uint8),
    "bool": np.array([True, False, True, True, False]),
    "Int64": pd.array([1, None, 3, 4, 5], dtype="Int64"),
    "boolean": pd.array([True, None, False, True, None], dtype="boolean"),
    "Float64": pd.array([1.5, None, np.nan, np.inf, 2], dtype="Float64"),
    "string": pd.array(["a", None, "c", "", "e"], dtype="string"),
    "str": pd.array(["a", None, "c", "", "e"], dtype="str"),
    "object": pd.array(
        [np.float32("nan"), (1, np.int64(2)), {"a": np.int64(3)}, pd.NA, np.float64("inf")], dtype=object
    ),
    "complex": np.array([1 + 2j] * 5),
}


@pytest.mark.parametrize("dtype", list(_COLUMNS))
def test_a_column_is_read_as_jsonable_reads_each_cell(dtype):
    column = pd.Series(_COLUMNS[dtype])
    frame = pd.DataFrame({"c": column})
    for got, want in (
        (column_values(column), [jsonable(v) for v in column.tolist()]),
        (column_values(column, box=True), [jsonable(row["c"]) for row in frame.to_dict("records")]),
        (records(frame), jsonable(frame.to_dict("records"))),
    ):
        assert repr(got) == repr(want)  # NaN, None and -0.0 told apart
        assert [type(v) for v in got] == [type(v) for v in want]


def test_rounding_whole_arrays_gives_what_formatting_each_value_gives():
    rng = np.random.default_rng(0)
    digits = rng.integers(100000, 1000000, 100_000) + 0.5
    values = np.concatenate(
        [
            rng.standard_normal(100_000) * 10.0 ** rng.integers(-30, 30, 100_000),  # beyond the exact powers too
            digits * 10.0 ** rng.integers(-20, 20, 100_000),  # next to a tie of the sixth digit
            np.nextafter(digits * 10.0 ** rng.integers(-20, 20, 100_000), np.inf),
            10.0 ** rng.integers(-25, 25, 50_000) * (1 + rng.integers(-3, 4, 50_000) * 2.0**-52),  # next to 10**n
            rng.standard_normal(50_000).astype(np.float32),
            [0.0, -0.0, np.nan, np.inf, -np.inf, 5e-324, 1.7976931348623157e308, 999999.5, 9999995e-3, 1e22, 1e-17],
        ]
    )
    got = significant(values)
    want = [float(f"{v:.6g}") for v in values.tolist()]
    assert [repr(v) for v in got] == [repr(v) for v in want]  # -0.0 and nan spelled out
