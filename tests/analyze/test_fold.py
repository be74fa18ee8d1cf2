"""Which repeated blocks fold is decided once (analyze/fold.py), by structure and tensor shapes."""

from __future__ import annotations

from torch import nn

import nbinspect


def test_blocks_of_different_shapes_do_not_fold():
    model = nn.Sequential(nn.Linear(4, 8, bias=False), nn.Linear(8, 4, bias=False))
    text = nbinspect.inspect(model, stats=False).summary()
    assert "×2" not in text  # the two Linears have the same type and counts but different shapes


def test_equal_blocks_fold_into_one_row():
    model = nn.Sequential(*(nn.Linear(8, 8) for _ in range(3)))
    text = nbinspect.inspect(model, stats=False).summary()
    assert "0–2 ×3" in text
