"""How much the weights moved: :class:`ParameterChangeMetrics`.

Everything comes from the delta's statistics (mergeable Moments of the change and the
compare frame's counts above each threshold); no tensor is read again here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from ..analyze.compare import DEFAULT_THRESHOLDS
from .delta import ParameterDelta
from .metric import AnalysisContext, MetricComputer, at
from .snapshot import ParameterSnapshot

__all__ = ["KEY_ALIASES", "ParameterChangeMetrics", "reference_threshold"]

# Old key names (nbinspect before issue 26) -> the document's: `manager.plot()` and the
# views accept either spelling (a lookup alias, not a second column).
KEY_ALIASES = {"mean_abs": "mean_abs_delta"}


def reference_threshold(thresholds: Iterable[float]) -> float:
    """The threshold behind the per-group ``sparsity`` key: 1e-06 when measured, else the
    median of the configured thresholds."""
    ts = sorted(thresholds)
    for t in ts:
        if math.isclose(t, 1e-6, rel_tol=1e-9):
            return t
    return ts[(len(ts) - 1) // 2]


def _own_module(name: str) -> str:
    """The name of the module that owns a parameter, as the model names it (``q_proj``,
    ``gate_proj``, ``c_attn``); ``(root)`` for a parameter of the root module."""
    parts = name.split(".")
    return parts[-2] if len(parts) > 1 else "(root)"


class ParameterChangeMetrics(MetricComputer):
    """Global norms, mean, std, relative change and sparsity of the update; optionally the
    same per layer (``param_change/layer_N/{mean_abs_delta,sparsity,relative_change,
    sparsity_at_T}``) and per component: grouped by the owning module's own name as the
    document does (``param_change/component/q_proj/mean_abs_delta``, ``gate_proj``, ...)
    and by nbinspect's cross-architecture groups (``param_change/attn.q/...``, ``mlp.up``,
    ``embedding``, ``norm``, ``head``). ``sparsity`` is ``sparsity_at_T`` at the reference
    threshold (:func:`reference_threshold`: 1e-06 when measured, else the median)."""

    name = "param_change"

    def __init__(
        self, thresholds: Iterable[float] = DEFAULT_THRESHOLDS, per_layer: bool = False, components: bool = False
    ):
        self.delta_thresholds = tuple(sorted(float(t) for t in thresholds))
        self.per_layer = per_layer
        self.components = components

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        total = delta.total
        out = {
            "param_change/norm_l2": total.l2,
            "param_change/norm_l1": total.abs_sum,
            "param_change/norm_max": delta.max_abs,
            "param_change/mean": total.mean,
            "param_change/std": total.std,
            "param_change/relative_change": delta.rel_change,
        }
        for t in self.delta_thresholds:
            out[f"param_change/sparsity_{at(t)}"] = delta.sparsity(t)
            out[f"param_change/changed_ratio_{at(t)}"] = delta.changed_ratio(t)
        frame = delta.frame
        if self.per_layer:
            layers = {n: f"layer_{int(i)}" for n, i in zip(frame["name"], frame["layer"]) if not pd.isna(i)}
            rolled = delta.by_layer()
            rolled = rolled[rolled["layer"].notna()].assign(group=lambda f: "layer_" + f["layer"].astype(str))
            out.update(self._groups(delta, layers, rolled))
        if self.components:
            out.update(self._own_modules(delta))
            out.update(self._groups(delta, dict(zip(frame["name"], frame["component"])), delta.by_component()))
        return out

    def _own_modules(self, delta: ParameterDelta) -> dict[str, float]:
        """``param_change/component/<module name>/{mean_abs_delta,sparsity,relative_change}``:
        exact counts and float64 sums over the tensors of each group."""
        frame = delta.frame
        groups: dict[str, list[int]] = {}
        for i, name in enumerate(frame["name"]):
            groups.setdefault(_own_module(str(name)), []).append(i)
        moments = delta.group_moments({str(n): _own_module(str(n)) for n in frame["name"]})
        ref = delta._index(reference_threshold(self.delta_thresholds))
        norms = delta._old.norms_sq
        out = {}
        for group, rows in groups.items():
            m = moments.get(group)
            if m is None or not m.count:
                continue
            prefix = f"param_change/component/{group}"
            n = sum(int(frame["numel"].iat[i]) for i in rows)
            above = sum(round(frame["frac_above"].iat[i][ref] * int(frame["numel"].iat[i])) for i in rows)
            old = math.fsum(norms[str(frame["name"].iat[i])] for i in rows)
            change = math.sqrt(max(m.m2 + m.count * m.mean**2, 0.0))
            out[f"{prefix}/mean_abs_delta"] = m.abs_sum / m.count
            out[f"{prefix}/sparsity"] = (n - above) / n if n else 1.0
            out[f"{prefix}/relative_change"] = change / math.sqrt(old) if old else (0.0 if not change else math.inf)
        return out

    def _groups(self, delta: ParameterDelta, key: dict[str, str], rolled: pd.DataFrame) -> dict[str, float]:
        """mean |Δ| (from the merged Moments), relative change and sparsity (from the
        compare engine's roll-up) of each group."""
        moments = delta.group_moments(key)
        out = {}
        for row in rolled.itertuples(index=False):
            m = moments.get(row.group)
            if m is None or not m.count:
                continue
            prefix = f"param_change/{row.group}"
            out[f"{prefix}/mean_abs_delta"] = m.abs_sum / m.count
            out[f"{prefix}/relative_change"] = float(row.rel_change)
            n = int(row.numel)
            for t in self.delta_thresholds:
                above = round(row.frac_above[delta._index(t)] * n)  # back to the exact count
                out[f"{prefix}/sparsity_{at(t)}"] = (n - above) / n
            out[f"{prefix}/sparsity"] = out[f"{prefix}/sparsity_{at(reference_threshold(self.delta_thresholds))}"]
        return out
