"""The value view (issue 28): a tensor region reduced to the screen's resolution in one pass,
and the colours of the picture.

Bands of the region (``Backend.plane_bands``: numpy rows, never the whole region at once)
go into a :class:`ValueGrid`: per block of ``bh × bw`` values, the sum and count of its
finite values, its largest finite |x| and its exact NaN/+Inf/-Inf counts. Sums come from
one read (the fused numba kernel for large regions, numpy ``reduceat`` otherwise); only a
block whose sum is not finite is read again and counted exactly, so a single NaN among
200 million values lights its block and is never averaged away. Grids of parts of a
region (bands, shards on other ranks) merge by adding sums and counts.

:func:`paint` decides every colour: one ``uint8`` palette index per block (0..250 a
diverging blue-white-red scale centred at 0, then NaN, +Inf, -Inf, exact zero, no data)
and flag bits; the front-end only blits them and Python can write the same picture as a PNG.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from .fused import LOADED_ABOVE, _run

__all__ = [
    "FLAGS",
    "PALETTE",
    "SPECIAL",
    "Grid",
    "Painted",
    "ValueGrid",
    "band_rows",
    "block_plan",
    "paint",
    "reduce_bands",
]

BAND_ELEMENTS = 1 << 22  # values per band: one band (16 MB of float32) is the largest read at once
SCALE_STEPS = 251  # palette indices 0..250: the diverging scale, 125 is 0
SPECIAL = {"nan": 251, "posinf": 252, "neginf": 253, "zero": 254, "empty": 255}
FLAGS = {"nan": 1, "posinf": 2, "neginf": 4, "outlier": 8, "zero": 16, "partial": 32}
OUTLIER_SIGMA = 6.0  # |x| > k * std marks a block as holding an outlier
LIMIT_PERCENTILE = 99.5  # colour limit: this percentile of |block value| (one extreme block does not wash out the rest)

# ColorBrewer RdBu (reversed: negative blue, positive red), interpolated in sRGB.
_STOPS = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
          "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"]  # fmt: skip
_SPECIAL_COLOURS = {"nan": "#ff00ff", "posinf": "#ffb000", "neginf": "#00d0ff", "zero": "#8c8c8c", "empty": "#00000000"}


def _palette() -> list[str]:
    stops = np.array([[int(s[i : i + 2], 16) for i in (1, 3, 5)] for s in _STOPS], float)
    at = np.linspace(0, len(stops) - 1, SCALE_STEPS)
    lo = np.floor(at).astype(int).clip(0, len(stops) - 2)
    f = (at - lo)[:, None]
    rgb = np.rint(stops[lo] * (1 - f) + stops[lo + 1] * f).astype(int)
    return [f"#{r:02x}{g:02x}{b:02x}" for r, g, b in rgb] + [_SPECIAL_COLOURS[k] for k in SPECIAL]


PALETTE = _palette()  # 256 CSS colours, by palette index


@dataclass(frozen=True)
class Grid:
    """Which blocks a region of a plane is cut into."""

    rows: tuple[int, int]  # picture rows [r0, r1)
    cols: tuple[int, int]
    block: tuple[int, int]  # (bh, bw) values per block; the last row/column of blocks may be smaller

    @property
    def shape(self) -> tuple[int, int]:
        (r0, r1), (c0, c1), (bh, bw) = self.rows, self.cols, self.block
        return -(-(r1 - r0) // bh), -(-(c1 - c0) // bw)


def block_plan(rows: tuple[int, int], cols: tuple[int, int], height: int, width: int) -> Grid:
    """The blocks for a region shown on `height` × `width` pixels: each block as small as the
    pixels allow (1 × 1 when the region fits: the exact values)."""
    n_rows, n_cols = rows[1] - rows[0], cols[1] - cols[0]
    return Grid(rows, cols, (max(1, -(-n_rows // height)), max(1, -(-n_cols // width))))


@dataclass
class ValueGrid:
    """Per block: sum and count of the finite values, largest finite |x|, NaN/±Inf counts."""

    grid: Grid
    sum: np.ndarray  # float64
    finite: np.ndarray  # int64
    absmax: np.ndarray  # float64, 0 where no finite value
    nan: np.ndarray  # int64
    posinf: np.ndarray
    neginf: np.ndarray

    @classmethod
    def empty(cls, grid: Grid) -> ValueGrid:
        shape = grid.shape
        return cls(
            grid, *(np.zeros(shape, dt) for dt in (np.float64, np.int64, np.float64, np.int64, np.int64, np.int64))
        )

    def merge(self, other: ValueGrid) -> ValueGrid:
        """The grid of both parts (sums and counts add, largest |x| is the larger)."""
        if other.grid != self.grid:
            raise ValueError("grids of different regions or blocks do not merge")
        return ValueGrid(
            self.grid,
            self.sum + other.sum,
            self.finite + other.finite,
            np.maximum(self.absmax, other.absmax),
            self.nan + other.nan,
            self.posinf + other.posinf,
            self.neginf + other.neginf,
        )

    @property
    def mean(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.finite > 0, self.sum / np.maximum(self.finite, 1), np.nan)


# ------------------------------------------------------------------ the one pass

_kernels: dict[str, ModuleType | None] = {}
_THREADS = max(1, min(2, os.cpu_count() or 1))  # block rows of a band split over two threads (measured: 1.5x a sum)
_lock = threading.Lock()


def kernel(nbytes: int) -> ModuleType | None:
    """The numba kernel module for `nbytes` of work, or None (little work: numpy's
    reduceat is as fast as loading numba, ~0.5 s once per process; or no numba)."""
    if nbytes < LOADED_ABOVE:
        return None
    with _lock:
        if "k" not in _kernels:
            try:
                from . import value_kernels

                _kernels["k"] = value_kernels
            except Exception:  # no numba, or one built for another numpy: keep numpy
                _kernels["k"] = None
    return _kernels["k"]


def _starts(lo: int, hi: int, origin: int, step: int) -> tuple[np.ndarray, int]:
    """Offsets in [0, hi - lo) where a block of `step` starting at `origin` begins (0 first),
    and the index of the first block."""
    first = (lo - origin) // step
    bounds = np.arange(origin + (first + 1) * step, hi, step) - lo
    return np.concatenate(([0], bounds)).astype(np.intp), first


def _add_band(out: ValueGrid, x: np.ndarray, r0: int, c0: int, module: ModuleType | None) -> None:
    """Add the values x (picture rows r0.., columns c0..) into `out`."""
    g = out.grid
    bh, bw = g.block
    rs, p0 = _starts(r0, r0 + x.shape[0], g.rows[0], bh)
    cs, q0 = _starts(c0, c0 + x.shape[1], g.cols[0], bw)
    hp, wq = len(rs), len(cs)
    aligned = (r0 - g.rows[0]) % bh == 0 and (c0 - g.cols[0]) % bw == 0
    if module is not None and aligned and x.dtype in (np.float32, np.float64):
        sums = np.empty((hp, wq))
        amax = np.empty((hp, wq), x.dtype)
        step = -(-hp // _THREADS)
        parts = [(a, min(hp, a + step)) for a in range(0, hp, step)]

        def one(a: int, b: int) -> None:
            module.block_sums(
                x, a, b, bh, bw, sums[a:b], amax[a:b], np.empty(x.shape[1], x.dtype), np.empty(x.shape[1], x.dtype)
            )

        _run(one, parts if x.size >= 1 << 20 else [(0, hp)])  # the kernel releases the GIL
    else:
        sums = np.add.reduceat(np.add.reduceat(x, rs, axis=0, dtype=np.float64), cs, axis=1)
        amax = np.fmax.reduceat(np.fmax.reduceat(np.abs(x), rs, axis=0), cs, axis=1)
    block = (slice(p0, p0 + hp), slice(q0, q0 + wq))
    r_end = np.append(rs[1:], x.shape[0])
    c_end = np.append(cs[1:], x.shape[1])
    counts = (r_end - rs)[:, None].astype(np.int64) * (c_end - cs)[None, :]
    amax = np.where(np.isfinite(amax), amax, 0.0)  # an Inf block is read again below
    bad = np.nonzero(~np.isfinite(sums))
    if bad[0].size:  # rare: read those blocks again and count exactly
        nan, pos, neg = (np.zeros(counts.shape, np.int64) for _ in range(3))
        for i, j in zip(*bad):
            part = x[rs[i] : r_end[i], cs[j] : c_end[j]]
            nan[i, j] = np.count_nonzero(np.isnan(part))
            pos[i, j] = np.count_nonzero(np.isposinf(part))
            neg[i, j] = np.count_nonzero(np.isneginf(part))
            finite = part[np.isfinite(part)].astype(np.float64)
            sums[i, j] = finite.sum()
            amax[i, j] = np.abs(finite).max() if finite.size else 0.0
        out.nan[block] += nan
        out.posinf[block] += pos
        out.neginf[block] += neg
        counts = counts - nan - pos - neg
    out.sum[block] += sums
    out.finite[block] += counts
    out.absmax[block] = np.maximum(out.absmax[block], amax)


def band_rows(grid: Grid) -> int:
    """Rows per band: whole block rows, about BAND_ELEMENTS values."""
    bh = grid.block[0]
    width = max(1, grid.cols[1] - grid.cols[0])
    return bh * max(1, BAND_ELEMENTS // (bh * width))


def reduce_bands(
    grid: Grid, bands: Iterable[tuple[int, np.ndarray]], itemsize: int = 4, col0: int | None = None
) -> ValueGrid:
    """The grid of the region from its bands ((first picture row, 2-D values) in any order,
    any sizes; columns from `col0`, default the region's first)."""
    (r0, r1), (c0, c1) = grid.rows, grid.cols
    module = kernel((r1 - r0) * (c1 - c0) * itemsize)
    out = ValueGrid.empty(grid)
    for row, x in bands:
        _add_band(out, x, row, c0 if col0 is None else col0, module)
    return out


# ------------------------------------------------------------------ colours


@dataclass
class Painted:
    """What the front-end draws: palette index and flags per block, the shown value."""

    index: np.ndarray  # uint8
    flags: np.ndarray  # uint8
    value: np.ndarray  # float64: the block's mean (or largest |x|), NaN where none
    limits: tuple[float, float]


def colour_limit(values: np.ndarray) -> float:
    """The colour scale's half-width for these block values (never 0)."""
    finite = np.abs(values[np.isfinite(values)])
    finite = finite[finite > 0]
    if not finite.size:
        return 1.0
    return float(np.percentile(finite, LIMIT_PERCENTILE))


def paint(g: ValueGrid, *, stat: str = "mean", limit: float | None = None, std: float | None = None) -> Painted:
    """Palette indices and flags of `g`. `stat`: "mean" (diverging, centred at 0) or "absmax"
    (0 to the limit); `limit`: the scale's half-width (None: from these blocks); `std`: the
    tensor's standard deviation, for the outlier flag (None: no outlier flags)."""
    if stat not in ("mean", "absmax"):
        raise ValueError(f"stat must be 'mean' or 'absmax', not {stat!r}")
    value = g.mean if stat == "mean" else np.where(g.finite > 0, g.absmax, np.nan)
    lim = colour_limit(value) if limit is None or not limit > 0 or not math.isfinite(limit) else float(limit)
    mid = (SCALE_STEPS - 1) // 2
    with np.errstate(invalid="ignore"):
        if stat == "mean":
            steps = np.rint((np.clip(value / lim, -1, 1) + 1) * mid)
        else:
            steps = mid + np.rint(np.clip(value / lim, 0, 1) * mid)
    index = np.nan_to_num(steps, nan=SPECIAL["empty"]).astype(np.uint8)
    zero = (g.finite > 0) & (g.absmax == 0) & (g.nan + g.posinf + g.neginf == 0)
    index[zero] = SPECIAL["zero"]
    index[g.neginf > 0] = SPECIAL["neginf"]
    index[g.posinf > 0] = SPECIAL["posinf"]
    index[g.nan > 0] = SPECIAL["nan"]
    flags = np.zeros(index.shape, np.uint8)
    flags[g.nan > 0] |= FLAGS["nan"]
    flags[g.posinf > 0] |= FLAGS["posinf"]
    flags[g.neginf > 0] |= FLAGS["neginf"]
    flags[zero] |= FLAGS["zero"]
    flags[(g.finite > 0) & (g.nan + g.posinf + g.neginf > 0)] |= FLAGS["partial"]
    if std is not None and std > 0 and math.isfinite(std):
        flags[g.absmax > OUTLIER_SIGMA * std] |= FLAGS["outlier"]
    return Painted(index, flags, value, (-lim, lim) if stat == "mean" else (0.0, lim))
