"""How much the weights moved: :class:`ParameterChangeMetrics`.

Everything comes from the delta's statistics (mergeable Moments of the change and the
compare frame's counts above each threshold); no tensor is read again here.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..analyze.compare import DEFAULT_THRESHOLDS
from .delta import ParameterDelta
from .metric import AnalysisContext, MetricComputer, at
from .snapshot import ParameterSnapshot

__all__ = ["ParameterChangeMetrics"]


class ParameterChangeMetrics(MetricComputer):
    """Global norms, mean, std, relative change and sparsity of the update; optionally the
    same per layer (``param_change/layer_N/...``) and per component
    (``param_change/attn.q/...``, ``mlp.up``, ``embedding``, ``norm``, ``head``, ...)."""

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
            out.update(self._groups(delta, dict(zip(frame["name"], frame["component"])), delta.by_component()))
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
            out[f"{prefix}/mean_abs"] = m.abs_sum / m.count
            out[f"{prefix}/relative_change"] = float(row.rel_change)
            n = int(row.numel)
            for t in self.delta_thresholds:
                above = round(row.frac_above[delta._index(t)] * n)  # back to the exact count
                out[f"{prefix}/sparsity_{at(t)}"] = (n - above) / n
        return out
