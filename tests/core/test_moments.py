"""Moments: one serialization (to_plain/from_plain) that JSON and RPCs carry without loss."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from nbinspect.analyze.stats import tensor_stats
from nbinspect.backends import as_source
from nbinspect.core.moments import SCALARS, Moments, merge


def _moments() -> list[Moments]:
    torch.manual_seed(0)
    values = {"w": torch.randn(64, 32), "nan": torch.tensor([1.0, float("nan"), float("inf"), 0.0])}
    source = as_source(values)
    by_key = tensor_stats(source, 16, progress=False)
    return [by_key[t.storage_key][0] for t in source.tensors]


def test_to_plain_survives_json_and_comes_back_equal():
    for m in _moments():
        back = Moments.from_plain(json.loads(json.dumps(m.to_plain())))
        assert back._fields == m._fields
        for f in m._fields:
            a, b = getattr(m, f), getattr(back, f)
            if isinstance(a, np.ndarray):
                assert b.dtype == np.int64 and np.array_equal(a, b)
            else:
                assert (math.isnan(a) and math.isnan(b)) or a == b, f
                assert type(b) in (int, float), f  # plain numbers, no numpy scalars


def test_merging_the_carried_moments_equals_merging_the_originals():
    ms = _moments()
    carried = [Moments.from_plain(json.loads(json.dumps(m.to_plain()))) for m in ms]
    a, b = merge(ms), merge(carried)
    assert all(getattr(a, f) == getattr(b, f) or math.isnan(getattr(a, f)) for f in SCALARS)
    assert np.array_equal(a.hist, b.hist)
