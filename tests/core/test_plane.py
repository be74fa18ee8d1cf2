"""The value view's planes: every cell maps to one tensor index (checked against numpy's
own index arithmetic), bad planes are refused, and the cases the front-end is tested on
(js/test/plane_cases.json) are what this module computes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nbinspect.core.plane import Plane, default_plane

CASES = Path(__file__).resolve().parents[2] / "js" / "test" / "plane_cases.json"


@pytest.mark.parametrize("shape", [(7,), (7, 5), (4, 6, 3), (5, 3, 2, 2)])
def test_default_plane_is_c_order(shape):
    """The default plane shows every value, in the tensor's own (C) order."""
    plane = default_plane(shape)
    rows, cols = plane.size(shape)
    assert rows * cols == int(np.prod(shape))
    flat = [plane.index(shape, r, c) for r in range(rows) for c in range(cols)]
    assert flat == [tuple(int(i) for i in np.unravel_index(k, shape)) for k in range(rows * cols)]


def test_two_axes_with_the_rest_fixed():
    shape = (5, 3, 2, 2)
    plane = Plane((1,), (0,), ((2, 1), (3, 0)))
    a = np.arange(60).reshape(shape)
    got = np.array([[a[plane.index(shape, r, c)] for c in range(5)] for r in range(3)])
    np.testing.assert_array_equal(got, a[:, :, 1, 0].T)


@pytest.mark.parametrize(
    ("plane", "why"),
    [
        ({"rows": [0], "cols": [0]}, "once"),
        ({"rows": [0], "cols": [1]}, "once"),  # axes 2, 3 neither shown nor fixed
        ({"rows": [0], "cols": [1], "fixed": [[2, 2], [3, 0]]}, "out of range"),
        ({"rows": [1, 0], "cols": [2, 3]}, "increasing"),
        ({"rows": "0"}, "bad plane"),
    ],
)
def test_bad_planes_are_refused(plane, why):
    with pytest.raises(ValueError, match=why):
        Plane.from_json(plane, (5, 3, 2, 2))


def test_the_front_end_cases_are_this_arithmetic():
    for case in json.loads(CASES.read_text()):
        plane = Plane.from_json(case["plane"], tuple(case["shape"]))
        assert list(plane.index(tuple(case["shape"]), *case["cell"])) == case["index"]
