"""Training-memory planner: what one training step holds, component by component.

Parameters, buffers, gradients and optimizer state are exact arithmetic over the model's
unique tensors and the state each ``torch.optim`` optimizer really allocates (e.g. Adam:
``exp_avg`` and ``exp_avg_sq`` shaped like the parameter, plus a 0-dim float32 ``step``
per parameter tensor). Activations are measured, not guessed: the forward pass runs on
fake tensors at the planned batch size, precision and train mode, and every tensor
autograd saves for backward is counted once per storage (see :mod:`.activations`).

Left out, because no trace can see them: the allocator's caching and fragmentation,
kernel workspaces (cuBLAS, cuDNN, attention), temporaries that live only inside one op or
only during backward, the CUDA context, and anything a data loader holds.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from torch import nn

from ...core.gc_pause import gc_paused
from ...core.inputs import map_inputs, split_input
from ...core.memory import PlanOptions, adafactor_numel, input_rows, memory_frame, notes
from ...core.source import ModelSource
from ...dtypes import parse_dtype
from ...errors import TraceError
from ...schema import PARAMETER
from .trace import run_trace

__all__ = ["OPTIMIZERS", "PRECISIONS", "memory_plan"]

# name -> (state tensors shaped like the parameter, 0-dim float32 scalars per parameter tensor)
OPTIMIZERS: dict[str, tuple[int, int]] = {
    "sgd": (0, 0),
    "sgd-momentum": (1, 0),
    "adam": (2, 1),
    "adamw": (2, 1),
    "adam-amsgrad": (3, 1),
    "adamax": (2, 1),
    "nadam": (2, 2),  # step and mu_product
    "radam": (2, 1),
    "adadelta": (2, 1),
    "rmsprop": (1, 1),
    "adagrad": (1, 1),
    "adafactor": (0, 1),  # factored second moment, sized below
}

# name -> (parameter/gradient/state dtype, autocast dtype)
PRECISIONS: dict[str, tuple[torch.dtype, torch.dtype | None]] = {
    "fp32": (torch.float32, None),
    "bf16": (torch.bfloat16, None),
    "fp16": (torch.float16, None),
    "amp-bf16": (torch.float32, torch.bfloat16),
    "amp-fp16": (torch.float32, torch.float16),
}


def _scalar_bytes() -> int:
    # torch.optim keeps `step` as a 0-dim tensor of float32 (float64 if that is the default)
    return 8 if torch.get_default_dtype() == torch.float64 else 4


def _state_bytes(optimizer: str, shape: tuple[int, ...], esize: int) -> int:
    full, scalars = OPTIMIZERS[optimizer]
    out = full * math.prod(shape) * esize + scalars * _scalar_bytes()
    if optimizer == "adafactor":
        out += adafactor_numel(shape) * esize
    return out


def _check(optimizer: str, precision: str, master_weights: bool) -> None:
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZERS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose one of {list(PRECISIONS)}")
    if master_weights and precision not in ("bf16", "fp16"):
        raise ValueError(f"master_weights=True keeps fp32 copies of bf16/fp16 parameters; precision is {precision!r}")


def _tensor_rows(source: ModelSource, optimizer: str, precision: str, master_weights: bool) -> list[dict]:
    """Per-module rows for parameters, buffers, gradients and optimizer state."""
    dtype = PRECISIONS[precision][0]
    esize = torch.empty((), dtype=dtype).element_size()
    state_esize = 4 if master_weights else esize
    per: dict[tuple[str, str], int] = {}

    def add(component: str, layer: str, n: int) -> None:
        per[(component, layer)] = per.get((component, layer), 0) + n

    for t in source.unique_tensors().values():
        if t.shape is None:
            continue
        floating = parse_dtype(t.dtype).is_floating_point
        size = t.numel * esize if floating else t.nbytes
        if t.kind != PARAMETER:
            add("buffers", t.module, size)
            continue
        add("parameters", t.module, size)
        if t.requires_grad and floating:
            add("gradients", t.module, size)
            state = _state_bytes(optimizer, t.shape, state_esize) + (t.numel * 4 if master_weights else 0)
            add("optimizer_state", t.module, state)
    return [{"component": c, "layer": layer, "bytes": n} for (c, layer), n in per.items()]


def _blocks(model: nn.Module) -> list[str]:
    """Paths of the children of the longest nn.ModuleList: the blocks gradient checkpointing wraps."""
    best: tuple[int, str] = (1, "")
    for path, m in model.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) > best[0]:
            best = (len(m), path)
    if best[1] == "":
        raise ValueError(
            f"grad_checkpointing=True needs repeated blocks in an nn.ModuleList (as transformers models have); "
            f"{type(model).__name__} has none"
        )
    return [f"{best[1]}.{name}" for name in model.get_submodule(best[1])._modules]


def _activation_rows(flow: list, scale: float, checkpoint_blocks: list[str] | None) -> list[dict]:
    per: dict[str, int] = {}
    for c in flow:
        per[c.name] = per.get(c.name, 0) + c.own_activation_bytes
    if checkpoint_blocks:

        def block_of(name: str) -> str | None:
            return next((b for b in checkpoint_blocks if name == b or name.startswith(b + ".")), None)

        kept = {name: n for name, n in per.items() if block_of(name) is None}
        inside: dict[str, int] = {}  # full activations of each block, recomputed in backward
        for c in flow:
            block = block_of(c.name)
            if block is not None:
                inside[block] = inside.get(block, 0) + c.own_activation_bytes
                if c.name == block:
                    kept[block] = kept.get(block, 0) + c.input_bytes  # checkpoint saves the block inputs
        if inside:
            peak = max(inside, key=lambda block: inside[block])
            kept[peak] = kept.get(peak, 0) + inside[peak]
        per = kept
    return [{"component": "activations", "layer": name, "bytes": round(n * scale)} for name, n in per.items() if n]


def _trace(model, args, kwargs, batch_size, precision, input_dtype):
    """The trace on fake tensors at `batch_size`; failing that (data-dependent code), a real
    one at the given batch, scaled. Returns (result, scale, how)."""
    dtype, autocast = PRECISIONS[precision]
    # the plan needs only what autograd saves: no FLOP counting, no dataflow
    options = {"training": True, "input_dtype": input_dtype, "autocast_dtype": autocast, "flops": False, "graph": False}
    if autocast is None:  # training in `precision` feeds the model floating inputs of that dtype
        args, kwargs = map_inputs((args, kwargs), lambda t: t.to(dtype) if t.is_floating_point() else t, tuple)
    try:
        result = run_trace(model, args, kwargs, fake=True, param_dtype=dtype, batch_size=batch_size, **options)
        return result, 1.0, "measured on fake tensors"
    except TraceError as fake_error:
        floating = [p for p in model.parameters() if p.is_floating_point()]
        if any(p.is_meta or p.dtype != dtype for p in floating):
            raise  # a real run would need the weights present and cast: nothing honest to fall back to
        try:
            result = run_trace(model, args, kwargs, fake=False, **options)
        except TraceError:
            raise fake_error from None
    given = next((r["shape"][0] for r in result.inputs if r.get("shape")), None)
    if batch_size is None or not given:
        return result, 1.0, "measured"
    return result, batch_size / given, f"measured at batch {given}, scaled to {batch_size}"


@gc_paused()
def memory_plan(source: ModelSource, plan: PlanOptions) -> pd.DataFrame:
    """The memory one training step needs (schema.MEMORY): whole-model rows, then rows per module."""
    optimizer, precision, master_weights = plan.optimizer, plan.precision, plan.master_weights
    batch_size, input_dtype = plan.batch_size, plan.input_dtype
    _check(optimizer, precision, master_weights)
    model = source.model
    rows = _tensor_rows(source, optimizer, precision, master_weights)
    master = " + fp32 master weights" if master_weights else ""
    said = notes(
        plan, "unique buffers, floating ones in the parameter dtype", "one per trainable parameter",
        f"torch.optim {optimizer} state{master}",
    )  # fmt: skip
    inputs, per_input = None, None
    if plan.input is not None:
        args, kwargs = split_input(plan.input)
        result, scale, how = _trace(model, args, kwargs, batch_size, precision, input_dtype)
        blocks = _blocks(model) if plan.grad_checkpointing else None
        rows += _activation_rows(result.calls, scale, blocks)
        batch = f" at batch {batch_size}" if batch_size else ""
        said["activations"] = f"saved for backward{batch}, {how}" + (", gradient checkpointing" if blocks else "")
        said["inputs"] = f"input tensors{batch}"
        inputs = round(result.totals["input_bytes"] * scale)
        per_input = input_rows(result.inputs, lambda name: parse_dtype(name).itemsize, scale)
    return memory_frame(rows, said, inputs, source, per_input)
