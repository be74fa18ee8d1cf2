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
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

__all__ = [
    "BLOCK",
    "PAIR_BLOCK",
    "bin_counts",
    "moments_careful",
    "moments_fast",
    "pair_sums",
    "segment_moments",
    "stream_moments",
]

# Elements per block of the statistics: summed in the array's own float type, then in float64.
# Each vector lane's float32 partial sum adds BLOCK / lanes values, and the lanes depend on the
# CPU (4 where AVX2 is missing): 256 keeps the std within 1e-7 of float64 on every CPU (1024
# reached 1.1e-7 for bf16 without AVX2) at the same speed (the loop is bound by memory).
BLOCK = 1 << 8
PAIR_BLOCK = 1 << 10  # elements per block of the comparison (its sums are float64 throughout)
_SUMS = {"reassoc", "nsz", "contract", "arcp"}  # no "nnan"/"ninf": NaN and Inf propagate

AHEAD = 1 << 12  # elements between the block being summed and the block being prefetched
_LINE = 64  # bytes per cache line


@intrinsic
def _prefetch(typingctx, array, index):  # pragma: no cover - compiled
    """Asks the CPU to start loading the cache line of array[index] (llvm.prefetch: a hint, never
    a fault). The kernels' arithmetic per element is heavy enough that the hardware prefetcher
    alone leaves the core waiting on memory between blocks: measured +12-17% from 1 core."""

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        array_value = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array_value, [args[1]], wraparound=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        prefetch = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        # read, high locality, data cache
        builder.call(prefetch, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@intrinsic
def _float32_of_bf16(typingctx, bits):  # pragma: no cover - compiled
    """The float32 a bf16 bit pattern (uint16) stands for: its bits moved to the top half, exact."""

    def codegen(context, builder, signature, args):
        wide = builder.shl(builder.zext(args[0], ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _float32_of_fp16(typingctx, bits):  # pragma: no cover - compiled
    """The float32 an IEEE half bit pattern (int16) stands for (exact: every half is a float32)."""

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.int16), codegen


def _value(x, i):  # pragma: no cover - replaced when compiled
    """x[i] as a float: float32/float64 as they are, 16-bit patterns widened (see :func:`moments_fast`)."""


@overload(_value, inline="always")
def _value_of(x, i):  # pragma: no cover - compiled
    if x.dtype == types.uint16:
        return lambda x, i: _float32_of_bf16(x[i])
    if x.dtype == types.int16:
        return lambda x, i: _float32_of_fp16(x[i])
    return lambda x, i: x[i]


@numba.njit(inline="always")
def _prefetch_block(x, start):  # pragma: no cover - compiled
    """Prefetches the BLOCK elements AHEAD of `start`, when they exist."""
    ahead = start + AHEAD
    if ahead + BLOCK <= x.size:
        for i in range(ahead, ahead + BLOCK, _LINE // x.itemsize):
            _prefetch(x, i)


_MOMENTS_SIGNATURES = [
    "Tuple((float64, float64, float64, int32, int32, uint32, uint32, int64))"
    "(float32[::1], int32[::1], uint32[::1], float32, int32, float64[::1], int64, int64)",
    "Tuple((float64, float64, float64, int64, int64, uint64, uint64, int64))"
    "(float64[::1], int64[::1], uint64[::1], float64, int64, float64[::1], int64, int64)",
    # 16-bit patterns, widened to float32 inside the loop: bf16 as uint16, fp16 as int16
    "Tuple((float64, float64, float64, int16, int16, uint16, uint16, int64))"
    "(uint16[::1], int16[::1], uint16[::1], float32, int16, float64[::1], int64, int64)",
    "Tuple((float64, float64, float64, int16, int16, uint16, uint16, int64))"
    "(int16[::1], int16[::1], uint16[::1], float32, int16, float64[::1], int64, int64)",
]


@numba.njit(inline="always", fastmath=_SUMS, error_model="numpy")
def _moments_block(x, signed, unsigned, shift, start, m):  # pragma: no cover - compiled
    """One block of :func:`moments_fast`: its sums in the array's type and its four integer
    extremes (kept per block: a running extreme across blocks costs a horizontal reduction
    of the vector registers per block)."""
    smin = smax = signed[start]
    umin = umax = unsigned[start]
    zero = shift - shift
    s = q = a = zero
    for j in range(m):
        i = start + j
        v = signed[i]
        w = unsigned[i]
        smin = min(smin, v)
        smax = max(smax, v)
        umin = min(umin, w)
        umax = max(umax, w)
        y = _value(x, i)
        d = y - shift
        s += d
        q += d * d
        a += abs(y)
    return s, q, a, smin, smax, umin, umax


@numba.njit(_MOMENTS_SIGNATURES, nogil=True, cache=True, fastmath=_SUMS, error_model="numpy")
def moments_fast(x, signed, unsigned, shift, negative_zero, sample, first, stride):  # pragma: no cover - compiled
    """Over a non-empty array `x` (float32, float64, or the 16-bit patterns of bf16 as uint16
    or of fp16 as int16, widened to float32 element by element in the loop: one read of the
    2-byte values) and its bits as signed and unsigned integers: the sums of
    (x - shift), (x - shift)² and |x|, the four integer extremes of the bits, and the number
    of exact zeros (counted only in blocks that hold one). The elements at `first`,
    `first + stride`, ... are copied into `sample` (as float64) while their block is in cache.

    Each block of BLOCK elements is summed in the array's type (`shift` has it too), the
    block sums in float64: for float32 each partial sum adds BLOCK / lanes values (at most 64),
    ~1e-8 relative error, and the loop runs twice as fast as one in float64. A
    sum that overflows float32 comes back Inf, and the caller redoes the array in float64."""
    n = x.size
    s = q = a = 0.0
    smin = smax = signed[0]
    umin = umax = unsigned[0]
    zeros = picked = 0
    full = n // BLOCK
    for block in range(full + (n % BLOCK > 0)):
        start = block * BLOCK
        _prefetch_block(x, start)
        if block < full:  # a constant trip count once inlined: the loop LLVM vectorizes
            bs, bq, ba, bmin, bmax, bumin, bumax = _moments_block(x, signed, unsigned, shift, start, BLOCK)
        else:
            bs, bq, ba, bmin, bmax, bumin, bumax = _moments_block(x, signed, unsigned, shift, start, n - start)
        end = min(start + BLOCK, n)
        s += bs
        q += bq
        a += ba
        if bumin == 0 or bmin == negative_zero:
            for i in range(start, end):
                zeros += _value(x, i) == 0
        smin, smax = min(smin, bmin), max(smax, bmax)
        umin, umax = min(umin, bumin), max(umax, bumax)
        while first < end:
            sample[picked] = _value(x, first)
            picked += 1
            first += stride
    return s, q, a, smin, smax, umin, umax, zeros


@numba.njit(["void(float64[::1], float64[::1], int64[::1])"], nogil=True, cache=True)
def bin_counts(values, edges, counts):  # pragma: no cover - compiled
    """Adds finite `values` into `counts` over `edges` (len(counts) + 1 of them) as
    numpy.histogram bins them: bin k holds edges[k] <= v < edges[k + 1], the last bin
    closed, values outside go to the end bins. The index from the value's position is
    within one of the right bin (a product, not numpy's quotient: the edges decide)."""
    bins = counts.size
    first = edges[0]
    scale = bins / (edges[bins] - first)
    guess = np.empty(values.size, np.int64)
    for i in range(values.size):  # apart from the counting below, this loop vectorizes: 1.5x faster
        v = values[i]
        guess[i] = min(max(int((v - first) * scale), 0), bins - 1) if v - v == 0 else -1  # -1: NaN or ±Inf
    for i in range(values.size):
        k = guess[i]
        if k < 0:
            continue
        v = values[i]
        if k > 0 and v < edges[k]:
            k -= 1
        elif k < bins - 1 and v >= edges[k + 1]:
            k += 1
        counts[k] += 1


@numba.njit(["void(float64[::1], int64[::1], float64[:, ::1], int64[:, ::1])"], nogil=True, cache=True)
def segment_moments(x, starts, out, hist):  # pragma: no cover - compiled
    """For each segment i, x[starts[i]:starts[i + 1]]: out[i] = (finite count, NaN count,
    zeros, mean, M2, sum of |x|, min, max) of its finite values (two passes: the segment is
    in cache for the second) and hist[i] their histogram over [min, max] on numpy's edges."""
    bins = hist.shape[1]
    edges = np.empty(bins + 1)
    for i in range(starts.size - 1):
        count = nan = zeros = 0
        s = a = 0.0
        lo, hi = np.inf, -np.inf
        for j in range(starts[i], starts[i + 1]):
            v = x[j]
            if v != v:
                nan += 1
            elif v - v == 0:
                count += 1
                s += v
                a += abs(v)
                zeros += v == 0
                lo = min(lo, v)
                hi = max(hi, v)
        if count == 0:
            out[i, 0], out[i, 1] = 0, nan
            continue
        mean = s / count
        m2 = 0.0
        for j in range(starts[i], starts[i + 1]):
            if x[j] - x[j] == 0:
                m2 += (x[j] - mean) ** 2
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = count, nan, zeros, mean
        out[i, 4], out[i, 5], out[i, 6], out[i, 7] = m2, a, lo, hi
        left, right = (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)  # as histogram_edges
        step = (right - left) / bins
        for k in range(bins):
            edges[k] = k * step + left
        edges[bins] = right
        bin_counts(x[starts[i] : starts[i + 1]], edges, hist[i])


@numba.njit(
    [
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(float32[::1], float64)",
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(float64[::1], float64)",
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(uint16[::1], float64)",
        "Tuple((float64, float64, float64, float64, float64, int64, int64, int64))(int16[::1], float64)",
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
        y = np.float64(_value(x, i))
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


@intrinsic
def _pread(typingctx, fd, array, at, count, offset):  # pragma: no cover - compiled
    """libc's ``pread(fd, <byte `at` of array>, count, offset)``: the bytes read, 0 at the end
    of the file, -1 on an error. Called by name (the symbol is resolved when the machine code
    is linked, so the kernel stays cacheable, unlike a ctypes pointer baked into it)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        fd, array_value, at, count, offset = args
        data = context.make_array(signature.args[1])(context, builder, array_value).data
        byte_pointer = ir.IntType(8).as_pointer()
        i64 = ir.IntType(64)
        pointer = builder.gep(builder.bitcast(data, byte_pointer), [at])
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(i64, [ir.IntType(32), byte_pointer, i64, i64]), "pread"
        )
        return builder.call(function, [builder.trunc(fd, ir.IntType(32)), pointer, count, offset])

    return types.int64(types.int64, array, types.int64, types.int64, types.int64), codegen


_STREAM_SIGNATURES = [
    f"int64(int64, int64, int64, int64, {x}[::1], {i}[::1], {u}[::1], {f}, {i}, int64, uint64, float64,"
    f" float64[::1], int64, float64[::1], int64[::1], {i}[::1], {u}[::1])"
    for x, i, u, f in (
        ("float32", "int32", "uint32", "float32"),
        ("float64", "int64", "uint64", "float64"),
        ("uint16", "int16", "uint16", "float32"),  # bf16 bit patterns
        ("int16", "int16", "uint16", "float32"),  # fp16 bit patterns
    )
]


@numba.njit(_STREAM_SIGNATURES, nogil=True, cache=True)
def stream_moments(
    fd,
    base,
    start,
    end,
    x,
    signed,
    unsigned,
    shift,
    negative_zero,
    positive_limit,
    negative_limit,
    shift64,
    sample,
    stride,
    sums,
    counts,
    signed_ext,
    unsigned_ext,
):  # pragma: no cover - compiled
    """Elements start..end-1 of a tensor whose first byte is at `base` in the file `fd`, read
    with pread x.size at a time into `x` (`signed`, `unsigned`: the same memory as integers)
    and reduced while in cache, so a thread's whole share is one call: a block by
    :func:`moments_fast`, or by :func:`moments_careful` when it holds NaN/Inf (its bits reach
    the limits: `positive_limit` as signed, `negative_limit` as unsigned) or its float32 sums
    overflow. Adds into the running state, so a call can resume where one stopped: `sums`
    (s, sq, abs_sum around `shift`, and min/max of the careful blocks), `counts` (finite
    count, NaN, zeros), the integer extremes of the fast blocks (`signed_ext`: min, max;
    `unsigned_ext`: min, max). Elements at multiples of `stride` go into `sample` at their
    index / stride. Returns `end`, or the element a read stopped at (the file ended early or
    the read failed: the caller finds out why)."""
    size = x.itemsize
    a = start
    while a < end:
        b = min(a + x.size, end)
        want = (b - a) * size
        got = 0
        while got < want:
            r = _pread(fd, x, got, want - got, base + a * size + got)
            if r <= 0:
                return a
            got += r
        m = b - a
        first = (stride - a % stride) % stride
        at = (a + stride - 1) // stride
        s, q, ab, smin, smax, umin, umax, zeros = moments_fast(
            x[:m], signed[:m], unsigned[:m], shift, negative_zero, sample[at:], first, stride
        )
        if smax < positive_limit and umax < negative_limit and np.isfinite(q) and np.isfinite(ab):
            sums[0] += s
            sums[1] += q
            sums[2] += ab
            counts[0] += m
            counts[2] += zeros
            signed_ext[0] = min(signed_ext[0], smin)
            signed_ext[1] = max(signed_ext[1], smax)
            unsigned_ext[0] = min(unsigned_ext[0], umin)
            unsigned_ext[1] = max(unsigned_ext[1], umax)
        else:
            s, q, ab, lo, hi, count, nan, zeros = moments_careful(x[:m], shift64)
            sums[0] += s
            sums[1] += q
            sums[2] += ab
            sums[3] = min(sums[3], lo)
            sums[4] = max(sums[4], hi)
            counts[0] += count
            counts[1] += nan
            counts[2] += zeros
        a = b
    return end


_MAGNITUDE = 0x7FFFFFFFFFFFFFFF  # every bit of a float64 but the sign: the bits of |d|


@numba.njit(["int64(int64)"], inline="always", cache=True)
def order_key(bits):  # pragma: no cover - compiled
    """A float64's bits as an integer that orders like the float: negative floats (sign bit
    set) have their other bits flipped, so a larger magnitude is a smaller key."""
    return bits ^ ((bits >> 63) & _MAGNITUDE)


_PAIR_SIGNATURES = [
    f"Tuple((float64, float64, float64, float64, int64, int64))"
    f"({t}[::1], {t}[::1], float64[::1], int64[::1], float64[::1], int64[::1], int64[::1], {norms})"
    for t in ("float32", "float64")
    for norms in ("float64[::1]", "none")
]
_INF_BITS = 0x7FF0000000000000  # the bits of +Inf: a |d| with larger bits is NaN


@numba.njit(inline="always", fastmath=_SUMS, error_model="numpy")
def _pair_block(a, b, start, m, scratch, bits, norms):  # pragma: no cover - compiled
    """One block of :func:`pair_sums`: its sums, the extremes of the order keys of d and
    the smallest |d|'s bits (d left in `scratch` for the counts)."""
    aa = bb = ad = q = s = sa = 0.0
    for j in range(m):
        x = np.float64(a[start + j])
        y = np.float64(b[start + j])
        d = y - x
        if norms is not None:  # decided when compiling: the variant without them skips the work
            aa += x * x
            bb += y * y
        ad += x * d
        q += d * d
        s += d
        sa += abs(d)
        scratch[j] = d
    bmin = bmax = order_key(bits[0])
    bottom = bits[0] & _MAGNITUDE
    for j in range(m):
        key = order_key(bits[j])
        bmin = min(bmin, key)
        bmax = max(bmax, key)
        bottom = min(bottom, bits[j] & _MAGNITUDE)
    return aa, bb, ad, q, s, sa, bmin, bmax, bottom


@numba.njit(_PAIR_SIGNATURES, nogil=True, cache=True, fastmath=_SUMS, error_model="numpy")
def pair_sums(a, b, scratch, bits, limits, limit_bits, above, norms):  # pragma: no cover - compiled
    """Over two same-length non-empty arrays, with d = b - a exact in float64: the sums of
    a·d, d², d and |d|, the smallest and largest order key of d (:func:`order_key`: min d
    and max d exactly, NaN beyond the keys of ±Inf), added into `norms` the sums of a² and
    b² (None: not computed, a variant compiled without them), and into `above[k]` the count
    of |d| > limits[k], NaN never counted (ascending, `limit_bits` their bits, -1 for a
    negative limit). `scratch` holds PAIR_BLOCK elements, `bits` is it read as int64. A block
    whose smallest |d| passes a limit counts whole, one whose largest does not pass it
    stops the counting (in training most elements move by about the learning rate, in a
    comparison most tensors are the same or all changed: most blocks cost no count)."""
    n = a.size
    aa = bb = ad = q = s = sa = 0.0
    kmin = kmax = np.int64(0)
    full = n // PAIR_BLOCK
    for block in range(full + (n % PAIR_BLOCK > 0)):
        start = block * PAIR_BLOCK
        if block < full:  # a constant trip count once inlined: the loops LLVM vectorizes
            baa, bbb, bad, bq, bs, bsa, bmin, bmax, bottom = _pair_block(a, b, start, PAIR_BLOCK, scratch, bits, norms)
        else:
            baa, bbb, bad, bq, bs, bsa, bmin, bmax, bottom = _pair_block(a, b, start, n - start, scratch, bits, norms)
        m = min(PAIR_BLOCK, n - start)
        aa, bb, ad, q, s, sa = aa + baa, bb + bbb, ad + bad, q + bq, s + bs, sa + bsa
        kmin, kmax = (bmin, bmax) if start == 0 else (min(kmin, bmin), max(kmax, bmax))
        top = max(bmax, ~bmin)  # the largest |d|'s bits: ~key of a negative d is its magnitude
        nan = top > _INF_BITS
        for k in range(limits.size):
            if top <= limit_bits[k]:  # ascending: no |d| here passes this or a larger limit
                break
            if bottom > limit_bits[k] and not nan:
                above[k] += m
                continue
            count = 0
            if nan:
                for j in range(m):
                    magnitude = bits[j] & _MAGNITUDE
                    count += (magnitude > limit_bits[k]) & (magnitude <= _INF_BITS)
            else:
                for j in range(m):
                    count += (bits[j] & _MAGNITUDE) > limit_bits[k]
            above[k] += count
    if norms is not None:
        norms[0] += aa
        norms[1] += bb
    return ad, q, s, sa, kmin, kmax
