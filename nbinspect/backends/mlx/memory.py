"""Training-memory plan for MLX models and ``mlx.optimizers``.

The same frame as the torch planner (schema.MEMORY). What differs is MLX's own: the state
each ``mlx.optimizers`` class allocates in ``init`` (zeros shaped and typed like each
trainable parameter: Adam/AdamW/Adamax two, SGD one, also without momentum, Lion one,
AdaDelta two, RMSprop and Adagrad one, Adafactor factored row/column second moments) plus
the optimizer-wide ``step`` (uint64) and ``learning_rate`` (float32) scalars. Gradients
and optimizer state are trees shaped like the parameter tree, so a tied array has them at
each of its paths (parameters themselves count once). MLX has no buffers and no autocast.
Activations are the output arrays of every call of a traced training-mode forward pass at
the planned batch size (see :mod:`.mlx_trace`), and MLX's own ``get_active_memory()`` /
``get_peak_memory()`` after that pass are quoted in the note as a cross-check (they include
the temporaries inside layers that the per-call figure leaves out).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ...core.inputs import split_input
from ...core.memory import PlanOptions, adafactor_numel, input_rows, memory_frame, notes
from ...core.source import ModelSource
from ...schema import PARAMETER
from .trace import mlx_dtype, run_mlx_trace

__all__ = ["MLX_OPTIMIZERS", "MLX_PRECISIONS", "mlx_memory_plan"]

# name -> (state arrays shaped like each trainable parameter, optimizer-wide scalar bytes)
MLX_OPTIMIZERS: dict[str, tuple[int, int]] = {
    "sgd": (1, 12),  # mlx.optimizers.SGD allocates its velocity even with momentum=0
    "sgd-momentum": (1, 12),
    "adam": (2, 12),
    "adamw": (2, 12),
    "adamax": (2, 12),
    "lion": (1, 12),
    "rmsprop": (1, 12),
    "adagrad": (1, 12),
    "adadelta": (2, 12),
    "adafactor": (0, 8),  # learning_rate=None (relative step): only `step`; factored moments below
}
MLX_PRECISIONS = {"fp32": 4, "bf16": 2, "fp16": 2}
_FLOATING = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def _state_bytes(optimizer: str, shape: tuple[int, ...], esize: int) -> int:
    if optimizer == "adafactor":
        return adafactor_numel(shape) * esize
    full, _ = MLX_OPTIMIZERS[optimizer]
    return full * math.prod(shape) * esize


def _tensor_rows(source: ModelSource, optimizer: str, precision: str) -> list[dict]:
    esize = MLX_PRECISIONS[precision]
    seen: set = set()
    per: dict[tuple[str, str], int] = {}
    for t in source.tensors:
        if t.shape is None:
            continue
        floating = t.dtype in _FLOATING
        size = t.numel * esize if floating else t.nbytes
        if t.storage_key not in seen:
            seen.add(t.storage_key)
            per[("parameters", t.module)] = per.get(("parameters", t.module), 0) + size
        # gradients and optimizer state follow the parameter tree: a tied array has them at each path
        if t.kind == PARAMETER and t.requires_grad and floating:
            per[("gradients", t.module)] = per.get(("gradients", t.module), 0) + size
            state = _state_bytes(optimizer, t.shape, esize)
            per[("optimizer_state", t.module)] = per.get(("optimizer_state", t.module), 0) + state
    rows = [{"component": c, "layer": layer, "bytes": n} for (c, layer), n in per.items()]
    if any(r["component"] == "optimizer_state" for r in rows):
        rows.append({"component": "optimizer_state", "layer": "", "bytes": MLX_OPTIMIZERS[optimizer][1]})
    return rows


def mlx_memory_plan(source: ModelSource, plan: PlanOptions) -> pd.DataFrame:
    """The memory one MLX training step needs (schema.MEMORY), as ``memory_plan`` for torch
    (mlx.optimizers' state, no autocast: its own tables, the same frame)."""
    optimizer, precision, batch_size = plan.optimizer, plan.precision, plan.batch_size
    if plan.grad_checkpointing or plan.master_weights:
        raise ValueError("grad_checkpointing and master_weights are planned for torch models only")
    if optimizer not in MLX_OPTIMIZERS:
        raise ValueError(f"unknown MLX optimizer {optimizer!r}; choose one of {sorted(MLX_OPTIMIZERS)}")
    if precision not in MLX_PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one MLX trains in; choose one of {list(MLX_PRECISIONS)}")
    rows = _tensor_rows(source, optimizer, precision)
    said = notes(
        plan, "MLX models have no buffers", "one per trainable parameter path",
        f"mlx.optimizers {optimizer} state, step and learning rate",
    )  # fmt: skip
    inputs, per_input = None, None
    if plan.input is not None:
        dtypes = {t.dtype for t in source.tensors if t.dtype in _FLOATING}
        if dtypes and {_FLOATING[d] for d in dtypes} != {MLX_PRECISIONS[precision]}:
            raise ValueError(
                f"precision {precision!r} but the MLX model's parameters are {', '.join(sorted(dtypes))}: "
                "MLX has no autocast, so cast the model first (model.set_dtype(...)) to measure its activations"
            )
        args, kwargs = split_input(plan.input)
        result = run_mlx_trace(
            source.model, args, kwargs, input_dtype=plan.input_dtype, training=True, batch_size=batch_size
        )
        for c in result.calls:
            if c.own_activation_bytes:
                rows.append({"component": "activations", "layer": c.name, "bytes": c.own_activation_bytes})
        batch = f" at batch {batch_size}" if batch_size else ""
        measured = result.totals["measured_active_bytes"], result.totals["measured_peak_bytes"]
        said["activations"] = (
            f"output arrays of every call{batch}, training mode; MLX measured {measured[0]:,} bytes active "
            f"after the pass (temporaries inside layers included), peak {measured[1]:,}"
        )
        said["inputs"] = f"input arrays{batch}"
        inputs = result.totals["input_bytes"]
        per_input = input_rows(result.inputs, lambda name: mlx_dtype(name).size, 1.0)
    return memory_frame(rows, said, inputs, source, per_input)


def device_memory() -> dict[str, int]:
    """MLX's allocator now: active, peak and cache bytes (``mx.get_active_memory`` & co.)."""
    import mlx.core as mx

    return {
        "mlx_active_bytes": int(mx.get_active_memory()),
        "mlx_peak_bytes": int(mx.get_peak_memory()),
        "mlx_cache_bytes": int(mx.get_cache_memory()),
    }


def reset_peak_memory() -> None:
    import mlx.core as mx

    mx.reset_peak_memory()


def on_device(device: Any) -> Any:
    """A context running MLX work on `device` (an ``mx.Device``, ``mx.DeviceType`` or
    ``"cpu"``/``"gpu"``); None: the default device. One ValueError for a device this MLX lacks."""
    import contextlib

    import mlx.core as mx

    if device is None:
        return contextlib.nullcontext()
    if isinstance(device, str):
        kinds = {"cpu": mx.cpu, "gpu": mx.gpu}
        if device.lower() not in kinds:
            raise ValueError(f"summary: device {device!r}: expected 'cpu', 'gpu' or an mx.Device")
        device = kinds[device.lower()]
    try:
        return mx.stream(device)
    except Exception as exc:
        raise ValueError(f"summary: device {device!r} is not available in this MLX build ({exc})") from None
