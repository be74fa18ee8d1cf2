"""The fused reduction kernels (numba): each reads a block of memory once and computes every
sum the statistics or the comparison need while the block is in cache.

Imported only through :mod:`.fused`, which decides when compiling and loading them pays
off. Compiled once per machine (``cache=True`` keeps the machine code on disk; the first
compile takes a few seconds, later processes load it in a fraction of a second).

How the loops stay vectorized (measured on this CPU; a loop that LLVM does not vectorize
runs at a fifth of the speed):

- Sums are taken in float64 with reassociation allowed (``fastmath`` without the
  no-NaN/no-Inf flags, so NaN and Inf still propagate and the caller can see them).
- Floating min/max reductions do not vectorize in numba, so min and max come from the
  bit patterns: over the same bits read as signed and as unsigned integers, the four
  integer extremes give the float min and max exactly (see :func:`decode_extremes`) and
  reveal NaN/Inf and zeros (+0 is unsigned 0, -0 is the smallest signed integer). Integer
  min/max without arithmetic keeps its width, which vectorizes.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["BLOCK", "change_sums", "delta_sums", "moments_careful", "moments_fast"]

BLOCK = 1 << 8  # elements per inner block: summed in the array's own float type, then in float64
_SUMS = {"reassoc", "nsz", "contract", "arcp"}  # no "nnan"/"ninf": NaN and Inf propagate

_MOMENTS_SIGNATURES = [
    "Tuple((float64, float64, float64, int32, int32, uint32, uint32, int64))"
    "(float32[::1], int32[::1], uint32[::1], float32, int32)",
    "Tuple((float64, float64, float64, int64, int64, uint64, uint64, int64))"
    "(float64[::1], int64[::1], uint64[::1], float64, int64)",
]


@numba.njit(_MOMENTS_SIGNATURES, nogil=True, cache=True, fastmath=_SUMS, error_model="numpy")
def moments_fast(x, signed, unsigned, shift, negative_zero):  # pragma: no cover - compiled
    """Over a non-empty array (and its bits as signed and unsigned integers): the sums of
    (x - shift), (x - shift)² and |x|, the four integer extremes of the bits, and the number
    of exact zeros (counted only in blocks that hold one).

    Each block of BLOCK elements is summed in the array's type (`shift` has it too), the
    block sums in float64: for float32 each partial sum adds ~32 values (vector lanes times
    unrolling), ~1e-8 relative error, and the loop runs twice as fast as one in float64. A
    sum that overflows float32 comes back Inf, and the caller redoes the array in float64."""
    n = x.size
    s = q = a = 0.0
    smin = smax = signed[0]
    umin = umax = unsigned[0]
    zeros = 0
    zero = shift - shift
    full = n // BLOCK
    for block in range(full + 1):
        start = block * BLOCK
        size = BLOCK if block < full else n - start
        if size == 0:
            break
        bmin = signed[start]
        bumin = unsigned[start]
        bs = bq = ba = zero
        if block < full:  # a constant trip count: the loop LLVM vectorizes
            for j in range(BLOCK):
                i = start + j
                v = signed[i]
                w = unsigned[i]
                bmin = min(bmin, v)
                smax = max(smax, v)
                bumin = min(bumin, w)
                umax = max(umax, w)
                d = x[i] - shift
                bs += d
                bq += d * d
                ba += abs(x[i])
        else:  # the same body over the last, partial block (a variable trip count would not vectorize above)
            for i in range(start, n):
                v = signed[i]
                w = unsigned[i]
                bmin = min(bmin, v)
                smax = max(smax, v)
                bumin = min(bumin, w)
                umax = max(umax, w)
                d = x[i] - shift
                bs += d
                bq += d * d
                ba += abs(x[i])
        s += bs
        q += bq
        a += ba
        if bumin == 0 or bmin == negative_zero:
            for i in range(start, start + size):
                zeros += x[i] == 0
        smin = min(smin, bmin)
        umin = min(umin, bumin)
    return s, q, a, smin, smax, umin, umax, zeros


@numba.njit(
    [
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(float32[::1], float64)",
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(float64[::1], float64)",
    ],
    nogil=True,
    cache=True,
)
def moments_careful(x, shift):  # pragma: no cover - compiled
    """The same sums over the finite elements only, with min, max and the counts of finite
    values, NaNs and zeros: a plain loop for arrays that hold NaN or Inf."""
    s = q = a = 0.0
    lo, hi = np.inf, -np.inf
    count = nan = zeros = 0
    for i in range(x.size):
        y = np.float64(x[i])
        if y != y:
            nan += 1
        elif y != np.inf and y != -np.inf:
            count += 1
            d = y - shift
            s += d
            q += d * d
            a += abs(y)
            lo = min(lo, y)
            hi = max(hi, y)
            zeros += y == 0
    return s, q, a, lo, hi, count, nan, zeros


_DELTA_SIGNATURES = [
    f"Tuple((float64, float64, float64, float64, float64, int64))"
    f"({t}[::1], {t}[::1], float64[::1], int64[::1], float64[::1], int64[::1], int64[::1])"
    for t in ("float32", "float64")
]


@numba.njit(_DELTA_SIGNATURES, nogil=True, cache=True, fastmath=_SUMS, error_model="numpy")
def delta_sums(a, b, scratch, scratch_bits, limits, limit_bits, above):  # pragma: no cover - compiled
    """Over two same-length arrays, with d = b - a exact in float64: the sums of a², b², a·b,
    d², d, the bits of max |d| (NaN bits when a d is NaN), and into `above[k]` the count of
    |d| > limits[k] (ascending; `limit_bits` their bits, -1 for a negative limit).
    `scratch` (with `scratch_bits`, its bits as int64) holds BLOCK elements. |d| has no sign
    bit, so its bits order like its values as signed integers, NaN above every number."""
    n = a.size
    aa = bb = ab = dd = ds = 0.0
    top = 0
    for start in range(0, n, BLOCK):
        m = min(BLOCK, n - start)
        for j in range(m):
            x = np.float64(a[start + j])
            y = np.float64(b[start + j])
            d = y - x
            aa += x * x
            bb += y * y
            ab += x * y
            dd += d * d
            ds += d
            scratch[j] = abs(d)
        block_top = scratch_bits[0]
        for j in range(m):
            block_top = max(block_top, scratch_bits[j])
        top = max(top, block_top)
        for k in range(limits.size):
            if block_top <= limit_bits[k]:  # ascending: no |d| here passes this or a larger limit
                break
            limit = limits[k]
            count = 0
            for j in range(m):
                count += scratch[j] > limit
            above[k] += count
    return aa, bb, ab, dd, ds, top


_CHANGE_SIGNATURES = [
    f"Tuple((float64, float64, float64, float64, int64, int64))"
    f"({t}[::1], {t}[::1], float64[::1], int64[::1], float64[::1], int64[::1], int64[::1])"
    for t in ("float32", "float64")
]
_MAGNITUDE = 0x7FFFFFFFFFFFFFFF  # every bit of a float64 but the sign: the bits of |d|


@numba.njit(["int64(int64)"], inline="always", cache=True)
def order_key(bits):  # pragma: no cover - compiled
    """A float64's bits as an integer that orders like the float: negative floats (sign bit
    set) have their other bits flipped, so a larger magnitude is a smaller key."""
    return bits ^ ((bits >> 63) & _MAGNITUDE)


@numba.njit(inline="always", fastmath=_SUMS, error_model="numpy")
def _change_block(a, b, start, m, scratch, bits):  # pragma: no cover - compiled
    """One block of :func:`change_sums`: its sums, the extremes of the order keys of d and
    the smallest |d|'s bits (d left in `scratch` for the counts)."""
    s = q = ad = sa = 0.0
    for j in range(m):
        x = np.float64(a[start + j])
        d = np.float64(b[start + j]) - x
        s += d
        q += d * d
        ad += x * d
        sa += abs(d)
        scratch[j] = d
    bmin = bmax = order_key(bits[0])
    bottom = bits[0] & _MAGNITUDE
    for j in range(m):
        key = order_key(bits[j])
        bmin = min(bmin, key)
        bmax = max(bmax, key)
        bottom = min(bottom, bits[j] & _MAGNITUDE)
    return s, q, ad, sa, bmin, bmax, bottom


@numba.njit(_CHANGE_SIGNATURES, nogil=True, cache=True, fastmath=_SUMS, error_model="numpy")
def change_sums(a, b, scratch, bits, limits, limit_bits, above):  # pragma: no cover - compiled
    """Over two same-length non-empty arrays, with d = b - a exact in float64: the sums of
    d, d², a·d and |d|, the smallest and largest order key of d (:func:`order_key`: min d
    and max d exactly, NaN/Inf beyond the keys of ±Inf), and into `above[k]` the count of
    |d| > limits[k] (ascending, `limit_bits` their bits, -1 for a negative limit).
    `scratch` holds BLOCK elements, `bits` is it read as int64. A block whose smallest |d|
    passes a limit counts whole, one whose largest does not pass it stops the counting
    (in training most elements move by about the learning rate: most blocks cost no count)."""
    n = a.size
    s = q = ad = sa = 0.0
    kmin = kmax = np.int64(0)
    full = n // BLOCK
    for block in range(full + (n % BLOCK > 0)):
        start = block * BLOCK
        if block < full:  # a constant trip count once inlined: the loops LLVM vectorizes
            bs, bq, bad, bsa, bmin, bmax, bottom = _change_block(a, b, start, BLOCK, scratch, bits)
        else:
            bs, bq, bad, bsa, bmin, bmax, bottom = _change_block(a, b, start, n - start, scratch, bits)
        m = min(BLOCK, n - start)
        s, q, ad, sa = s + bs, q + bq, ad + bad, sa + bsa
        kmin, kmax = (bmin, bmax) if start == 0 else (min(kmin, bmin), max(kmax, bmax))
        top = max(bmax, ~bmin)  # the largest |d|'s bits: ~key of a negative d is its magnitude
        for k in range(limits.size):
            if top <= limit_bits[k]:  # ascending: no |d| here passes this or a larger limit
                break
            if bottom > limit_bits[k]:
                above[k] += m
                continue
            count = 0
            for j in range(m):
                count += (bits[j] & _MAGNITUDE) > limit_bits[k]
            above[k] += count
    return s, q, ad, sa, kmin, kmax
