"""Weight health: NaN/Inf, dead (all-zero) and constant weight matrices, exploding or
vanishing scale; per tensor and rolled up per module, read off the stats frame."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

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
    module paths in pre-order. By whole columns: a model's tens of thousands of tensors and
    modules took a second row by row."""
    limits = thresholds or HealthThresholds()
    names, holders = stats["name"].tolist(), stats["module"].tolist()
    info = dict(zip(params["name"].tolist(), zip(params["shape"].tolist(), params["tied_to"].tolist())))
    shape_tied = [info.get(name, (None, None)) for name in names]
    ndim = np.array([-1 if shape is None else len(shape) for shape, _ in shape_tied], dtype=np.int64)
    # a tied path (tied_to names the first) holds the same elements again: counted once
    counted = np.array([not isinstance(tied, str) for _, tied in shape_tied], dtype=bool)
    read = stats["nan"].notna().to_numpy(dtype=bool)  # no values (meta, skipped): nothing to judge
    numel = stats["numel"].to_numpy(dtype=np.int64)
    nan, inf = (stats[c].to_numpy(dtype=np.int64, na_value=0) for c in ("nan", "inf"))
    zeros, std, low, high, abs_mean = (
        stats[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in ("zeros", "std", "min", "max", "abs_mean")
    )
    parameter = stats["kind"].to_numpy(dtype=object) == PARAMETER
    matrix = parameter & (ndim >= 2) & (numel > 0)
    measured = ~np.isnan(std)
    with np.errstate(invalid="ignore"):
        largest = np.where(measured, np.maximum(np.abs(low), np.abs(high)), 0.0)
        flags = (
            np.stack(  # in PROBLEMS order
                [
                    nan > 0,
                    inf > 0,
                    matrix & (zeros == 1.0),
                    matrix & measured & (std == 0) & (zeros < 1.0),
                    parameter & measured & (largest > limits.exploding),
                    matrix & measured & (abs_mean > 0) & (abs_mean < limits.vanishing),
                ]
            )
            & read
        )
    bits = (flags.astype(np.int64) << np.arange(len(PROBLEMS))[:, None]).sum(axis=0)

    tensor, module = _subtree_pairs(holders, counted, modules)
    known = read[tensor]

    def total(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        """Per module, `values` summed over its counted tensors (`where` they are true), in
        tensor order (as a running sum would add them)."""
        weights = values[tensor] if where is None else np.where(where, values[tensor], 0)
        return np.bincount(module, weights=weights, minlength=len(modules))

    def count(values: np.ndarray, where: np.ndarray | None = known) -> np.ndarray:
        return np.rint(total(values.astype(np.float64), where)).astype(np.int64)  # exact below 2**53

    has_values = count(np.ones(len(names))) > 0
    module_bits = sum((count((bits >> k) & 1) > 0).astype(np.int64) << k for k in range(len(PROBLEMS)))
    counted_numel = total(numel.astype(np.float64), known)
    with np.errstate(invalid="ignore", divide="ignore"):
        module_zeros = np.where(counted_numel > 0, total(zeros * numel, known) / counted_numel, np.nan)
    labels = _labels()
    n, m = len(names), len(modules)
    measured_rows = np.concatenate((read, has_values))
    columns = {
        "name": names + list(modules),
        "module": holders + list(modules),
        "kind": stats["kind"].tolist() + ["module"] * m,
        "numel": pd.array(np.concatenate((numel, count(numel, None))), dtype="Int64"),
        "nan": pd.arrays.IntegerArray(np.concatenate((nan, count(nan))), ~measured_rows),
        "inf": pd.arrays.IntegerArray(np.concatenate((inf, count(inf))), ~measured_rows),
        "zeros": np.where(measured_rows, np.concatenate((zeros, module_zeros)), np.nan),
        **{
            column: pd.arrays.BooleanArray(
                np.concatenate((flags[k], count(flags[k].astype(np.int64)) > 0)), ~measured_rows
            )
            for k, column in enumerate(("all_zero", "constant", "exploding", "vanishing"), start=2)
        },
        "problems": [labels[b] for b in np.concatenate((bits, module_bits)).tolist()],
        "problem_tensors": pd.array(
            np.concatenate(((bits != 0).astype(np.int64), count((bits != 0).astype(np.int64)))), dtype="Int64"
        ),
    }
    return HEALTH.from_columns(columns, n + m)


def _subtree_pairs(holders: list[str], counted: np.ndarray, modules: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(tensor row, module row) for each `counted` tensor and each of `modules` whose subtree
    holds it (its holder's path and every dotted prefix of it), in tensor order. Each
    distinct holder's ancestors are looked up once, then spread over its tensors by numpy."""
    at = {path: i for i, path in enumerate(modules)}
    rows = np.flatnonzero(counted)
    codes, paths = pd.factorize(np.asarray([holders[i] for i in rows], dtype=object))
    above = [[at[p] for p in ancestors(path) if p in at] for path in paths]
    sizes = np.array([len(a) for a in above], dtype=np.int64)
    flat = np.array([m for a in above for m in a], dtype=np.int64)
    first = np.cumsum(sizes) - sizes  # where each holder's ancestors start in `flat`
    repeat = sizes[codes]  # pairs per tensor
    tensor = np.repeat(rows, repeat)
    within = np.arange(len(tensor)) - np.repeat(np.cumsum(repeat) - repeat, repeat)
    return tensor, flat[np.repeat(first[codes], repeat) + within]


@functools.cache
def _labels() -> tuple[str, ...]:
    """The ``problems`` text of each combination of flags (bit k: PROBLEMS[k])."""
    return tuple(", ".join(p for k, p in enumerate(PROBLEMS) if bits >> k & 1) for bits in range(1 << len(PROBLEMS)))


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
