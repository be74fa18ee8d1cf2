"""The fused one-pass kernels (analyze/fused.py, analyze/kernels.py) against float64
references and against the torch path they replace: same counts, min, max and
histograms, moments within 1e-7, also for NaN/Inf, zeros, float32 overflow, every dtype,
and a tensor split across threads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nbinspect
from nbinspect.analyze import fused
from nbinspect.analyze.reduce import CHUNK, SAMPLE, _bin_counts, batch_moments, large_moments
from nbinspect.analyze.scratch import Scratch
from nbinspect.core.moments import histogram_edges

pytest.importorskip("numba")
KERNELS = fused.kernels(fused.FUSED_ABOVE)


@pytest.fixture
def always_fused(monkeypatch):
    monkeypatch.setattr(fused, "FUSED_ABOVE", 0)
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)


def _reference(t: torch.Tensor) -> dict:
    x = t.double().reshape(-1).numpy()
    f = x[np.isfinite(x)]
    return {
        "mean": f.mean(),
        "std": f.std(),
        "abs_mean": np.abs(f).mean(),
        "min": f.min(),
        "max": f.max(),
        "zeros": int((x == 0).sum()),
        "nan": int(np.isnan(x).sum()),
        "inf": int(np.isinf(x).sum()),
    }


def _values(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 0.02 + 1).to(dtype)  # far from 0
    return torch.randint(-100, 100, (n,), generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("special", [False, True])
def test_fused_moments_match_float64_and_the_torch_path(dtype, special):
    t = _values(dtype, 3 * SAMPLE + 5, seed=1)
    t[3] = 0
    t[-1] = 0
    if special and dtype.is_floating_point:
        t[7], t[900], t[-2] = math.nan, math.inf, -math.inf
    fast = large_moments(t, 64, Scratch(CHUNK, KERNELS))
    slow = large_moments(t, 64, Scratch(CHUNK))
    ref = _reference(t)
    assert (fast.min, fast.max, fast.zeros, fast.nan, fast.inf) == (
        ref["min"],
        ref["max"],
        ref["zeros"],
        ref["nan"],
        ref["inf"],
    )
    assert abs(fast.mean - ref["mean"]) <= 1e-7 * ref["abs_mean"]
    assert fast.std == pytest.approx(ref["std"], rel=1e-7)
    assert fast.abs_mean == pytest.approx(ref["abs_mean"], rel=1e-7)
    assert np.array_equal(fast.hist, slow.hist) and fast.hist_sample == slow.hist_sample
    assert (fast.hist_lo, fast.hist_hi) == (slow.hist_lo, slow.hist_hi)


def test_min_max_from_bits_cover_signs_and_negative_zero():
    for values in ([-3.0, -1.0, -2.5] * SAMPLE, [0.5, 2.0] * SAMPLE, [-0.0, 1.0] * SAMPLE, [-0.0, -1.0] * SAMPLE):
        t = torch.tensor(values)
        m = large_moments(t, 8, Scratch(CHUNK, KERNELS))
        assert (m.min, m.max, m.zeros) == (min(values), max(values), values.count(0.0))


def test_float32_block_sums_that_overflow_are_redone_in_float64():
    t = torch.zeros(3 * SAMPLE)
    t[::3] = 3e19  # squares overflow float32, not float64
    m = large_moments(t, 16, Scratch(CHUNK, KERNELS))
    ref = _reference(t)
    assert m.std == pytest.approx(ref["std"], rel=1e-9) and m.zeros == ref["zeros"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.usefixtures("split_threads")
def test_a_tensor_split_across_threads_gives_the_same_numbers(monkeypatch, dtype):
    t = _values(dtype, 5 * SAMPLE, seed=2)
    one = large_moments(t, 64, Scratch(CHUNK, KERNELS))
    monkeypatch.setattr(fused, "PART", SAMPLE)  # split_threads: one share per PART
    assert len(fused._splits(t.numel(), fused._threads(t.numel()))) > 1
    split = large_moments(t, 64, Scratch(CHUNK, KERNELS))
    assert (split.min, split.max, split.zeros, split.count) == (one.min, one.max, one.zeros, one.count)
    assert split.mean == pytest.approx(one.mean, rel=1e-12) and split.m2 == pytest.approx(one.m2, rel=1e-9)
    assert np.array_equal(split.hist, one.hist) and split.hist_sample == one.hist_sample  # the sample, part by part


def test_both_histograms_bin_like_numpy_on_and_near_the_edges():
    edges = histogram_edges(-1.0, 3.0, 16)
    near = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    values = np.concatenate([near[(near >= -1) & (near <= 3)], np.random.default_rng(0).uniform(-1, 3, 10_000)])
    counts = np.zeros(16, np.int64)
    KERNELS.bin_counts(np.append(values, [np.nan, np.inf]), edges, counts)
    assert np.array_equal(counts, np.histogram(values, 16, range=(-1.0, 3.0))[0])
    numpy_path = _bin_counts(values, np.array([len(values)]), np.array([-1.0]), np.array([3.0]), 16)
    assert np.array_equal(numpy_path[0], counts)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32])
def test_short_dtypes_sum_exactly_around_a_shift_of_their_own_type(dtype):
    t = _values(dtype, 5 * SAMPLE, seed=4)  # far from 0: the shift must be near the mean
    m = large_moments(t, 64, Scratch(CHUNK, KERNELS))
    x = t.double().numpy()
    assert m.mean == pytest.approx(x.mean(), rel=1e-15) and m.m2 == pytest.approx(
        ((x - x.mean()) ** 2).sum(), rel=1e-12
    )


def test_stats_frame_is_the_same_on_both_paths(always_fused):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(300, 400), torch.nn.LayerNorm(400), torch.nn.Linear(400, 500))
    fast = nbinspect.stats(model).set_index("name")
    fused._loaded["kernels"], saved = None, fused._loaded["kernels"]  # as if numba were missing
    try:
        slow = nbinspect.stats(model).set_index("name")
    finally:
        fused._loaded["kernels"] = saved
    for column in ("numel", "min", "max", "zeros", "nan", "inf", "hist_sample"):
        assert fast[column].tolist() == slow[column].tolist(), column
    for column in ("std", "l2", "abs_mean"):
        assert np.allclose(fast[column], slow[column], rtol=1e-7, atol=1e-12), column
    assert (np.abs(fast["mean"] - slow["mean"]) <= 1e-7 * fast["abs_mean"]).all()  # means near 0
    assert all(np.array_equal(a, b) for a, b in zip(fast["hist_counts"], slow["hist_counts"]))


def test_small_work_never_loads_the_kernels():
    assert fused.kernels(fused.LOADED_ABOVE - 1) is None
    assert fused.kernels(fused.FUSED_ABOVE) is KERNELS


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_fused_compare_matches_float64(always_fused, dtype):
    g = torch.Generator().manual_seed(3)
    a = torch.randn(3 * SAMPLE + 1, generator=g, dtype=torch.float64)
    steps = torch.tensor([0.0, 5e-7, 5e-5, 1e-2], dtype=torch.float64)
    b = a + steps[torch.randint(0, 4, a.shape, generator=g)]
    a, b = a.to(dtype), b.to(dtype)
    b[10] = math.nan
    thresholds = (-1.0, 1e-8, 1e-6, 1e-4)
    row = nbinspect.compare({"w": a}, {"w": b}, thresholds=thresholds).frame.iloc[0]
    x, y = a.double().numpy(), b.double().numpy()
    d = y - x
    assert math.isnan(row["max_abs_delta"]) and math.isnan(row["l2_delta"])
    assert row["l2_a"] == pytest.approx(np.linalg.norm(x), rel=1e-9)
    assert row["frac_above"] == tuple(float((np.abs(d) > t).mean()) for t in thresholds)
    b[10] = a[10]
    row = nbinspect.compare({"w": a}, {"w": b}).frame.iloc[0]
    d = b.double().numpy() - x
    assert row["max_abs_delta"] == np.abs(d).max()
    assert row["l2_delta"] == pytest.approx(np.linalg.norm(d), rel=1e-9)
    assert row["cosine"] == pytest.approx(
        x @ b.double().numpy() / np.linalg.norm(x) / np.linalg.norm(b.double()), rel=1e-9
    )


def _pair_reference(a: torch.Tensor, b: torch.Tensor, thresholds: tuple) -> dict:
    x, y = a.double().numpy(), b.double().numpy()
    d = y - x
    return {
        "sums": {"aa": x @ x, "bb": y @ y, "ad": x @ d, "dd": d @ d, "d": d.sum(), "abs_sum": np.abs(d).sum()},
        "lo": d.min(),
        "hi": d.max(),
        "above": [int((np.abs(d) > t).sum()) for t in thresholds],
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.usefixtures("split_threads")
def test_fused_pair_sums_match_float64_with_and_without_norms(dtype, monkeypatch):
    monkeypatch.setattr(fused, "_CHUNK", 1 << 17)  # fp16/bf16: several widened chunks per thread's share
    g = torch.Generator().manual_seed(5)
    a = torch.randn(3 * fused.PART + 7, generator=g, dtype=torch.float64)  # several threads' shares
    steps = torch.tensor([0.0, -5e-7, 5e-7, -5e-5, 1e-2], dtype=torch.float64)
    b = (a + steps[torch.randint(0, 5, a.shape, generator=g)]).to(dtype)
    a = a.to(dtype)
    thresholds = (0.0, 1e-8, 1e-6, 1e-4)
    ref = _pair_reference(a, b, thresholds)
    scratch = Scratch(1 << 16)
    (full,) = fused.pair_sums(KERNELS, [(a, b)], thresholds, scratch)
    (lean,) = fused.pair_sums(KERNELS, [(a, b)], thresholds, scratch, norms=False)
    for sums in (full, lean):  # the variant compiled without the norms measures the rest alike
        assert sums.finite and sums.n == a.numel()
        assert sums.above == ref["above"] and (sums.lo, sums.hi) == (ref["lo"], ref["hi"])
        assert sums.max_abs == max(-ref["lo"], ref["hi"])
        for key in ("ad", "dd", "d", "abs_sum"):
            assert getattr(sums, key) == pytest.approx(ref["sums"][key], rel=1e-9), key
    assert (full.aa, full.bb) == (
        pytest.approx(ref["sums"]["aa"], rel=1e-12),
        pytest.approx(ref["sums"]["bb"], rel=1e-12),
    )
    assert (lean.aa, lean.bb) == (0.0, 0.0)
    assert scratch.nbytes == 0  # nothing went through torch's upcast, nor needed the torch path's mask


def test_fused_pair_sums_hand_count_signs_nan_and_empty():
    a = torch.zeros(5, dtype=torch.float32)
    b = torch.tensor([0.0, -0.0, -3.0, 2e-6, -2e-6])
    scratch = Scratch(1 << 10)
    (sums,) = fused.pair_sums(KERNELS, [(a, b)], (0.0, 1e-6, 2.5), scratch, norms=False)
    assert sums.finite and sums.above == [3, 3, 1] and (sums.lo, sums.hi) == (-3.0, float(b[3]))
    assert sums.abs_sum == pytest.approx(3.000004) and sums.d == pytest.approx(-3.0) and sums.max_abs == 3.0
    for bad in (math.inf, -math.inf, math.nan, -math.nan):
        c = b.clone()
        c[4] = bad
        first, second = fused.pair_sums(KERNELS, [(a, c), (a, b)], (0.0,), scratch)
        assert not first.finite and second.finite  # pairs kept apart
        assert math.isnan(first.max_abs) if math.isnan(bad) else first.max_abs == math.inf
    # A NaN is never above a threshold, also in a block where every other |d| passes it.
    c = torch.tensor([1.0, 2.0, math.nan, -3.0, 4.0])
    (sums,) = fused.pair_sums(KERNELS, [(a, c)], (-1.0, 0.0, 0.5, 3.5), scratch)
    assert sums.above == [4, 4, 4, 1] and math.isnan(sums.max_abs)
    assert fused.pair_sums(KERNELS, [(a, b), (b, a)], (0.0,), scratch)[1].hi == 3.0
    (empty,) = fused.pair_sums(KERNELS, [(torch.empty(0), torch.empty(0))], (0.0,), scratch)
    assert (empty.n, empty.dd, empty.max_abs, empty.above, empty.finite) == (0, 0.0, 0.0, [0], False)


def test_recurring_work_loads_the_kernels_from_the_smaller_size(monkeypatch):
    monkeypatch.setattr(fused, "_loaded", {})
    assert fused.kernels(fused.LOADED_ABOVE, recurring=False) is None
    assert fused.kernels(fused.LOADED_ABOVE, recurring=True) is KERNELS


def test_small_tensors_in_the_segment_kernel_match_the_numpy_path():
    g = torch.Generator().manual_seed(6)
    tensors = [
        torch.randn(300, generator=g) * 0.02 + 1,
        torch.tensor([0.0, -0.0, 2.0, math.nan, math.inf, -math.inf, 2.0]),
        torch.full((5,), 3.0),  # one value: the histogram's range widens by 0.5
        torch.tensor([math.nan, math.nan]),  # nothing finite
        torch.randint(-5, 5, (64,), generator=g, dtype=torch.int64),
        torch.empty(0),
    ]
    fast, slow = batch_moments(tensors, 16, KERNELS), batch_moments(tensors, 16)
    for a, b in zip(fast, slow):
        assert (a.numel, a.count, a.zeros, a.nan, a.inf, a.hist_sample) == (
            b.numel,
            b.count,
            b.zeros,
            b.nan,
            b.inf,
            b.hist_sample,
        )
        assert np.array_equal(a.hist, b.hist)
        for field in ("mean", "m2", "abs_sum", "min", "max", "hist_lo", "hist_hi"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-12, nan_ok=True), field


@pytest.mark.parametrize(
    ("a_dtype", "b_dtype"),
    [
        (torch.bfloat16, torch.float32),
        (torch.float16, torch.bfloat16),
        (torch.float32, torch.float64),
        (torch.int64, torch.float16),
    ],
)
@pytest.mark.usefixtures("split_threads")
def test_fused_pair_sums_of_mixed_dtypes_match_float64(a_dtype, b_dtype):
    g = torch.Generator().manual_seed(8)
    a = (torch.randn(3 * fused.PART + 5, generator=g) * 50).to(a_dtype)
    b = (a.float() + torch.randn(a.shape, generator=g) * 1e-1).to(b_dtype)
    thresholds = (0.0, 1e-4, 1e-2)
    (sums,) = fused.pair_sums(KERNELS, [(a, b)], thresholds, Scratch(1 << 16))  # mixed with wide: torch upcasts
    ref = _pair_reference(a, b, thresholds)
    assert (sums.n, sums.lo, sums.hi, sums.above) == (a.numel(), ref["lo"], ref["hi"], ref["above"])
    for key, want in ref["sums"].items():
        assert getattr(sums, key) == pytest.approx(want, rel=1e-9), key


def test_fused_compare_of_an_empty_tensor_is_same_and_zero(always_fused):
    a = {"empty": torch.empty(0), "w": torch.ones(3)}
    frame = nbinspect.compare(a, {k: v.clone() for k, v in a.items()}).frame.set_index("name")
    row = frame.loc["empty"]
    assert (row["status"], row["numel"], row["l2_delta"], row["max_abs_delta"]) == ("same", 0, 0.0, 0.0)
    assert row["frac_above"] == (0.0, 0.0, 0.0) and frame.loc["w", "status"] == "same"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("limit", [1e4, math.inf])  # moderate values (min/max from the bits), then every pattern
def test_the_kernel_widens_every_16_bit_pattern_exactly(dtype, limit):
    """bf16/fp16 are read as their bit patterns and widened inside the kernel: every one of
    the 65,536 patterns, against float64 (NaN and ±Inf counted, not summed)."""
    t = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    t = t[~(t.double().abs() > limit)].contiguous()  # keeps NaN, ±Inf when the limit is inf
    x = t.double().numpy()
    finite = x[np.isfinite(x)]
    sample = np.empty(t.numel())
    n, count, nan, zeros, s, sq, a, lo, hi = fused._array_sums(KERNELS, fused.kernel_array(t), 0.0, sample, 0, 1)
    assert np.array_equal(sample, x, equal_nan=True)  # each element widened exactly
    assert (n, count, nan, zeros) == (len(x), len(finite), int(np.isnan(x).sum()), 2)  # +0 and -0
    assert (lo, hi) == (finite.min(), finite.max())
    scale = math.fsum(np.abs(finite))
    assert abs(s - math.fsum(finite)) <= 1e-7 * scale and a == pytest.approx(scale, rel=1e-7)
    assert sq == pytest.approx(math.fsum(finite * finite), rel=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_tensor_is_read_by_the_kernel_without_a_copy(dtype, monkeypatch):
    """The fused path hands the kernel the tensor's own memory (no torch or numpy cast)."""
    t = _values(dtype, 3 * SAMPLE + 5, seed=4)
    seen = []
    real = fused._array_sums
    monkeypatch.setattr(fused, "_array_sums", lambda k, x, *rest: seen.append(x) or real(k, x, *rest))
    large_moments(t, 64, Scratch(CHUNK, KERNELS))
    assert seen and all(x.itemsize == 2 and np.shares_memory(x, t.view(torch.int16).numpy()) for x in seen)
