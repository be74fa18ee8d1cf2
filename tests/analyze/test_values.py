"""The value view's reduction (analyze/values.py) against float64 numpy block reductions
computed here, block by block: means, largest |x|, exact NaN/±Inf counts; a single bad
value lights exactly its block whatever the shape, plane, band size or kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nbinspect.analyze import values as V
from nbinspect.backends.torch.source import from_module
from nbinspect.backends.torch.values import plane_bands
from nbinspect.core.plane import Plane, default_plane
from nbinspect.core.source import TensorEntry


def entry_of(t: torch.Tensor, name: str = "t") -> TensorEntry:
    from nbinspect.backends.torch.source import _tensor_entry

    return _tensor_entry(name, "", "parameter", t, False, [])  # [] takes the byte span


def reference(x: np.ndarray, grid: V.Grid) -> dict[str, np.ndarray]:
    """Block by block in float64, the slow obvious way."""
    (r0, r1), (c0, c1), (bh, bw) = grid.rows, grid.cols, grid.block
    h, w = grid.shape
    out = {k: np.zeros((h, w)) for k in ("mean", "absmax", "nan", "posinf", "neginf")}
    for i in range(h):
        for j in range(w):
            blk = x[r0 + i * bh : min(r1, r0 + (i + 1) * bh), c0 + j * bw : min(c1, c0 + (j + 1) * bw)].astype(
                np.float64
            )
            fin = blk[np.isfinite(blk)]
            out["mean"][i, j] = fin.mean() if fin.size else np.nan
            out["absmax"][i, j] = np.abs(fin).max() if fin.size else 0.0
            out["nan"][i, j] = np.isnan(blk).sum()
            out["posinf"][i, j] = np.isposinf(blk).sum()
            out["neginf"][i, j] = np.isneginf(blk).sum()
    return out


def reduce(x: np.ndarray, grid: V.Grid, band: int, numba: bool) -> V.ValueGrid:
    module = V.kernel(1 << 40) if numba else None
    out = V.ValueGrid.empty(grid)
    r0, r1 = grid.rows
    for b in range(r0, r1, band):
        V._add_band(out, x[b : min(r1, b + band), grid.cols[0] : grid.cols[1]], b, grid.cols[0], module)
    return out


def check(g: V.ValueGrid, ref: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(g.mean, ref["mean"], rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(g.absmax, ref["absmax"], rtol=1e-6)
    for k in ("nan", "posinf", "neginf"):
        np.testing.assert_array_equal(getattr(g, k), ref[k])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 700),
    cols=st.integers(1, 300),
    height=st.integers(1, 90),
    width=st.integers(1, 90),
    bad=st.sampled_from([np.nan, np.inf, -np.inf]),
    at=st.tuples(st.floats(0, 0.999), st.floats(0, 0.999)),
    zoom=st.booleans(),
    band_blocks=st.integers(1, 5),
    numba=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**16),
)
def test_one_bad_value_lights_exactly_its_block(
    rows, cols, height, width, bad, at, zoom, band_blocks, numba, dtype, seed
):
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(dtype)
    i, j = int(at[0] * rows), int(at[1] * cols)
    x[i, j] = bad
    region = ((0, rows), (0, cols))
    if zoom:  # a region around the bad value
        region = ((max(0, i - 37), min(rows, i + 50)), (max(0, j - 11), min(cols, j + 23)))
    grid = V.block_plan(*region, height, width)
    g = reduce(x, grid, grid.block[0] * band_blocks, numba)
    check(g, reference(x, grid))
    kind = {True: "nan"}.get(bool(np.isnan(bad)), "posinf" if bad > 0 else "neginf")
    lit = np.argwhere(getattr(g, kind) > 0)
    bi, bj = (i - region[0][0]) // grid.block[0], (j - region[1][0]) // grid.block[1]
    assert lit.tolist() == [[bi, bj]]
    painted = V.paint(g)
    assert painted.index[bi, bj] == V.SPECIAL[kind]
    assert np.count_nonzero(painted.index == V.SPECIAL[kind]) == 1
    assert painted.flags[bi, bj] & V.FLAGS[kind]


@settings(max_examples=25, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple),
    data=st.data(),
)
def test_bands_of_any_plane_equal_numpy_indexing(shape, data):
    """plane_bands over a tensor of 1-4 axes, default plane or two chosen axes with the rest
    fixed, equal the same cells indexed in numpy; Plane.index is the inverse."""
    t = torch.randn(shape)
    n = len(shape)
    if n >= 2 and data.draw(st.booleans()):
        a, b = data.draw(st.permutations(range(n)))[:2]
        fixed = tuple((k, data.draw(st.integers(0, shape[k] - 1))) for k in range(n) if k not in (a, b))
        plane = Plane((a,), (b,), fixed)
    else:
        plane = default_plane(shape)
    plane.check(shape)
    R, C = plane.size(shape)
    band = data.draw(st.integers(1, R))
    got = np.concatenate([x.copy() for _, x in plane_bands(entry_of(t), plane, (0, R), (0, C), band)])
    want = np.array([[t[plane.index(shape, r, c)].item() for c in range(C)] for r in range(R)], np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.int64, torch.bool])
def test_other_dtypes_are_read_exactly(dtype):
    t = (torch.arange(-60, 60).reshape(12, 10) % 7).to(dtype)
    bands = list(plane_bands(entry_of(t), default_plane((12, 10)), (0, 12), (0, 10), 5))
    got = np.concatenate([x for _, x in bands])
    np.testing.assert_array_equal(got, t.double().numpy())
    assert got.dtype == (np.float64 if dtype == torch.int64 else np.float32)


def test_grids_of_parts_merge_into_the_grid_of_the_whole():
    """Shards (any rectangle of the region, blocks cut anywhere) add up to the one-pass grid."""
    x = np.random.default_rng(3).standard_normal((301, 157)).astype(np.float32)
    x[150, 80] = np.nan
    grid = V.block_plan((0, 301), (0, 157), 40, 30)
    whole = reduce(x, grid, grid.block[0] * 2, False)
    parts = V.ValueGrid.empty(grid)
    for r0, r1, c0, c1 in ((0, 123, 0, 70), (0, 123, 70, 157), (123, 301, 0, 157)):
        part = V.reduce_bands(grid, [(r0, x[r0:r1, c0:c1])], col0=c0)
        parts = parts.merge(part)
    check(parts, reference(x, grid))
    np.testing.assert_allclose(parts.sum, whole.sum, rtol=1e-6)


def test_a_nan_in_the_middle_of_a_50000_by_4096_tensor_lights_its_pixel():
    """The issue's case: 204,800,000 values on a 683 x 511 canvas, one NaN, through the
    backend's bands and the fused kernel (the path a large tensor takes)."""
    t = torch.full((50_000, 4_096), 0.25)
    t[31_337, 2_049] = float("nan")
    t[7, 4_000] = float("-inf")
    grid = V.block_plan((0, 50_000), (0, 4_096), 511, 683)
    g = V.reduce_bands(grid, plane_bands(entry_of(t), default_plane(t.shape), grid.rows, grid.cols, V.band_rows(grid)))
    bh, bw = grid.block
    assert np.argwhere(g.nan).tolist() == [[31_337 // bh, 2_049 // bw]]
    assert np.argwhere(g.neginf).tolist() == [[7 // bh, 4_000 // bw]]
    painted = V.paint(g)
    assert painted.index[31_337 // bh, 2_049 // bw] == V.SPECIAL["nan"]
    assert painted.index[7 // bh, 4_000 // bw] == V.SPECIAL["neginf"]
    # every other block's mean is exactly 0.25 (the NaN block's too: its finite values)
    assert np.all(painted.value == 0.25)
    assert int(g.finite.sum()) == 50_000 * 4_096 - 2


def test_paint_colours_and_flags():
    g = V.ValueGrid.empty(V.Grid((0, 1), (0, 6), (1, 1)))
    g.sum[:] = [[-2.0, -1.0, 0.0, 1.0, 50.0, 0.0]]
    g.finite[:] = [[1, 1, 1, 1, 1, 0]]
    g.absmax[:] = [[2.0, 1.0, 0.0, 1.0, 50.0, 0.0]]
    g.nan[0, 5] = 1
    p = V.paint(g, limit=2.0, std=1.0)
    assert p.index.tolist() == [[0, 62, V.SPECIAL["zero"], 188, 250, V.SPECIAL["nan"]]]
    assert p.limits == (-2.0, 2.0)
    assert p.flags[0, 4] & V.FLAGS["outlier"] and not p.flags[0, 3] & V.FLAGS["outlier"]  # 50 > 6 * 1
    assert p.flags[0, 2] & V.FLAGS["zero"]
    # the palette: 251 scale steps, white in the middle, then the special colours
    assert len(V.PALETTE) == 256 and V.PALETTE[125] == "#f7f7f7" and V.PALETTE[V.SPECIAL["nan"]] == "#ff00ff"


def test_meta_and_lazy_tensors_have_no_values():
    from nbinspect.backends.torch.values import value_state

    meta = torch.nn.Linear(4, 3, device="meta")
    entries = {e.name: e for e in from_module(meta).tensors}
    assert "meta device" in value_state(entries["weight"])
    lazy = torch.nn.LazyLinear(3)
    assert "lazy" in value_state({e.name: e for e in from_module(lazy).tensors}["weight"])
    assert value_state(entry_of(torch.ones(2))) is None
