"""One pass over memory for the statistics and the comparison, when it pays off.

The fused kernels (:mod:`.kernels`, numba) compute every sum, the min/max, the zero count
and NaN/Inf detection in a single read of each block; the torch path they replace reads
each cached chunk seven times. numba is chosen because it installs from wheels (no
compiler on the user's machine), keeps its machine code on disk between sessions, and
releases the GIL so a tensor's halves run on two threads.

Loading numba and its cached kernels costs about half a second per process (measured
0.25 s + 0.30 s on this machine when idle, ~2 s under heavy load; the first compile takes
~10 s, once per machine), while the fused path saves about 0.1 s per GB over the torch path
(more under load, where torch's threads stall). So :func:`warm_up` loads them on a
background thread when nbinspect is first used in a session, and once they are loaded they
serve anything from ``LOADED_ABOVE`` bytes; a call that finds them not loaded yet loads
them itself only for work of at least ``FUSED_ABOVE`` bytes, and otherwise takes the torch
path. float32/float64 arrays go through the kernels as they are, fp16/bf16 ones as their
bit patterns, widened to float32 inside the kernel's loop (exact, one read of 2 bytes an
element), other dtypes are upcast chunk by chunk into a reused buffer by torch first.
A large tensor of a safetensors file is not loaded: the kernel reads it itself with
each thread reducing its share through a guarded read-only mapping of the file, a window
at a time (``io/mapping.py``; ``MAPPED``), or where mappings are not guarded with ``pread``,
a piece at a time into a buffer per thread (:func:`stream_sums`).
Without numba the torch path is kept.
Both paths give the same counts, min, max and histogram; the moments agree to ~1e-8.
"""

from __future__ import annotations

import contextlib
import math
import os
import struct
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
import torch

from ..backends import numba_unwelcome
from ..errors import CheckpointError
from .scratch import Scratch

__all__ = [
    "FUSED_ABOVE",
    "KERNEL_VIEWS",
    "LOADED_ABOVE",
    "PART",
    "MomentSums",
    "PairSums",
    "kernel_array",
    "kernels",
    "moment_sums",
    "pair_sums",
    "sample_share",
    "stream_sums",
    "threads",
    "using_threads",
    "warm_up",
]

FUSED_ABOVE = 2 << 30  # bytes of work from which loading the kernels pays off in one call
LOADED_ABOVE = 64 << 20  # bytes of work from which kernels already loaded are used
PART = 1 << 19  # elements per thread's share of one tensor, at least (a hand-off costs ~30 µs)
_CHUNK = 1 << 20  # elements upcast at a time for dtypes the kernels do not read directly

Sliced = TypeVar("Sliced", np.ndarray, torch.Tensor)

_loaded: dict[str, ModuleType | None] = {}
_lock = threading.Lock()  # the thread pool's creation
_loading = threading.Lock()  # held by whoever imports the kernels: the warm-up thread, or a call that needs them
_pool: ThreadPoolExecutor | None = None
_warm_up: threading.Thread | None = None


def kernels(nbytes: int, recurring: bool = False) -> ModuleType | None:
    """The kernels module for `nbytes` of work, or None: too little work to pay for loading
    them (see the module docstring), or numba is not installed or fails to load. Kernels
    already loaded (by :func:`warm_up` or an earlier call) serve any work from
    ``LOADED_ABOVE`` bytes; otherwise a call loads them itself (waiting for a warm-up in
    flight) only for ``FUSED_ABOVE`` bytes, or ``LOADED_ABOVE`` when the work `recurring`ly
    comes back in this process (a tracker measuring every N steps pays for the load once)."""
    if nbytes < LOADED_ABOVE:
        return None
    if "kernels" not in _loaded and nbytes >= (LOADED_ABOVE if recurring else FUSED_ABOVE):
        _load()
    return _loaded.get("kernels")


def _load() -> None:
    with _loading:
        if "kernels" not in _loaded:
            try:
                from . import kernels as module

                _loaded["kernels"] = module
            except Exception:  # no numba, or one built for another numpy: keep the torch path
                _loaded["kernels"] = None


def warm_up() -> None:
    """Start loading the kernels on a background thread, once per process (nbinspect calls
    this when it is first used in a session: a public name's first access, ``%load_ext``),
    so that the first statistics or comparison of any size finds them loaded instead of
    paying ~0.6 s for them or taking the slower torch path. The thread imports numba and the
    cached machine code (compiles it once per machine); ``NBINSPECT_WARM_UP=0`` turns it off.
    A fork waits for the load to finish (a child must not inherit a half-done import).
    Not where an installed framework breaks once numba is loaded (``numba_unwelcome``)."""
    global _warm_up
    with _lock:
        if _warm_up is not None or "kernels" in _loaded or os.environ.get("NBINSPECT_WARM_UP") == "0":
            return
        if numba_unwelcome():
            return
        _warm_up = threading.Thread(target=_load, name="nbinspect-warm-up", daemon=True)
        _warm_up.start()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_warm_up.join)


_own_thread = threading.local()  # this thread's thread count, when set by using_threads


@contextlib.contextmanager
def using_threads(n: int | None) -> Iterator[None]:
    """Within it, this thread's kernels use `n` threads (None: as outside it). 1 on the
    threads of parallel.py, each of which reduces its tensors alone (no hand-offs, one
    thread's Python between tensors overlapping another's kernel); N under
    ``stats(workers=N)``, which also sizes that pool."""
    before = getattr(_own_thread, "threads", None)
    _own_thread.threads = before if n is None else n
    try:
        yield
    finally:
        _own_thread.threads = before


def threads() -> int:
    """How many threads this thread's kernels may use: torch's thread count, at most one per
    core, unless :func:`using_threads` says otherwise."""
    own = getattr(_own_thread, "threads", None)
    if own is not None:
        return own
    return max(1, min(torch.get_num_threads(), os.cpu_count() or 1))


def _threads(n: int) -> int:
    if n < 2 * PART:  # one share
        return 1
    return max(1, min(threads(), n // PART))


def _the_pool() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="nbinspect")
    return _pool


def _run(fn: Callable[..., Any], parts: list[tuple]) -> list[Any]:
    """fn(*part) for every part, on threads when there is more than one (the kernels release
    the GIL)."""
    if len(parts) == 1:
        return [fn(*parts[0])]
    return list(_the_pool().map(lambda p: fn(*p), parts))


def _splits(n: int, parts: int) -> list[tuple[int, int]]:
    step = -(-n // parts)
    step += -step % 16  # whole cache lines per part
    return [(i, min(i + step, n)) for i in range(0, n, step)]


# ---------------------------------------------------------------- statistics


class MomentSums:
    """Sums around a common shift, over everything seen so far: parts simply add up."""

    __slots__ = ("abs_sum", "count", "hi", "lo", "n", "nan", "s", "shift", "sq", "zeros")

    def __init__(self, shift: float):
        self.shift = shift
        self.n = self.count = self.nan = self.zeros = 0
        self.s = self.sq = self.abs_sum = 0.0
        self.lo, self.hi = math.inf, -math.inf

    def add(self, n: int, count: int, nan: int, zeros: int, s: float, sq: float, a: float, lo: float, hi: float):
        self.n += n
        self.count += count
        self.nan += nan
        self.zeros += zeros
        self.s += s
        self.sq += sq
        self.abs_sum += a
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)

    def mean_m2(self) -> tuple[float, float]:
        """(mean, M2) of the finite elements (count > 0)."""
        mean = self.s / self.count
        return self.shift + mean, max(self.sq - self.s * mean, 0.0)


def decode_extremes(smin: int, smax: int, umin: int, umax: int, float_dtype: np.dtype) -> tuple[float, float]:
    """Float min and max from the integer extremes of finite floats' bits. Positive floats
    order like their bits; negative ones (sign bit set) in reverse, and above every positive
    as unsigned integers. So: max is the largest signed bits if any is >= 0, else the
    smallest unsigned (the negative nearest zero); min is the largest unsigned bits if any
    is negative, else the smallest signed."""
    signed = np.dtype(f"i{float_dtype.itemsize}")
    unsigned = np.dtype(f"u{float_dtype.itemsize}")
    hi = np.array(smax, signed).view(float_dtype) if smax >= 0 else np.array(umin, unsigned).view(float_dtype)
    lo = np.array(umax, unsigned).view(float_dtype) if smin < 0 else np.array(smin, signed).view(float_dtype)
    return float(lo), float(hi)


def _limits(float_dtype: np.dtype) -> tuple[int, int]:
    """Bits from which a float is Inf or NaN: as signed (positive ones) and unsigned (negative)."""
    if float_dtype == np.float16:
        return 0x7C00, 0xFC00
    if float_dtype == np.float32:
        return 0x7F800000, 0xFF800000
    return 0x7FF0000000000000, 0xFFF0000000000000


def _array_sums(k: ModuleType, x: np.ndarray, shift: float, sample: np.ndarray, first: int, stride: int) -> tuple:
    """(n, count, nan, zeros, s, sq, abs_sum, lo, hi) of a contiguous array the kernels read
    (:func:`kernel_array`: float32, float64, or bf16/fp16 bit patterns, widened in the loop);
    its elements at `first`, `first + stride`, ... go into `sample`."""
    signed = x.view(f"i{x.itemsize}")
    unsigned = x.view(f"u{x.itemsize}")
    negative_zero = signed.dtype.type(np.iinfo(signed.dtype).min)
    typed_shift = np.float32(shift) if x.itemsize == 2 else x.dtype.type(shift)
    s, sq, a, smin, smax, umin, umax, zeros = k.moments_fast(
        x, signed, unsigned, typed_shift, negative_zero, sample, first, stride
    )
    float_dtype: np.dtype = _F16 if x.dtype == np.int16 else x.dtype
    if x.dtype == np.uint16:  # bf16: its bits are the top half of the float32 it stands for
        smin, smax, umin, umax, float_dtype = int(smin) << 16, int(smax) << 16, int(umin) << 16, int(umax) << 16, _F32
    positive_limit, negative_limit = _limits(float_dtype)
    if smax < positive_limit and umax < negative_limit and math.isfinite(sq) and math.isfinite(a):
        lo, hi = decode_extremes(smin, smax, umin, umax, float_dtype)
        return x.size, x.size, 0, zeros, s, sq, a, lo, hi
    s, sq, a, lo, hi, count, nan, zeros = k.moments_careful(x, shift)
    return x.size, count, nan, zeros, s, sq, a, lo, hi


_F16: np.dtype = np.dtype(np.float16)
_F32: np.dtype = np.dtype(np.float32)
# What the moment kernels read each dtype as: bf16 and fp16 as their bit patterns (widened in the loop).
KERNEL_VIEWS: dict[torch.dtype, np.dtype] = {
    torch.float32: _F32,
    torch.float64: np.dtype(np.float64),
    torch.bfloat16: np.dtype(np.uint16),
    torch.float16: np.dtype(np.int16),
}


def kernel_array(t: torch.Tensor) -> np.ndarray | None:
    """A contiguous CPU tensor as the array the moment kernels read without a copy
    (``KERNEL_VIEWS``: float32 and float64 as they are, bf16 and fp16 as bit patterns the
    kernel widens to float32 as it reads, exactly); None for other dtypes."""
    view = KERNEL_VIEWS.get(t.dtype)
    if view is None:
        return None
    return t.numpy() if t.itemsize != 2 else t.view(torch.int16).numpy().view(view)


def sample_share(start: int, end: int, sample: Sliced, stride: int) -> tuple[Sliced, int]:
    """For elements start..end-1 of a tensor: the slice of `sample` (an array or a tensor)
    that receives its elements at multiples of `stride`, and the offset of the first of them
    from `start`."""
    first = -start % stride
    at = -(-start // stride)
    return sample[at : at + max(0, -(-(end - start - first) // stride))], first


def moment_sums(
    k: ModuleType,
    flat: torch.Tensor,
    shift: float,
    buffer: Callable[[torch.dtype], torch.Tensor],
    sample: np.ndarray,
    stride: int,
) -> MomentSums:
    """MomentSums of a 1-D tensor in one read, the elements at multiples of `stride` copied
    into `sample` (float64) on the way: float32/float64/fp16/bf16 on the CPU as they are
    (:func:`kernel_array`), split across threads; other dtypes chunk by chunk through
    `buffer(dtype)` (float32 for floating dtypes, float64 for integers and bool, exact
    either way)."""
    in_memory = flat.device.type == "cpu" and flat.is_contiguous()
    direct = kernel_array(flat) if in_memory else None
    work = flat.dtype if flat.dtype == torch.float64 else torch.float32 if flat.is_floating_point() else torch.float64
    # The float32 kernel subtracts a float32 shift: keep the rounded value for the mean.
    total = MomentSums(float(np.float32(shift)) if work == torch.float32 else shift)
    shift = total.shift
    if direct is not None:
        parts = [
            (k, direct[i:j], *sample_share(i, j, sample, stride))
            for i, j in _splits(direct.size, _threads(direct.size))
        ]
        for part in _run(lambda k, x, out, first: _array_sums(k, x, shift, out, first, stride), parts):
            total.add(*part)
        return total
    buf = buffer(work)
    for start in range(0, flat.numel(), _CHUNK):
        piece = flat[start : start + _CHUNK]
        x = buf[: piece.numel()].copy_(piece).numpy()
        out, first = sample_share(start, start + x.size, sample, stride)
        total.add(*_array_sums(k, x, shift, out, first, stride))
    return total


# Read through guarded mappings (io.mapping, Linux) instead of pread: no copy out of the page
# cache. Measured against pread in docs/measurements.md ("Checkpoint folders: mapping or
# pread"); tests run both reads.
MAPPED = True
# bytes mapped at a time by each thread: bounds resident memory (16 MiB to 1 GiB ran alike)
WINDOW_BYTES = 64 << 20
STREAM_BYTES = 1 << 20  # bytes read at a time by each thread of a streamed tensor: they stay in its core's cache
_stream_buffer = threading.local()  # each thread's STREAM_BYTES, reused from tensor to tensor and call to call


class FileSpan(Protocol):
    """Values in a file that a kernel reads itself (``io.safetensors_file.FileTensor``)."""

    def span(self, nbytes: int) -> tuple[int, int]: ...  # (fd, offset of the first byte) of `nbytes`: checked
    def read_into(self, start: int, buffer: np.ndarray) -> None: ...  # a checked read: raises why one failed
    def verify(self) -> None: ...  # raises if the file changed since it was opened
    def window(self) -> Any: ...  # an io.mapping.Window on the file, or None: pread then
    @property
    def where(self) -> str: ...  # the file, as errors name it


def _thread_buffer() -> np.ndarray:
    raw = getattr(_stream_buffer, "raw", None)
    if raw is None or raw.nbytes != STREAM_BYTES:
        raw = _stream_buffer.raw = np.empty(STREAM_BYTES, np.uint8)
    return raw


def stream_sums(
    k: ModuleType, values: FileSpan, n: int, dtype: torch.dtype, shift: float, sample: np.ndarray, stride: int
) -> MomentSums:
    """MomentSums of the `n` elements of `dtype` (a key of ``KERNEL_VIEWS``) that `values`
    holds in a file. With ``MAPPED`` each thread reduces its share in place through a guarded
    read-only mapping (``values.window()``, ``WINDOW_BYTES`` mapped at a time: no copy out of
    the page cache; a bus error there is covered and raises the one-line error when the
    window is unmapped). Otherwise, or where mappings are not guarded (not Linux, every slot
    taken, elements not aligned in the file), each share is one call of
    ``kernels.stream_moments``, which reads it ``STREAM_BYTES`` at a time with ``pread`` into
    the thread's own buffer and reduces each piece while it is in cache (no Python between
    pieces: a Python call per MiB cost ~60 µs); a read that stops early is repeated by
    ``values.read_into``, which raises the one-line error that says why. The elements at
    multiples of `stride` go into `sample`."""
    view = KERNEL_VIEWS[dtype]
    total = MomentSums(shift if dtype == torch.float64 else float(np.float32(shift)))
    shift = total.shift
    size = view.itemsize
    signed, unsigned = np.dtype(f"i{size}"), np.dtype(f"u{size}")
    typed_shift = np.float32(shift) if size == 2 else view.type(shift)
    float_dtype: np.dtype = _F16 if view == np.int16 else _F32 if view == np.uint16 else view
    positive_limit, negative_limit = _limits(float_dtype)
    if view == np.uint16:  # bf16: the top half of float32's limits
        positive_limit, negative_limit = positive_limit >> 16, negative_limit >> 16
    negative_zero = signed.type(np.iinfo(signed).min)
    negative_limit = np.uint64(negative_limit)
    fd, base = values.span(n * size)

    def mapped(i: int, j: int) -> tuple[list[tuple], int]:
        """The sums of the share read through a guarded mapping, WINDOW_BYTES mapped at a time
        (resident memory stays bounded; a fault raises when its window is unmapped), and the
        element it got to: where a mapping is refused, the rest is read with pread."""
        if not MAPPED or base % size:  # the kernels read aligned elements only
            return [], i
        window = values.window()
        if window is None:
            return [], i
        # whole blocks of the kernel a window: the same float32 block sums as the array in memory
        parts: list[tuple] = []
        step = max(1, WINDOW_BYTES // size // k.BLOCK) * k.BLOCK
        try:
            for a in range(i, j, step):
                b = min(a + step, j)
                raw = window.map(base + a * size, (b - a) * size)
                if raw is None:
                    window.unmap()  # raises if the window before it faulted
                    return parts, a
                out, first = sample_share(a, b, sample, stride)
                parts.append(_array_sums(k, raw.view(view), shift, out, first, stride))
        finally:
            window.close()
        return parts, j

    def share(i: int, j: int) -> list[tuple]:
        parts, i = mapped(i, j)
        if i == j:
            return parts
        raw = _thread_buffer()
        x = raw[: raw.nbytes // size * size].view(view)
        sums = np.array([0.0, 0.0, 0.0, math.inf, -math.inf])
        counts = np.zeros(3, np.int64)
        signed_ext = np.array([np.iinfo(signed).max, np.iinfo(signed).min], signed)
        unsigned_ext = np.array([np.iinfo(unsigned).max, 0], unsigned)
        bits = x.view(signed), x.view(unsigned), typed_shift, negative_zero, positive_limit, negative_limit, shift
        a, stopped = i, -1
        while a < j:
            a = k.stream_moments(fd, base, a, j, x, *bits, sample, stride, sums, counts, signed_ext, unsigned_ext)
            if a < j:  # a read stopped: the checked read raises why (or it was interrupted: go on)
                values.read_into(a * size, raw[: min(x.size, j - a) * size])
                if a == stopped:
                    raise CheckpointError(f"{values.where}: cannot read byte {a * size:,} of a tensor")
                stopped = a
        lo, hi = sums[3], sums[4]
        if signed_ext[0] <= signed_ext[1]:  # some pieces were read by the fast kernel
            up = 16 if view == np.uint16 else 0
            smin, smax, umin, umax = (int(e) << up for e in (*signed_ext, *unsigned_ext))
            fast_lo, fast_hi = decode_extremes(smin, smax, umin, umax, float_dtype)
            lo, hi = min(lo, fast_lo), max(hi, fast_hi)
        s, sq, abs_sum = sums[:3]
        return [*parts, (j - i, int(counts[0]), int(counts[1]), int(counts[2]), s, sq, abs_sum, lo, hi)]

    for parts in _run(share, _splits(n, _threads(n))) if n else []:
        for part in parts:
            total.add(*part)
    values.verify()  # pieces read in full from a file that was then rewritten in place
    return total


_SHORT = (torch.float16, torch.bfloat16)  # widened to float32 by numpy (the comparison), exactly


def _raw(t: torch.Tensor) -> np.ndarray:
    """A CPU tensor's memory as numpy: fp16/bf16 as their 16-bit patterns (numpy has no bf16)."""
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype in _SHORT else t.numpy()


def _widen(raw: np.ndarray, dtype: torch.dtype, out: np.ndarray) -> np.ndarray:
    """`raw` (from :func:`_raw`) as float32 in `out`, exactly: fp16 by numpy's cast, bf16 by
    moving its bits to the top of a float32 (a bf16 is the top half of one)."""
    if dtype == torch.bfloat16:
        wide = out.view(np.uint32)
        np.copyto(wide, raw)
        wide <<= 16
    else:
        np.copyto(out, raw.view(np.float16) if dtype == torch.float16 else raw)
    return out


# ---------------------------------------------------------------- comparison and change


class PairSums(NamedTuple):
    """What :func:`pair_sums` measured of a pair a, b and of d = b - a (exact in float64)."""

    n: int
    aa: float  # sum of a² (0.0 unless the norms were asked for)
    bb: float  # sum of b² (0.0 unless the norms were asked for)
    ad: float  # sum of a·d
    dd: float  # sum of d²
    d: float  # sum of d
    abs_sum: float  # sum of |d|
    lo: float  # min d (+inf for no elements); NaN in lo or hi when a d is NaN
    hi: float  # max d (-inf for no elements)
    above: list[int]  # count of |d| > t for each threshold (NaN never counted)

    @property
    def finite(self) -> bool:
        """No d is NaN or ±Inf (and there are elements)."""
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    @property
    def max_abs(self) -> float:
        """max |d|: NaN when a d is NaN, 0.0 for no elements."""
        return math.nan if math.isnan(self.lo) or math.isnan(self.hi) else max(-self.lo, self.hi, 0.0)


def pair_sums(
    k: ModuleType,
    pairs: list[tuple[torch.Tensor, torch.Tensor]],
    thresholds: tuple[float, ...],
    scratch: Scratch,
    norms: bool = True,
) -> list[PairSums]:
    """PairSums of each pair of 1-D tensors of one length (thresholds ascending), in one read
    of each tensor: float32/float64 pairs as they are, fp16/bf16 (beside each other or
    float32) widened to float32 by numpy, each pair split into threads' shares and all
    shares spread over the threads (large tensors split, small ones side by side); other
    dtypes and devices are upcast by torch chunk by chunk into `scratch`, on this thread.
    `norms=False` leaves the sums of a² and b² out (a kernel compiled without them)."""
    limits = np.array(thresholds, np.float64)
    limit_bits = np.where(limits < 0, -1, np.abs(limits).view(np.int64))

    def part(x: np.ndarray, y: np.ndarray) -> tuple:
        scratch = np.empty(k.PAIR_BLOCK, np.float64)
        above = np.zeros(len(limits), np.int64)
        wanted = np.zeros(2) if norms else None
        ad, dd, d, abs_sum, kmin, kmax = k.pair_sums(
            x, y, scratch, scratch.view(np.int64), limits, limit_bits, above, wanted
        )
        aa, bb = (0.0, 0.0) if wanted is None else wanted
        return aa, bb, ad, dd, d, abs_sum, kmin, kmax, above

    def share(index: int, x: np.ndarray, x_dtype, y: np.ndarray, y_dtype, start: int, end: int) -> list[tuple]:
        if x_dtype is None:  # float32/float64 as they are
            return [(index, *part(x[start:end], y[start:end]))]
        wide = np.empty((2, min(_CHUNK, end - start)), np.float32)
        parts = []
        for i in range(start, end, _CHUNK):
            j = min(i + _CHUNK, end)
            parts.append(
                (index, *part(_widen(x[i:j], x_dtype, wide[0, : j - i]), _widen(y[i:j], y_dtype, wide[1, : j - i])))
            )
        return parts

    shares, parts = [], []
    for index, (a, b) in enumerate(pairs):
        n = a.numel()
        if n == 0:
            continue
        if a.dtype == b.dtype in (torch.float32, torch.float64) and _in_memory(a) and _in_memory(b):
            sides: tuple = (a.numpy(), None, b.numpy(), None)
        elif _narrow(a) and _narrow(b):
            sides = (_raw(a), a.dtype, _raw(b), b.dtype)
        else:
            wide = torch.float64 in (a.dtype, b.dtype) or not (a.is_floating_point() and b.is_floating_point())
            buf_a, buf_b = scratch.chunks(torch.float64 if wide else torch.float32, "a", "b")
            for start in range(0, n, scratch.chunk):
                m = min(scratch.chunk, n - start)
                x = buf_a[:m].copy_(a[start : start + m]).numpy()
                y = buf_b[:m].copy_(b[start : start + m]).numpy()
                parts.append((index, *part(x, y)))
            continue
        shares += [(index, *sides, i, j) for i, j in _splits(n, _threads(n))]
    for done in _run(share, shares) if shares else []:
        parts += done
    return _totals(pairs, parts, len(limits))


def _in_memory(t: torch.Tensor) -> bool:
    return t.device.type == "cpu" and t.is_contiguous()


def _narrow(t: torch.Tensor) -> bool:
    return t.dtype in (*_SHORT, torch.float32) and _in_memory(t)


def _totals(pairs: list, parts: list[tuple], k: int) -> list[PairSums]:
    """The parts of each pair added up (keys of d merged by min and max)."""
    merged: list[list | None] = [None] * len(pairs)
    for index, *values in parts:
        t = merged[index]
        if t is None:
            merged[index] = values
        else:
            t[:6] = [x + y for x, y in zip(t, values[:6])]
            t[6], t[7], t[8] = min(t[6], values[6]), max(t[7], values[7]), t[8] + values[8]
    out = []
    for (a, _), t in zip(pairs, merged):
        if t is None:  # no elements
            out.append(PairSums(a.numel(), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, math.inf, -math.inf, [0] * k))
        else:
            aa, bb, ad, dd, d, abs_sum, kmin, kmax, above = t
            lo, hi = _from_key(kmin), _from_key(kmax)
            out.append(PairSums(a.numel(), aa, bb, ad, dd, d, abs_sum, lo, hi, above.tolist()))
    return out


def _from_key(key: int) -> float:
    """The float64 of a kernel's order key (the key flips a negative float's non-sign bits)."""
    return _FLOAT64.unpack(_INT64.pack(key ^ 0x7FFFFFFFFFFFFFFF if key < 0 else key))[0]


_INT64, _FLOAT64 = struct.Struct("<q"), struct.Struct("<d")
