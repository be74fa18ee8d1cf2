"""nbinspect for MLX users: ``nbinspect.mlx.summary(model, input_shape)``, the familiar call.

Every other function (``inspect``, ``trace``, ``stats``, ``memory``, ``compare``, the widget
and ``%inspect_model``) takes an ``mlx.nn.Module`` as it is; this module adds the
torchinfo-style summary MLX users ask for, rendered from the same frames.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .backends import as_source, backend_for
from .core.gc_pause import gc_paused
from .errors import TraceError
from .inspection import Inspection, inspect, with_forward
from .render.summary_table import summary_table

__all__ = ["ModelSummary", "summary"]

Shape = Sequence[int]


class ModelSummary(Inspection):
    """An :class:`~nbinspect.Inspection` whose ``print()`` is the torchinfo-style table;
    ``insp.summary()`` still gives nbinspect's own summary, and every frame is there."""

    def __str__(self) -> str:
        flow = self.frames.get("flow")
        return summary_table(self.name, self.layers, {**self.totals, **self._inputs()}, flow)

    def _inputs(self) -> dict[str, Any]:
        return {"input_shapes": [r["shape"] for r in self.io.get("input", []) if "shape" in r]}


def _shapes(input_shape: Shape | Sequence[Shape], batch_size: int) -> list[tuple[int, ...]]:
    many = len(input_shape) > 0 and all(isinstance(s, (tuple, list)) for s in input_shape)
    given: list[Any] = list(input_shape) if many else [input_shape]
    shapes = []
    for s in given:
        if not all(type(d) is int and d > 0 for d in s):
            raise ValueError(f"summary: input_shape {s} is not a tuple of positive ints (batch dimension left out)")
        shapes.append((batch_size, *s))
    return shapes


@gc_paused()  # as inspect() does: the collector's passes over a large model cost more than the analysis
def summary(
    model: Any,
    input_shape: Shape | Sequence[Shape] | None = None,
    batch_size: int = 1,
    dtypes: Any = None,
    *,
    stats: bool = False,
) -> ModelSummary:
    """The torchinfo-style summary of an MLX (or torch) model, as an Inspection.

    `input_shape` is one input's shape without the batch dimension, channels last as MLX
    layers take it ((H, W, C) for Conv2d, (L,) for token ids), or a list of shapes for
    several positional inputs; `batch_size` is put in front; `dtypes` is one dtype or one
    per input (default the model's floating dtype; MLX or torch dtypes or names). Without
    `input_shape` the table has no output shapes. A shape that does not fit the model
    raises ``ValueError`` naming the layer it failed in."""
    source = as_source(model)  # read once: the inspection and the forward pass share it
    base = inspect(source, stats=stats)
    table = ModelSummary(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    if input_shape is None:
        return table
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"summary: batch_size must be a positive int, got {batch_size!r}")
    shapes = _shapes(input_shape, batch_size)
    types = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes] * len(shapes)
    if len(types) != len(shapes):
        raise ValueError(f"summary: {len(shapes)} input shapes but {len(types)} dtypes")
    floating = [d for d in base.params["dtype"] if "float" in d]
    inputs = [_zeros(model, s, d or (floating[0] if floating else "float32")) for s, d in zip(shapes, types)]
    try:
        return with_forward(table, source.model, tuple(inputs), input_dtype=types[0])
    except TraceError as exc:
        given = " ".join(str(list(s)) for s in shapes)
        raise ValueError(
            f"summary: input shape {given} (batch {batch_size} in front) does not fit the model "
            f"(MLX layers take channels last, e.g. (H, W, C) for Conv2d): {exc}"
        ) from exc


def _zeros(model: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    backend = backend_for(model)
    return shape if backend is None else backend.zeros(shape, dtype)
