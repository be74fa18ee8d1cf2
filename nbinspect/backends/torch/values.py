"""The values of one tensor as the value view reads them: row bands of a 2-D plane (issue 28).

A band is a 2-D numpy array (float32, or float64 for float64 and wide integer tensors) of
consecutive picture rows; only the band is ever converted, never the whole region. A live
tensor gives views; a file tensor with a row reader (``TensorEntry.rows``) reads only the
first-axis slices a band needs, so a zoom into a large checkpoint reads that region's rows.
MLX entries are torch views of their arrays and come through here too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ...core.plane import Plane
from ...core.source import TensorEntry

__all__ = ["plane_bands", "tensor_bands", "value_state"]

_WIDE = (torch.int32, torch.int64, torch.uint32, torch.uint64, torch.float64)  # exact only in float64


def value_state(entry: TensorEntry) -> str | None:
    """None when `entry` has values to show, else why not (one sentence)."""
    if entry.shape is None:
        return "a lazy parameter: it has no shape or values until the first forward pass"
    if entry.device == "meta":
        return "on the meta device: shapes and dtypes only, no values"
    t = entry.tensor
    if isinstance(t, torch.Tensor):
        if t.layout != torch.strided and not t.is_quantized:
            return f"a {str(t.layout).removeprefix('torch.')} tensor: its values are not read"
        try:
            t.data_ptr()
        except Exception:  # fake and functional tensors have no memory
            return "a fake tensor: shapes and dtypes only, no values"
    return None


def _float(t: torch.Tensor) -> np.ndarray:
    """A band as float32/float64 numpy with contiguous rows (a copy only when it must)."""
    if t.is_quantized:
        t = t.dequantize()
    if t.is_complex():
        t = t.abs()
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.to(torch.float64 if t.dtype in _WIDE else torch.float32)
    out = t.numpy()
    return out if out.strides[-1] == out.itemsize else np.ascontiguousarray(out)


def plane_bands(
    entry: TensorEntry, plane: Plane, rows: tuple[int, int], cols: tuple[int, int], band_rows: int
) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, values) for rows [r0, r1) x columns [c0, c1) of `plane`, `band_rows`
    rows at a time, in order. A band is valid until the next one is asked for."""
    shape = tuple(entry.shape or ())
    fixed = dict(plane.fixed)
    per_lead = math.prod(shape[a] for a in plane.rows[1:]) if plane.rows else 1
    lead_rows = bool(plane.rows) and plane.rows[0] == 0
    remaining = [a for a in range(len(shape)) if a not in fixed]
    order = [remaining.index(a) for a in (*plane.rows, *plane.cols)]
    whole: Any = None
    try:
        with torch.no_grad():
            for b0 in range(rows[0], rows[1], band_rows):
                b1 = min(rows[1], b0 + band_rows)
                if not shape:
                    i0, i1 = 0, 0
                elif 0 in fixed:
                    i0, i1 = fixed[0], fixed[0] + 1
                elif lead_rows:
                    i0, i1 = b0 // per_lead, -(-b1 // per_lead)
                else:
                    i0, i1 = 0, shape[0]
                if not shape:
                    chunk = entry.values()
                elif entry.rows is not None and (i0, i1) != (0, shape[0]):
                    chunk = entry.rows(i0, i1)  # a file: only these rows' bytes
                else:
                    if whole is None:
                        whole = entry.values()
                    chunk = whole[i0:i1]
                index = tuple(
                    fixed[a] - (i0 if a == 0 else 0) if a in fixed else slice(None) for a in range(len(shape))
                )
                sub = chunk[index].permute(order) if shape else chunk.reshape(())
                if len(plane.rows) > 1:
                    sub = sub.flatten(0, len(plane.rows) - 1)
                elif not plane.rows:
                    sub = sub.unsqueeze(0)
                offset = i0 * per_lead if lead_rows else 0
                sub = sub[b0 - offset : b1 - offset]
                sub = sub.flatten(1) if len(plane.cols) > 1 else (sub if plane.cols else sub.unsqueeze(1))
                yield b0, _float(sub[:, cols[0] : cols[1]])
    finally:
        entry.release()


def tensor_bands(
    t: torch.Tensor, plane: Plane, rows: tuple[int, int], cols: tuple[int, int], band_rows: int
) -> Iterator[tuple[int, np.ndarray]]:
    """:func:`plane_bands` of a tensor in hand (a rank's block of a sharded tensor)."""
    entry = TensorEntry("", "", "", tuple(t.shape), str(t.dtype), str(t.device), t.numel(), 0, False, ("id", id(t)), t)
    return plane_bands(entry, plane, rows, cols, band_rows)
