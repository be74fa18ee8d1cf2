"""The values behind a result, for the value view's requests and ``locate()`` (issue 28).

A :class:`ValueAccess` holds the source(s) an Inspection or Comparison was made from: a
live model by weak reference (the result never keeps a deleted model alive; its regions
then answer "unavailable"), a file or state_dict source as it is. The widget's ``_region``
requests come here as JSON and go back as a JSON header and binary buffers; a bad request
is answered with ``state: "error"``, never an exception into the comm.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..backends import as_source, backend_named
from ..backends.torch.values import tensor_bands
from ..core.plane import Plane, default_plane
from ..core.source import ModelSource, TensorEntry
from ..errors import CheckpointError
from .locate import locate_frame
from .values import FLAGS, PALETTE, SPECIAL, Grid, ValueGrid, band_rows, block_plan, paint, reduce_bands

__all__ = ["MAX_PIXELS", "ValueAccess"]

MAX_PIXELS = 2048  # largest picture side a request may ask for
MAX_BAD_LISTED = 4096  # blocks with NaN/Inf whose exact counts the header lists (for the readout)
DELTA = "delta"
GONE = "the model this result was made from no longer exists (it was deleted): no values to read"


class _Side:
    """One source: held as it is, or (a live model with values) by weak reference and read
    again on use. A model on the meta device costs no memory: it is kept, so its tensors
    say "meta" rather than "deleted"."""

    def __init__(self, source: ModelSource):
        self._source: ModelSource | None = None
        self._model: weakref.ref | None = None
        self.name = source.name
        # the devices' column: no entries made for a walked model
        if source.model is not None and not all(map("meta".__eq__, source.tensor_columns["device"])):
            try:
                self._model = weakref.ref(source.model)
            except TypeError:  # an object without weak references: keep the source
                self._source = source
        else:
            self._source = source

    def source(self) -> ModelSource | None:
        if self._source is not None:
            return self._source
        model = self._model() if self._model is not None else None
        return None if model is None else as_source(model, self.name)


class ValueAccess:
    """Region reads and ``locate`` over the sources of one result. `sides`: {None: source}
    for an Inspection, {"a": ..., "b": ...} for a Comparison (whose Δ is side "delta");
    `stats`: per side, a callable giving its per-tensor stats frame (std for outliers)."""

    def __init__(
        self,
        sides: Mapping[str | None, ModelSource],
        stats: Mapping[str | None, Callable[[], Any]] | None = None,
        *,
        collective: bool = False,
    ):
        """`collective`: a source spread over ranks is read by every rank at once (each
        reduces its own block, the grids are merged): :func:`nbinspect.value_grid` on every rank."""
        self._sides = {key: _Side(src) for key, src in sides.items()}
        self._stats = dict(stats or {})
        self._collective = collective

    # ---------------------------------------------------------------- entries and bands

    def _entry(self, side: str | None, name: str) -> tuple[TensorEntry | None, Any, str]:
        """(entry, backend, why not) of tensor `name` on `side`."""
        if side not in self._sides:
            return None, None, f"no side {side!r}"
        source = self._sides[side].source()
        if source is None:
            return None, None, GONE
        entry = next((t for t in source.tensors if t.name == name), None)
        if entry is None:
            return None, None, f"{name!r} is not a tensor of {self._sides[side].name}"
        backend = backend_named(source.framework)
        if not hasattr(backend, "plane_bands"):  # a backend without its own reading: torch tensors
            backend = backend_named("torch")
        reason = backend.value_state(entry) or ("" if self._collective else _not_here(source, entry))
        return entry, backend, reason or ""

    def _bands(
        self, side: str | None, name: str
    ) -> tuple[Callable[[Plane, tuple, tuple, int], Iterator], tuple, str, str]:
        """(bands(plane, rows, cols, band_rows), shape, dtype, why not)."""
        if side == DELTA:
            (ea, ba, why_a), (eb, bb, why_b) = self._entry("a", name), self._entry("b", name)
            why = why_a or why_b
            if ea is None or eb is None or why:
                return (lambda *a: iter(())), (), "", why
            shape_a, shape_b = tuple(ea.shape or ()), tuple(eb.shape or ())
            if shape_a != shape_b:
                return (
                    (lambda *a: iter(())),
                    (),
                    "",
                    f"the shapes differ ({list(shape_a)} in a, {list(shape_b)} in b): no Δ",
                )

            def delta(plane: Plane, rows: tuple, cols: tuple, n: int) -> Iterator:
                for (r, xa), (_, xb) in zip(
                    ba.plane_bands(ea, plane, rows, cols, n), bb.plane_bands(eb, plane, rows, cols, n)
                ):
                    with np.errstate(invalid="ignore"):  # inf - inf is NaN, counted as such
                        yield r, np.subtract(xb, xa, dtype=np.result_type(xa, xb))

            return delta, shape_a, f"Δ {eb.dtype}", ""
        entry, backend, why = self._entry(side, name)
        if entry is None or why:
            return (lambda *a: iter(())), tuple(entry.shape or ()) if entry is not None else (), "", why
        return (lambda p, r, c, n: backend.plane_bands(entry, p, r, c, n)), tuple(entry.shape or ()), entry.dtype, ""

    def _std(self, side: str | None, name: str) -> float | None:
        if side == DELTA:
            return None
        get = self._stats.get(side)
        frame = get() if get is not None else None
        if frame is None or "std" not in frame:
            return None
        row = frame.loc[frame["name"] == name, "std"]
        return float(row.iloc[0]) if len(row) and math.isfinite(row.iloc[0]) else None

    # ---------------------------------------------------------------- the widget's request

    def region(self, request: Mapping[str, Any]) -> tuple[dict, list[bytes]]:
        """The answer to one ``_region`` request (see js/src/heatmapRegion.ts): header and buffers
        ``[index uint8, flags uint8, value float64, absmax float32]``, row-major."""
        started = time.perf_counter()
        seq = request.get("seq")
        name = str(request.get("tensor", ""))
        side = request.get("side")
        head: dict[str, Any] = {
            "seq": seq,
            "tensor": name,
            "side": side,
            "palette": PALETTE,
            "special": SPECIAL,
            "flags": FLAGS,
        }
        try:
            read, shape, dtype, why = self._bands(side, name)
            if why:
                state = "meta" if "meta device" in why or "fake" in why or "lazy" in why else "unavailable"
                return {**head, "state": state, "message": why, "shape": list(shape)}, []
            plane = Plane.from_json(request["plane"], shape) if request.get("plane") else default_plane(shape)
            n_rows, n_cols = plane.size(shape)
            rows = _span(request.get("rows"), n_rows, "rows")
            cols = _span(request.get("cols"), n_cols, "cols")
            height = _pixels(request.get("height", 512))
            width = _pixels(request.get("width", 512))
            stat = str(request.get("stat", "mean"))
            limit = request.get("limit")
            limit = float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) else None
            grid = block_plan(rows, cols, height, width)
            if n_rows == 0 or n_cols == 0:
                return {
                    **head,
                    "state": "unavailable",
                    "message": "an empty tensor: no values",
                    "shape": list(shape),
                }, []
            if self._collective and side != DELTA and self._sides[side].source().collective is not None:  # type: ignore[union-attr]  # checked by _bands
                g = self._sharded_grid(side, name, plane, grid)
            else:
                g = reduce_bands(grid, read(plane, rows, cols, band_rows(grid)))
            painted = paint(g, stat=stat, limit=limit, std=self._std(side, name))
        except CheckpointError as exc:  # the file changed since it was opened: nothing to show
            return {**head, "state": "unavailable", "message": str(exc)}, []
        except (ValueError, TypeError, KeyError) as exc:
            return {**head, "state": "error", "message": str(exc)}, []
        except Exception as exc:  # a read that failed (file changed, device gone): said, not raised
            return {**head, "state": "unavailable", "message": f"{type(exc).__name__}: {exc}"}, []
        bad = np.argwhere(g.nan + g.posinf + g.neginf > 0)[:MAX_BAD_LISTED]
        header = {
            **head,
            "state": "ok",
            "message": "",
            "shape": list(shape),
            "dtype": dtype,
            "plane": plane.to_json(),
            "rows": list(rows),
            "cols": list(cols),
            "block": list(grid.block),
            "grid": list(grid.shape),
            "exact": grid.block == (1, 1),
            "stat": stat,
            "limits": list(painted.limits),
            "std": self._std(side, name),
            "counts": _counts(g, painted.flags),
            "bad": [[int(i), int(j), int(g.nan[i, j]), int(g.posinf[i, j]), int(g.neginf[i, j])] for i, j in bad],
            "buffers": ["index:u8", "flags:u8", "value:f64", "absmax:f32"],
        }
        buffers = [
            painted.index.tobytes(),
            painted.flags.tobytes(),
            np.ascontiguousarray(painted.value, np.float64).tobytes(),
            np.ascontiguousarray(g.absmax, np.float32).tobytes(),
        ]
        header["seconds"] = round(time.perf_counter() - started, 4)
        return header, buffers

    def _sharded_grid(self, side: str | None, name: str, plane: Plane, grid: Grid) -> ValueGrid:
        """The grid of a tensor spread over ranks: each rank reduces the part of the region its
        block holds (global rows and columns), the grids are gathered and merged (sums and
        counts add, largest |x| is the largest). Tensors of up to 2 axes, on their default
        plane (the block of a shard is then a rectangle of the picture)."""
        source = self._sides[side].source()
        entry = next(t for t in source.tensors if t.name == name)  # type: ignore[union-attr]  # _bands found it
        shape = tuple(entry.shape or ())
        if len(shape) > 2 or plane != default_plane(shape):
            raise ValueError("a tensor spread over ranks is shown whole, on its default plane, up to 2 axes")
        part = source.collective.part(name)  # type: ignore[union-attr]
        local = entry.values()
        out = ValueGrid.empty(grid)
        if part is not None and part.owner and local.numel():
            offsets, sizes = [*part.offsets, 0, 0][:2], [*local.shape, 1, 1]
            if len(shape) < 2:  # a 1-D tensor is one row: its offset is a column
                offsets, sizes = [0, offsets[0] if shape else 0], [1, sizes[0] if shape else 1]
            rows = (max(grid.rows[0], offsets[0]), min(grid.rows[1], offsets[0] + sizes[0]))
            cols = (max(grid.cols[0], offsets[1]), min(grid.cols[1], offsets[1] + sizes[1]))
            if rows[0] < rows[1] and cols[0] < cols[1]:
                block = default_plane(tuple(local.shape))
                local_rows = (rows[0] - offsets[0], rows[1] - offsets[0])
                local_cols = (cols[0] - offsets[1], cols[1] - offsets[1])
                bands = tensor_bands(local, block, local_rows, local_cols, band_rows(grid))
                out = reduce_bands(grid, ((r + offsets[0], x) for r, x in bands), col0=cols[0])
        grids = source.collective.gather(out)  # type: ignore[union-attr]
        merged = grids[0]
        for other in grids[1:]:
            merged = merged.merge(other)
        return merged

    # ---------------------------------------------------------------- locate

    def locate(
        self,
        what: str | Iterable[str],
        *,
        first: int = 10,
        tensors: Iterable[str] | None = None,
        side: str | None = None,
        k: float | None = None,
    ) -> pd.DataFrame:
        """schema.LOCATE over this side's tensors (each storage once); tensors without values
        are listed in ``frame.attrs["skipped"]`` with the reason."""
        from .values import OUTLIER_SIGMA

        names = self._names(side) if tensors is None else list(tensors)
        shapes, skipped = [], {}
        readers = {}
        for name in names:
            read, shape, _, why = self._bands(side, name)
            if why:
                skipped[name] = why
            else:
                shapes.append((name, shape))
                readers[name] = read

        def bands(name: str, plane: Plane, n: int) -> Iterator[tuple[int, np.ndarray]]:
            shape = dict(shapes)[name]
            n_rows, n_cols = plane.size(shape)
            return readers[name](plane, (0, n_rows), (0, n_cols), n)

        get = self._stats.get(side) if side != DELTA else None
        stats = get() if get is not None else None
        frame = locate_frame(shapes, bands, what, first=first, stats=stats, k=OUTLIER_SIGMA if k is None else k)
        frame.attrs["skipped"] = skipped
        return frame

    def locate_rows(self, request: Mapping[str, Any]) -> list[dict]:
        """The widget's ``_locate``: every kind in one tensor, the first few hits of each, as
        JSON rows; [] when there is nothing to list or the request is bad."""
        name, side = request.get("tensor"), request.get("side")
        if not isinstance(name, str) or (side not in self._sides and side != DELTA):
            return []
        try:
            frame = self.locate(
                ["nan", "inf", "outliers", "dead"], first=int(request.get("first", 5)), tensors=[name], side=side
            )
        except Exception:  # a read that failed: the heatmap says why on its own request
            return []
        return [
            {
                "what": r.what,
                "index": list(r.index),
                "value": None if not math.isfinite(r.value) else r.value,
                "total": int(r.total),
            }
            for r in frame.itertuples()
        ]

    def _names(self, side: str | None) -> list[str]:
        """Each storage's first path (tied weights once): on Δ, the paths both sides hold."""
        keys = ("a", "b") if side == DELTA else (side,)
        lists = []
        for key in keys:
            if key not in self._sides:
                raise ValueError(f"no side {key!r} (sides: {', '.join(map(str, self._sides))})")
            source = self._sides[key].source()
            if source is None:
                raise ValueError(f"{self._sides[key].name}: {GONE}")
            lists.append([t.name for t in source.unique_tensors().values()])
        if len(lists) == 1:
            return lists[0]
        in_b = set(lists[1])
        return [n for n in lists[0] if n in in_b]


def _not_here(source: ModelSource, entry: TensorEntry) -> str:
    """Why this process cannot show a tensor spread over ranks ('' when it holds it whole):
    a widget request reaches one rank, and the other ranks are not listening."""
    part = getattr(source.collective, "part", lambda name: None)(entry.name)
    if part is None or (part.owner and tuple(part.shape) == tuple(entry.shape or ())):
        return ""
    held = ", ".join(f"{o}–{o + n - 1}" for o, n in zip(part.offsets, part.shape)) if part.owner else "none of it"
    return (
        f"sharded over ranks ({part.placements}); this rank holds {held}. "
        "nbinspect.locate(model, ...) called on every rank finds the bad values across all shards"
    )


def _span(value: Any, size: int, what: str) -> tuple[int, int]:
    if value is None:
        return 0, size
    if not (isinstance(value, (list, tuple)) and len(value) == 2 and all(type(v) is int for v in value)):
        raise ValueError(f"{what} must be two ints, not {value!r}")
    lo, hi = value
    if not 0 <= lo < hi <= size:
        raise ValueError(f"{what} {lo}..{hi} is outside 0..{size}")
    return lo, hi


def _pixels(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= MAX_PIXELS:
        raise ValueError(f"height and width must be ints in 1..{MAX_PIXELS}, not {value!r}")
    return value


def _counts(g: ValueGrid, flags: np.ndarray) -> dict[str, int]:
    return {
        "nan": int(g.nan.sum()),
        "posinf": int(g.posinf.sum()),
        "neginf": int(g.neginf.sum()),
        "zero_blocks": int(np.count_nonzero(flags & FLAGS["zero"])),
        "outlier_blocks": int(np.count_nonzero(flags & FLAGS["outlier"])),
    }
