"""Moments and merge: float64 references, exact counts, associativity over random splits."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nbinspect.analyze import fused
from nbinspect.analyze.reduce import CHUNK, SAMPLE, _sample_stride, _scale_counts, batch_moments, tensor_moments
from nbinspect.core.moments import Moments, _interp_rows, histogram_edges, merge, merge_groups, rebin


def reference(values: np.ndarray) -> dict:
    """Statistics of `values` computed plainly in float64 numpy."""
    v = np.asarray(values, dtype=np.float64).ravel()
    finite = v[np.isfinite(v)]
    return {
        "numel": v.size,
        "count": finite.size,
        "mean": finite.mean(),
        "std": finite.std(),
        "min": finite.min(),
        "max": finite.max(),
        "abs_mean": np.abs(finite).mean(),
        "l2": math.sqrt(math.fsum(finite * finite)),
        "zeros": int((v == 0).sum()),
        "nan": int(np.isnan(v).sum()),
        "inf": int(np.isinf(v).sum()),
    }


def assert_matches(m: Moments, ref: dict, rel: float) -> None:
    for key in ("numel", "count", "zeros", "nan", "inf"):
        assert getattr(m, key) == ref[key], key
    assert m.min == ref["min"] and m.max == ref["max"]
    scale = max(ref["abs_mean"], 1e-300)
    assert abs(m.mean - ref["mean"]) <= rel * scale, (m.mean, ref["mean"])
    # the spread is as exact as the values' scale allows: equal values merge to a std of
    # ~1e-16 of their size (the merged means round), not to an exact 0
    assert abs(m.std - ref["std"]) <= rel * max(ref["std"], scale), (m.std, ref["std"])
    for key in ("abs_mean", "l2"):
        assert getattr(m, key) == pytest.approx(ref[key], rel=rel, abs=1e-300), key


def part_moments(values: torch.Tensor, cuts: list[int]) -> list[Moments]:
    bounds = [0, *sorted(set(cuts)), values.numel()]
    return [tensor_moments(values[a:b]) for a, b in itertools.pairwise(bounds)]


def merge_tree(parts: list[Moments], shape: list[int]) -> Moments:
    """Merge `parts` pairwise in an order driven by `shape` (a random merge tree)."""
    parts = list(parts)
    for s in shape:
        if len(parts) == 1:
            break
        i = s % (len(parts) - 1)
        parts[i : i + 2] = [merge(parts[i : i + 2])]
    return merge(parts)


values_strategy = st.lists(
    st.one_of(
        # below ~1e-150 squares underflow float64 itself; such weights do not occur
        st.floats(-1e3, 1e3, allow_nan=False, width=64).map(lambda v: 0.0 if abs(v) < 1e-150 else v),
        st.sampled_from([0.0, -0.0, 1.0, float("nan"), float("inf"), float("-inf")]),
    ),
    min_size=1,
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(
    values=values_strategy,
    cuts=st.lists(st.integers(0, 300), max_size=8),
    shape=st.lists(st.integers(0, 50), max_size=10),
)
def test_merge_over_random_splits_matches_float64_reference(values, cuts, shape):
    x = torch.tensor(values, dtype=torch.float64)
    merged = merge_tree(part_moments(x, [c % (len(values) + 1) for c in cuts]), shape)
    whole = tensor_moments(x)
    for key in ("numel", "count", "zeros", "nan", "inf"):
        assert getattr(merged, key) == getattr(whole, key), key
    assert merged.hist.sum() == merged.count
    if merged.count == 0:
        assert math.isnan(merged.mean) and merged.hist_sample == 0
        return
    ref = reference(np.array(values))
    assert_matches(merged, ref, rel=1e-9)
    assert merged.hist_lo == ref["min"] and merged.hist_hi == ref["max"]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), parts=st.integers(2, 6), shape=st.lists(st.integers(0, 50), max_size=8))
def test_merge_is_associative_and_exact_on_shared_edges(seed, parts, shape):
    """Parts that all hold the global min and max share edges: merged histograms are exact,
    whatever the merge order."""
    g = torch.Generator().manual_seed(seed)
    pieces = [
        torch.randn(int(torch.randint(1, 200, (1,), generator=g)), generator=g, dtype=torch.float64)
        for _ in range(parts)
    ]
    pieces = [torch.cat([p, torch.tensor([-5.0, 5.0], dtype=torch.float64)]) for p in pieces]
    moments = [tensor_moments(p) for p in pieces]
    a, b = merge_tree(moments, shape), merge(moments)
    union = torch.cat(pieces).numpy()
    expected = np.histogram(union, 64, range=(-5.0, 5.0))[0]
    assert np.array_equal(a.hist, expected) and np.array_equal(b.hist, expected)
    assert a.count == b.count == union.size
    assert a.mean == pytest.approx(b.mean, rel=1e-12, abs=1e-15)
    assert a.m2 == pytest.approx(b.m2, rel=1e-12)


def test_small_tensor_histogram_is_numpy_histogram():
    x = np.concatenate([np.random.default_rng(0).normal(size=5000), np.arange(-10, 11, dtype=np.float64)])
    for bins in (1, 7, 64, 100):
        m = tensor_moments(torch.from_numpy(x), bins)
        counts, edges = np.histogram(x, bins)
        assert np.array_equal(m.hist, counts)
        assert np.array_equal(m.edges, edges)


def test_integer_values_on_bin_edges_bin_like_numpy():
    x = np.arange(0, 1001, dtype=np.float64) % 37
    m = tensor_moments(torch.from_numpy(x), 64)
    assert np.array_equal(m.hist, np.histogram(x, 64)[0])


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (2.5, 2.5), (float("nan"), float("nan")), (-3.0, 1e-3)])
def test_histogram_edges_match_numpy(lo, hi):
    data = np.array([]) if math.isnan(lo) else np.array([lo, hi])
    assert np.array_equal(histogram_edges(lo, hi, 64), np.histogram(data, 64)[1])


def test_rebin_keeps_totals_and_moves_point_masses_whole():
    counts = np.array([5, 0, 3, 2], dtype=np.int64)
    moved = rebin(counts, 0.0, 4.0, -4.0, 4.0)
    assert moved.sum() == counts.sum() and np.array_equal(moved, [0, 0, 5, 5])
    point = rebin(np.array([0, 0, 7, 0], dtype=np.int64), 1.0, 1.0, 0.0, 4.0)
    assert np.array_equal(point, [0, 7, 0, 0])
    assert np.array_equal(rebin(counts, 0.0, 4.0, 0.0, 4.0), counts)


def test_merge_rejects_mismatched_bins_and_nothing():
    with pytest.raises(ValueError, match="at least one"):
        merge([])
    with pytest.raises(ValueError, match="different bin counts"):
        merge([tensor_moments(torch.ones(3), 8), tensor_moments(torch.ones(3), 16)])


def test_batch_moments_equal_one_at_a_time():
    g = torch.Generator().manual_seed(1)
    tensors = [torch.randn(n, generator=g) for n in (1, 5, 64, 1000)] + [torch.tensor([float("nan")]), torch.empty(0)]
    together = batch_moments(tensors)
    for t, m in zip(tensors, together):
        alone = batch_moments([t])[0]
        assert np.array_equal(m.hist, alone.hist) and m.count == alone.count
        assert (math.isnan(m.mean) and math.isnan(alone.mean)) or m.mean == alone.mean


def test_large_tensor_moments_match_float64_reference():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(3 * (1 << 20) + 123, generator=g) * 0.02
    x[::1001] = 0.0
    assert_matches(tensor_moments(x), reference(x.numpy()), rel=1e-7)


def test_std_stays_accurate_far_from_zero():
    """LayerNorm-like weights: mean**2 / var = 1e8; sum-of-squares formulas lose it all."""
    g = torch.Generator().manual_seed(3)
    x = 1.0 + torch.randn(2 * (1 << 20) + 7, generator=g) * 1e-4
    m = tensor_moments(x)
    assert_matches(m, reference(x.numpy()), rel=1e-7)
    small = x[: SAMPLE // 2]
    assert tensor_moments(small).std == pytest.approx(small.double().numpy().std(), rel=1e-9)


def test_nan_and_inf_are_counted_and_left_out_of_moments():
    g = torch.Generator().manual_seed(4)
    for n in (1000, 3 * SAMPLE):
        x = torch.randn(n, generator=g)
        x[::97] = float("nan")
        x[5::301] = float("inf")
        x[7::503] = -float("inf")
        m = tensor_moments(x)
        assert_matches(m, reference(x.numpy()), rel=1e-7)
        assert m.hist.sum() == m.count


def test_all_nan_and_empty_tensors():
    m = tensor_moments(torch.full((SAMPLE * 2,), float("nan")))
    assert (m.numel, m.count, m.nan) == (SAMPLE * 2, 0, SAMPLE * 2) and math.isnan(m.mean) and m.hist.sum() == 0
    e = tensor_moments(torch.empty(0, 5))
    assert (e.numel, e.count, e.zeros) == (0, 0, 0) and math.isnan(e.std) and e.l2 == 0.0
    assert np.array_equal(e.edges, np.histogram(np.array([]), 64)[1])


def test_sampled_histogram_error_is_small():
    """Large tensors bin a strided sample of SAMPLE elements; measured against the exact
    histogram, each bin is off by well under 1% of the elements."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4096, 1024, generator=g) * 0.02
    m = tensor_moments(x)
    exact = np.histogram(x.double().numpy(), 64, range=(m.min, m.max))[0]
    assert m.hist.sum() == exact.sum() == x.numel()
    assert m.hist_sample <= SAMPLE and m.hist_sample > SAMPLE * 0.9
    assert np.abs(m.hist - exact).max() / x.numel() < 0.005


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("stride", [1, 3, 7])
def test_sample_shares_of_any_split_fill_the_strided_sample_once(kind, stride):
    """The torch path (a chunk at a time) and the kernels (a thread's share at a time) place a
    part's sampled elements by fused.sample_share: over any split, elements 0, stride, 2·stride, ..."""
    n = 100
    values = np.arange(n, dtype=np.float64) if kind == "numpy" else torch.arange(n, dtype=torch.float64)
    sample = values[: -(-n // stride)] * 0 - 1
    cuts = [0, 1, 2, 5, 6, 40, 41, 99, 100]  # parts shorter and longer than the stride
    for start, end in itertools.pairwise(cuts):
        share, first = fused.sample_share(start, end, sample, stride)
        share[:] = values[start:end][first::stride]
    assert sample.tolist() == list(range(0, n, stride))


def test_the_torch_path_samples_a_tensor_of_many_chunks_at_its_stride():
    t = torch.randn(4 * CHUNK + 12_345, generator=torch.Generator().manual_seed(6))[::2]  # not dense: row pieces
    m = tensor_moments(t)
    picked = t.double().numpy()[:: _sample_stride(t)]
    exact = np.histogram(picked, 64, range=(m.min, m.max))[0]
    assert m.hist_sample == len(picked) and np.array_equal(m.hist, _scale_counts(exact, t.numel()))


def test_rebin_sum_equals_rebinning_each_row_on_its_own():
    from nbinspect.core.moments import rebin_sum

    rng = np.random.default_rng(0)
    bins, k = 16, 200
    counts = rng.integers(0, 50, size=(k, bins))
    lo = rng.uniform(-3, 0, size=k)
    hi = lo + rng.uniform(0, 3, size=k)
    hi[::7] = lo[::7]  # point masses
    lo[::11], hi[::11] = -3.0, 3.0  # already on the target range
    new_lo, new_hi = -3.0, 3.0
    new_edges = np.linspace(new_lo, new_hi, bins + 1)
    expected = np.zeros(bins, np.int64)
    for c, a, b in zip(counts, lo, hi):  # the plain definition, one row at a time
        if a == new_lo and b == new_hi:
            expected += c
        elif a == b:
            expected[min(max(np.searchsorted(new_edges, a, side="right") - 1, 0), bins - 1)] += c.sum()
        else:
            cumulative = np.concatenate([[0], np.cumsum(c)])
            expected += np.diff(np.rint(np.interp(new_edges, np.linspace(a, b, bins + 1), cumulative))).astype(np.int64)
    result = rebin_sum(counts, lo, hi, new_lo, new_hi)
    assert result.sum() == counts.sum()
    assert np.abs(result - expected).max() <= 1  # linspace vs numpy's edge arithmetic: rounding only


def test_merge_groups_is_merge_for_every_group():
    rng = np.random.default_rng(5)
    parts = []
    for i in range(40):
        values = rng.normal(i % 3, 1 + i % 4, size=50 + i)
        if i % 7 == 0:
            values[:3] = np.nan
        if i % 11 == 0:
            values[:] = 2.5  # a point mass
        parts.append(batch_moments([torch.from_numpy(values)], bins=16)[0])
    parts.append(batch_moments([torch.full((4,), np.nan)], bins=16)[0])  # no finite values
    groups = [[], [3], [0, 1], [0, 11, 22], list(range(41)), [40, 40], [40, 2], [5, 5, 6]]
    for group, got in zip(groups, merge_groups(parts, groups)):
        if not group:
            assert got is None
            continue
        want = merge([parts[i] for i in group])
        assert np.array_equal(got.hist, want.hist), group
        for field in ("numel", "count", "zeros", "nan", "inf", "min", "max", "hist_lo", "hist_hi", "hist_sample"):
            assert getattr(got, field) == getattr(want, field) or (
                math.isnan(getattr(got, field)) and math.isnan(getattr(want, field))
            ), field
        if want.count:
            assert got.mean == pytest.approx(want.mean, rel=1e-13, abs=1e-15)
            assert got.m2 == pytest.approx(want.m2, rel=1e-12)


def test_rows_interpolate_exactly_as_numpy_interp():
    rng = np.random.default_rng(6)
    lo = rng.normal(size=300)
    hi = lo + rng.random(300) + 0.01
    new_lo, new_hi = lo - rng.random(300), hi + rng.random(300)
    xp, x = histogram_edges(lo, hi, 32), histogram_edges(new_lo, new_hi, 32)
    x[:10] = xp[:10]  # on the edges exactly, and beyond both ends
    x[10:20, 0], x[10:20, -1] = xp[10:20, 0] - 5, xp[10:20, -1] + 5
    fp = np.cumsum(rng.integers(0, 9, size=xp.shape), axis=1).astype(float)
    want = np.stack([np.interp(a, b, c) for a, b, c in zip(x, xp, fp)])
    assert np.array_equal(_interp_rows(x, xp, fp), want)
