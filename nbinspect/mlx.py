"""nbinspect for MLX users: ``nbinspect.mlx.summary(model, input_shape)``, the familiar call.

Every other function (``inspect``, ``trace``, ``stats``, ``memory``, ``compare``, the widget
and ``%inspect_model``) takes an ``mlx.nn.Module`` as it is; this module adds the
torchinfo-style summary MLX users ask for, rendered from the same frames.

``summary()`` returns the table as text (a :class:`ModelSummary`, a ``str``: ``print`` it,
``"Total params" in s``, write it to a file), as the MLX summary design's API does; the rich
result stays available: ``s.inspection`` (a :class:`SummaryInspection`, an
:class:`~nbinspect.Inspection` with every frame, the widget, ``to_json()``), and any
Inspection attribute on ``s`` itself (``s.layers``, ``s.totals``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

from .backends import as_source, backend_for
from .core.gc_pause import gc_paused
from .errors import TraceError
from .inspection import Inspection, inspect, with_forward
from .render.summary_table import summary_table

__all__ = ["LayerInfo", "ModelSummary", "SummaryInspection", "summary"]

Shape = Sequence[int]


class SummaryInspection(Inspection):
    """An :class:`~nbinspect.Inspection` whose ``print()`` is the torchinfo-style table;
    ``insp.summary()`` still gives nbinspect's own summary, and every frame is there."""

    verbose: int = 1
    footer: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.table()

    def table(self, verbose: int | None = None) -> str:
        flow = self.frames.get("flow")
        totals = {**self.totals, **self._inputs()}
        level = self.verbose if verbose is None else verbose
        return summary_table(self.name, self.layers, totals, flow, level, self.params, self.footer)

    def _inputs(self) -> dict[str, Any]:
        return {"input_shapes": [r["shape"] for r in self.io.get("input", []) if "shape" in r]}


@dataclasses.dataclass(frozen=True)
class LayerInfo:
    """One module of the summary, with the MLX summary design's fields."""

    name: str
    module_type: str
    output_shape: tuple[int, ...] | None = None
    num_params: int = 0
    trainable_params: int = 0
    param_bytes: int = 0


class ModelSummary(str):
    """The summary table as text (a ``str``); ``inspection`` is the full result and every
    Inspection attribute reads through (``s.layers``, ``s.totals``, ``s.to_json()``)."""

    inspection: SummaryInspection

    def __new__(cls, inspection: SummaryInspection) -> ModelSummary:
        self = super().__new__(cls, inspection.table())
        self.inspection = inspection
        return self

    def __getattr__(self, name: str) -> Any:
        if name == "inspection":
            raise AttributeError(name)
        return getattr(self.inspection, name)

    @property
    def layer_infos(self) -> dict[str, LayerInfo]:
        """name -> :class:`LayerInfo` of every module (the design's per-layer records)."""
        flow = self.inspection.frames.get("flow")
        shapes: dict[str, Any] = {}
        if flow is not None:
            for call in flow.itertuples(index=False):
                shapes.setdefault(call.name, call.output_shapes)
        out = {}
        for row in self.inspection.layers.itertuples(index=False):
            shape = shapes.get(row.name)
            first = (
                shape[0]
                if isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple))
                else shape
            )
            out[row.name] = LayerInfo(
                row.name,
                row.type,
                tuple(first) if isinstance(first, (list, tuple)) else None,
                int(row.params),
                int(row.trainable_params),
                int(row.param_bytes),
            )
        return out

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


def _shapes(input_shape: Shape | Sequence[Shape], batch_size: int) -> list[tuple[int, ...]]:
    many = len(input_shape) > 0 and all(isinstance(s, (tuple, list)) for s in input_shape)
    given: list[Any] = list(input_shape) if many else [input_shape]
    shapes = []
    for s in given:
        if not all(type(d) is int and d > 0 for d in s):
            raise ValueError(f"summary: input_shape {s} is not a tuple of positive ints (batch dimension left out)")
        shapes.append((batch_size, *s))
    return shapes


def _mlx_helpers(model: Any) -> Any:
    backend = backend_for(model)
    if backend is None or getattr(backend, "name", "") != "mlx":
        return None
    from .backends.mlx import memory

    return memory


@gc_paused()  # as inspect() does: the collector's passes over a large model cost more than the analysis
def summary(
    model: Any,
    input_shape: Shape | Sequence[Shape] | Any = None,
    batch_size: int = 1,
    device: Any = None,
    dtypes: Any = None,
    verbose: int = 1,
    *,
    stats: bool = False,
    on_error: str = "warn",
) -> ModelSummary:
    """The torchinfo-style summary of an MLX (or torch) model: the table as text (a
    :class:`ModelSummary`; ``.inspection`` is the full :class:`SummaryInspection`).

    `input_shape` is one input's shape without the batch dimension, channels last as MLX
    layers take it ((H, W, C) for Conv2d, (L,) for token ids), a list of shapes for several
    positional inputs, or an array used as the input as it is; `batch_size` is put in front
    (-1, "any batch", runs at 1); `device` an ``mx.Device`` (or "cpu"/"gpu") the pass runs
    on; `dtypes` one dtype or one per input (default the model's floating dtype). `verbose`
    0: totals and sizes only; 1: a row per module (a model without submodules: per
    parameter); 2: under every module a row per parameter. Without `input_shape` the table has
    no output shapes. A shape that does not fit the model warns and the table shows what was
    measured before the failure (``on_error="raise"``: a ValueError naming the layer)."""
    if on_error not in ("warn", "raise"):
        raise ValueError(f"summary: on_error must be 'warn' or 'raise', got {on_error!r}")
    if verbose not in (0, 1, 2):
        raise ValueError(f"summary: verbose must be 0, 1 or 2, got {verbose!r}")
    source = as_source(model)  # read once: the inspection and the forward pass share it
    base = inspect(source, stats=stats)
    table = SummaryInspection(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    table.verbose = verbose
    helpers = _mlx_helpers(model)
    footer: list[str] = []
    if input_shape is None:
        table.footer = tuple(footer)
        return ModelSummary(table)
    if batch_size == -1:
        batch_size = 1
        footer.append("Batch size: any (-1): measured at 1")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"summary: batch_size must be a positive int or -1, got {batch_size!r}")
    if hasattr(input_shape, "shape") and hasattr(input_shape, "dtype"):  # an array: the input as it is
        inputs: list[Any] = [input_shape]
        shapes = [tuple(input_shape.shape)]
        types: list[Any] = [None]
    else:
        shapes = _shapes(input_shape, batch_size)
        types = list(dtypes) if isinstance(dtypes, (list, tuple)) else [dtypes] * len(shapes)
        if len(types) != len(shapes):
            raise ValueError(f"summary: {len(shapes)} input shapes but {len(types)} dtypes")
        floating = [d for d in base.params["dtype"] if "float" in d]
        inputs = [_zeros(model, s, d or (floating[0] if floating else "float32")) for s, d in zip(shapes, types)]
    if helpers is not None:
        helpers.reset_peak_memory()
    try:
        with helpers.on_device(device) if helpers is not None else _no_device(device):
            result = with_forward(table, source.model, tuple(inputs), input_dtype=types[0])
    except TraceError as exc:
        given = " ".join(str(list(s)) for s in shapes)
        message = (
            f"summary: input shape {given} (batch {batch_size} in front) does not fit the model "
            f"(MLX layers take channels last, e.g. (H, W, C) for Conv2d): {exc}"
        )
        if on_error == "raise":
            raise ValueError(message) from exc
        warnings.warn(
            message + "; the table shows the parameters and the shapes measured before the failure",
            RuntimeWarning,
            stacklevel=3,  # the caller of summary(), past gc_paused
        )
        partial = getattr(exc, "partial", None)
        result = table
        if isinstance(partial, Inspection):
            result = SummaryInspection(**{f.name: getattr(partial, f.name) for f in dataclasses.fields(partial)})
            result.verbose = verbose
        footer.append("The forward pass failed: sizes leave out what it did not reach")
    if helpers is not None:
        m = helpers.device_memory()
        footer.append(
            f"MLX memory after the forward pass: active {m['mlx_active_bytes'] / 2**20:.2f} MiB, "
            f"peak {m['mlx_peak_bytes'] / 2**20:.2f} MiB, cache {m['mlx_cache_bytes'] / 2**20:.2f} MiB"
        )
        result = dataclasses.replace(result, totals={**result.totals, **m})
        result.verbose = verbose
    result.footer = tuple(footer)
    return ModelSummary(result)


def _no_device(device: Any) -> Any:
    import contextlib

    if device is not None:
        raise ValueError("summary: device= is for MLX models (a torch model runs where its weights are)")
    return contextlib.nullcontext()


def _zeros(model: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    backend = backend_for(model)
    return shape if backend is None else backend.zeros(shape, dtype)
