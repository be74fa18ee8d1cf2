"""Weight health: NaN/Inf, dead (all-zero) and constant weight matrices, exploding or
vanishing scale; per tensor and rolled up per module, read off the stats frame."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..backends import ancestors
from ..schema import HEALTH, PARAMETER

__all__ = ["PROBLEMS", "HealthThresholds", "health_frame", "problem_counts", "problem_tensors"]

# The problem labels, in the order they are listed.
PROBLEMS = ("NaN", "Inf", "all zero", "constant", "exploding", "vanishing")


@dataclass(frozen=True)
class HealthThresholds:
    """When a tensor's scale is a problem. Defaults suit weights initialised and trained in
    the usual ranges (|w| of order 1e-2 to 1): a value above ``exploding`` (largest |x|) or
    a weight matrix whose mean |x| is below ``vanishing`` is flagged."""

    exploding: float = 1e3
    vanishing: float = 1e-6

    def __post_init__(self) -> None:
        for name in ("exploding", "vanishing"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"HealthThresholds({name}={value!r}): need a positive number")


def health_frame(
    stats: pd.DataFrame,
    params: pd.DataFrame,
    modules: Sequence[str],
    thresholds: HealthThresholds | None = None,
) -> pd.DataFrame:
    """schema.HEALTH from a per-tensor stats frame, the params frame (shapes, ties) and the
    module paths in pre-order."""
    limits = thresholds or HealthThresholds()
    info = dict(zip(params["name"], zip(params["shape"], params["tied_to"])))  # a dict: .loc per row is slow
    rows: list[dict[str, Any]] = []
    subtree: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in modules}
    for r in stats.itertuples(index=False):
        shape, tied_to = info.get(r.name, (None, None))
        row = _tensor_row(r, shape, limits)
        rows.append(row)
        if pd.isna(tied_to):  # a tied path holds the same elements again: count them once
            for path in ancestors(r.module):
                subtree.setdefault(path, {})[r.name] = row
    rows += [_module_row(path, subtree[path]) for path in modules]
    return HEALTH.build(rows)


def _tensor_row(r: Any, shape: Any, limits: HealthThresholds) -> dict[str, Any]:
    row: dict[str, Any] = {"name": r.name, "module": r.module, "kind": r.kind, "numel": r.numel}
    if pd.isna(r.nan):  # no values (meta, skipped): nothing to judge
        return {**row, "problems": "", "problem_tensors": 0}
    matrix = r.kind == PARAMETER and shape is not None and len(shape) >= 2 and r.numel > 0
    measured = not pd.isna(r.std)
    largest = max(abs(r.min), abs(r.max)) if measured else 0.0
    flags = {
        "NaN": r.nan > 0,
        "Inf": r.inf > 0,
        "all zero": matrix and r.zeros == 1.0,
        "constant": matrix and measured and r.std == 0 and r.zeros < 1.0,
        "exploding": r.kind == PARAMETER and measured and largest > limits.exploding,
        "vanishing": matrix and measured and 0 < r.abs_mean < limits.vanishing,
    }
    problems = [label for label in PROBLEMS if flags[label]]
    return {
        **row,
        "nan": r.nan,
        "inf": r.inf,
        "zeros": r.zeros,
        "all_zero": flags["all zero"],
        "constant": flags["constant"],
        "exploding": flags["exploding"],
        "vanishing": flags["vanishing"],
        "problems": ", ".join(problems),
        "problem_tensors": int(bool(problems)),
    }


def _module_row(path: str, tensors: dict[str, dict[str, Any]]) -> dict[str, Any]:
    known = [t for t in tensors.values() if t.get("nan") is not None]
    numel = sum(int(t["numel"]) for t in tensors.values())
    labels = {label for t in known for label in t["problems"].split(", ") if label}
    row: dict[str, Any] = {
        "name": path,
        "module": path,
        "kind": "module",
        "numel": numel,
        "problems": ", ".join(label for label in PROBLEMS if label in labels),
        "problem_tensors": sum(int(t["problem_tensors"]) for t in known),
    }
    if not known:
        return row
    zeros = sum(float(t["zeros"]) * int(t["numel"]) for t in known)
    counted = sum(int(t["numel"]) for t in known)
    return {
        **row,
        "nan": sum(int(t["nan"]) for t in known),
        "inf": sum(int(t["inf"]) for t in known),
        "zeros": zeros / counted if counted else np.nan,
        **{flag: any(t[flag] for t in known) for flag in ("all_zero", "constant", "exploding", "vanishing")},
    }


def problem_tensors(health: pd.DataFrame, tied: Collection[str] = ()) -> pd.DataFrame:
    """The health rows of tensors with a problem; `tied` paths (the same elements at a second
    path) are left out, so each stored tensor is listed once."""
    return health[(health["kind"] != "module") & (health["problems"] != "") & ~health["name"].isin(list(tied))]


def problem_counts(health: pd.DataFrame, tied: Collection[str] = ()) -> dict[str, int]:
    """Distinct tensors with each problem, e.g. {"NaN": 2} reads "2 tensors with NaN";
    `tied` paths are not counted again. Problems no tensor has are left out."""
    counts: dict[str, int] = {}
    for problems in problem_tensors(health, tied)["problems"]:
        for label in str(problems).split(", "):
            counts[label] = counts.get(label, 0) + 1
    return {label: counts[label] for label in PROBLEMS if label in counts}
