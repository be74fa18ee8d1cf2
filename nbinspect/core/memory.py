"""The training-memory plan's frame (schema.MEMORY), whichever backend planned the rows, and
the optimizer-state sizes torch.optim and mlx.optimizers share."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..schema import MEMORY, MEMORY_COMPONENTS
from .source import ModelSource

__all__ = ["PlanOptions", "adafactor_numel", "input_rows", "memory_frame", "notes"]


@dataclass(frozen=True)
class PlanOptions:
    """What a training-memory plan is for (the keyword arguments of ``nbinspect.memory``)."""

    input: Any = None  # traced for the activations; None leaves them unmeasured
    batch_size: int | None = None  # the input's first dimension is resized to it
    optimizer: str = "adam"
    precision: str = "fp32"
    grad_checkpointing: bool = False
    master_weights: bool = False
    input_dtype: Any = None


_STORED = {"bf16": "bfloat16 (bf16)", "fp16": "float16 (fp16)"}  # fp32 and amp-*: float32 weights
_AUTOCAST = {"amp-bf16": "bfloat16", "amp-fp16": "float16"}


def stored_dtype(precision: str) -> str:
    """The dtype parameters, gradients and optimizer state are kept in under `precision`."""
    return _STORED.get(precision, "float32 (fp32)")


def notes(plan: PlanOptions, buffers: str, gradients: str, optimizer_state: str) -> dict[str, str]:
    """What each component counts (and in which dtype it is stored), before the activations
    are measured."""
    stored = stored_dtype(plan.precision)
    parameters = f"unique parameters stored in {stored}"
    if plan.precision in _AUTOCAST:
        parameters += f"; autocast runs matmuls in {_AUTOCAST[plan.precision]} (its casts count under activations)"
    missing = "not measured: no input to trace" + (f" (batch size {plan.batch_size:,})" if plan.batch_size else "")
    return {
        "parameters": parameters,
        "buffers": buffers,
        "gradients": f"{gradients}, in {stored}",
        "optimizer_state": optimizer_state,
        "activations": missing,
        "inputs": missing,
    }


def adafactor_numel(shape: tuple[int, ...]) -> int:
    """Elements of Adafactor's factored second moment for one parameter (torch.optim and
    mlx.optimizers alike): a row and a column factor for 2D+, the full shape below that."""
    if len(shape) >= 2:
        return math.prod(shape[:-1]) + math.prod(shape[:-2]) * shape[-1]
    return math.prod(shape)


def input_rows(records: list[dict], itemsize: Callable[[str], int], scale: float) -> list[dict[str, Any]]:
    """One 'inputs' row per tensor the model was called with (`records`: the trace's input
    records, path/shape/dtype), its bytes scaled to the planned batch like the whole row;
    none for a model called with one tensor (its row would repeat the whole one)."""
    rows: list[dict[str, Any]] = []
    if sum("shape" in r for r in records) < 2:
        return rows
    for r in records:
        if "shape" in r:
            n = round(math.prod(r["shape"]) * itemsize(r["dtype"]) * scale)
            shape = "×".join(str(d) for d in r["shape"]) or "scalar"
            rows.append({"component": "inputs", "input": r["path"], "bytes": n, "note": f"{shape} {r['dtype']}"})
    return rows


def memory_frame(
    rows: list[dict],
    notes: dict[str, str],
    inputs: int | None,
    source: ModelSource,
    per_input: list[dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """Whole-model rows (one per component, the `per_input` rows after 'inputs', then the
    total), then `rows` per layer in the source's module order; `notes` says what each
    component counts. With `per_input`, the whole 'inputs' row is their sum."""
    components = [c for c in MEMORY_COMPONENTS if c != "total"]
    if per_input and inputs is not None:
        inputs = sum(r["bytes"] for r in per_input)
    whole: list[dict[str, Any]] = []
    for c in components:
        n = inputs if c == "inputs" else sum(r["bytes"] for r in rows if r["component"] == c)
        whole.append({"component": c, "layer": None, "bytes": None if inputs is None and c == "activations" else n})
    total = sum(r["bytes"] or 0 for r in whole)
    notes["total"] = "one training step: the rows above added up" + (
        "" if inputs is not None else " (without activations and inputs)"
    )
    for r in whole:
        r["note"] = notes[r["component"]]
    whole += (per_input or []) if inputs is not None else []
    whole.append({"component": "total", "layer": None, "bytes": total, "note": notes["total"]})
    order = {m.name: i for i, m in enumerate(source.modules)}
    rows = sorted(rows, key=lambda r: (order.get(r["layer"], len(order)), components.index(r["component"])))
    for r in whole + rows:
        r["share"] = None if r["bytes"] is None or not total else 100.0 * r["bytes"] / total
    return MEMORY.build(whole + rows)
