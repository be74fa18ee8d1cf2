"""How an N-d tensor is laid out as the 2-D picture of the value view (issue 28).

A :class:`Plane` names the axes flattened (in C order) into the picture's rows, those
flattened into its columns, and the index each remaining axis is fixed at. The default
splits the shape in two (every value visible); two chosen axes with the rest sliced show
one cross-section (a conv kernel's ``out × in`` at one ``kh, kw``). The same arithmetic is
mirrored in ``js/src/heatmapRegion.ts`` for the hover readout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Plane", "default_plane"]


@dataclass(frozen=True)
class Plane:
    rows: tuple[int, ...]  # axes flattened into picture rows, in C order
    cols: tuple[int, ...]  # axes flattened into picture columns
    fixed: tuple[tuple[int, int], ...] = ()  # (axis, index) of every other axis

    def check(self, shape: tuple[int, ...]) -> None:
        """ValueError unless the plane covers each axis of `shape` exactly once, in range."""
        axes = [*self.rows, *self.cols, *(a for a, _ in self.fixed)]
        if sorted(axes) != list(range(len(shape))):
            raise ValueError(f"plane axes {axes} do not cover the {len(shape)} axes of {list(shape)} once each")
        if list(self.rows) != sorted(self.rows) or list(self.cols) != sorted(self.cols):
            raise ValueError("plane row and column axes must be in increasing order")
        for axis, index in self.fixed:
            if not 0 <= index < shape[axis]:
                raise ValueError(f"index {index} out of range for axis {axis} of size {shape[axis]}")

    def size(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """(rows, columns) of the picture of a tensor of `shape`."""
        return math.prod(shape[a] for a in self.rows), math.prod(shape[a] for a in self.cols)

    def index(self, shape: tuple[int, ...], row: int, col: int) -> tuple[int, ...]:
        """The tensor index of picture cell (row, col)."""
        out = [0] * len(shape)
        for axis, i in self.fixed:
            out[axis] = i
        for axes, flat in ((self.rows, row), (self.cols, col)):
            for axis in reversed(axes):
                flat, out[axis] = divmod(flat, shape[axis])
        return tuple(out)

    def to_json(self) -> dict:
        return {"rows": list(self.rows), "cols": list(self.cols), "fixed": [list(f) for f in self.fixed]}

    @classmethod
    def from_json(cls, data: dict, shape: tuple[int, ...]) -> Plane:
        """A plane from a widget request, checked against `shape` (ValueError when wrong)."""
        try:
            plane = cls(
                tuple(int(a) for a in data["rows"]),
                tuple(int(a) for a in data["cols"]),
                tuple((int(a), int(i)) for a, i in data.get("fixed", ())),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad plane {data!r}: {exc}") from None
        plane.check(shape)
        return plane


def default_plane(shape: tuple[int, ...]) -> Plane:
    """Rows = the first axis (output units of a weight, experts × outputs for a 3-D expert
    stack), columns = the rest: every value visible. A 1-D tensor is one row."""
    n = len(shape)
    if n == 0:
        return Plane((), ())
    if n == 1:
        return Plane((), (0,))
    rows = (0, 1) if n == 3 else (0,)  # E × out × in: rows are (expert, output unit)
    return Plane(rows, tuple(range(len(rows), n)))
