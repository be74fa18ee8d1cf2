"""The training-memory plan's frame (schema.MEMORY), whichever backend planned the rows, and
the optimizer-state sizes torch.optim and mlx.optimizers share."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..schema import MEMORY, MEMORY_COMPONENTS
from .source import ModelSource

__all__ = ["PlanOptions", "adafactor_numel", "memory_frame", "notes"]


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


def notes(plan: PlanOptions, buffers: str, gradients: str, optimizer_state: str) -> dict[str, str]:
    """What each component counts, before the activations are measured."""
    return {
        "parameters": f"unique parameters in {plan.precision}",
        "buffers": buffers,
        "gradients": gradients,
        "optimizer_state": optimizer_state,
        "activations": "not measured: no input to trace",
        "inputs": "not measured: no input to trace",
    }


def adafactor_numel(shape: tuple[int, ...]) -> int:
    """Elements of Adafactor's factored second moment for one parameter (torch.optim and
    mlx.optimizers alike): a row and a column factor for 2D+, the full shape below that."""
    if len(shape) >= 2:
        return math.prod(shape[:-1]) + math.prod(shape[:-2]) * shape[-1]
    return math.prod(shape)


def memory_frame(rows: list[dict], notes: dict[str, str], inputs: int | None, source: ModelSource) -> pd.DataFrame:
    """Whole-model rows (one per component, then the total), then `rows` per layer in the
    source's module order; `notes` says what each component counts."""
    components = [c for c in MEMORY_COMPONENTS if c != "total"]
    whole: list[dict[str, Any]] = []
    for c in components:
        n = inputs if c == "inputs" else sum(r["bytes"] for r in rows if r["component"] == c)
        whole.append({"component": c, "layer": None, "bytes": None if inputs is None and c == "activations" else n})
    total = sum(r["bytes"] or 0 for r in whole)
    whole.append({"component": "total", "layer": None, "bytes": total})
    notes["total"] = "one training step: the rows above added up" + (
        "" if inputs is not None else " (without activations and inputs)"
    )
    for r in whole:
        r["note"] = notes[r["component"]]
    order = {m.name: i for i, m in enumerate(source.modules)}
    rows = sorted(rows, key=lambda r: (order.get(r["layer"], len(order)), components.index(r["component"])))
    for r in whole + rows:
        r["share"] = None if r["bytes"] is None or not total else 100.0 * r["bytes"] / total
    return MEMORY.build(whole + rows)
