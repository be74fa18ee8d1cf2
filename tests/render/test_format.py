"""The number formatting rule, checked against the cases the front-end is tested on too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nbinspect.render.format import (
    format_bytes,
    format_compact,
    format_count,
    format_params,
    format_percent,
    format_shape,
)

CASES = json.loads((Path(__file__).parents[1] / "format_cases.json").read_text(encoding="utf-8"))
RULES = {
    "count": format_count,
    "bytes": format_bytes,
    "compact": format_compact,
    "params": format_params,
    "shape": format_shape,
}


@pytest.mark.parametrize(("rule", "value", "text"), [(r, v, t) for r in RULES for v, t in CASES[r]])
def test_shared_cases(rule, value, text):
    assert RULES[rule](value) == text


@pytest.mark.parametrize(("part", "whole", "text"), [(p, w, t) for (p, w), t in CASES["percent"]])
def test_shared_percent_cases(part, whole, text):
    assert format_percent(part, whole) == text


def test_every_rule_has_cases():
    assert set(CASES) - {"about"} == {*RULES, "percent"}


def test_numpy_and_float_inputs_format_like_ints():
    import numpy as np

    assert format_count(np.int64(1234)) == format_count(1234.0) == "1,234"
    assert format_bytes(np.int64(1536)) == format_bytes(1536.0) == "1.5 KiB"
    assert format_compact(float("nan")) == format_bytes(None) == ""
