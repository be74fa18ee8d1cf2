"""The backend protocol: what a framework provides so that every analyzer, view and entry
point works on its models without naming it.

A backend lives in ``nbinspect/backends/<name>/`` and is listed once in the registry
(``nbinspect/backends/__init__.py``). It recognises its objects without importing its
framework (it looks in ``sys.modules``: a model of a framework that was never imported
cannot exist), turns them into a :class:`~nbinspect.core.source.ModelSource`, and does
what needs the framework itself: trace a forward pass (shapes, FLOPs, saved activations),
watch calls made inside a block, plan training memory and read a region of one tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import numpy as np

from .memory import PlanOptions
from .plane import Plane
from .source import ModelSource, TensorEntry
from .trace import TraceResult

__all__ = ["Backend", "EngineFrames"]

EngineFrames = Callable[[Any, dict[str, Any]], bytes]
"""(worker, options) -> pickled frames: what a serving engine's workers run (the pipeline's)."""


class Backend(Protocol):
    name: str  # the source's `framework`

    def recognizes(self, obj: Any) -> bool:
        """Whether `obj` is this framework's model (or engine), without importing the framework."""
        ...

    def source(self, obj: Any, name: str | None) -> ModelSource:
        """`obj` as a source: module tree and named tensors."""
        ...

    def trace(self, model: Any, args: tuple, kwargs: dict, **options: Any) -> TraceResult:
        """One forward pass recorded call by call (see ``backends/torch/trace.py`` for the options)."""
        ...

    def watch(self, model: Any, *, flops: bool = True) -> AbstractContextManager[TraceResult]:
        """The calls of `model` made inside a ``with`` block."""
        ...

    def plan_memory(self, source: ModelSource, plan: PlanOptions) -> Any:
        """The training-memory plan (schema.MEMORY) of `source`'s live model."""
        ...

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An input of zeros of this shape, or the shape itself when the trace builds it."""
        ...

    def read_region(self, entry: TensorEntry, index: tuple[slice | int, ...]) -> np.ndarray:
        """The values of `entry` at `index` as a float64 array (a region only: never more)."""
        ...

    def value_state(self, entry: TensorEntry) -> str | None:
        """None when `entry` has values to read, else why not (meta, fake, lazy)."""
        ...

    def plane_bands(
        self, entry: TensorEntry, plane: Plane, rows: tuple[int, int], cols: tuple[int, int], band_rows: int
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Rows [r0, r1) x columns [c0, c1) of `entry` laid out on `plane`, as (first row,
        2-D float32/float64 numpy array with contiguous rows) bands of `band_rows` rows, in
        order: the whole region is never converted at once (``backends/torch/values.py``)."""
        ...
