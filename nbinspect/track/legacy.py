"""The original framework's classes, as thin wrappers (migration aid): :class:`ParamChangeTracker`
and :class:`SparseQualityAnalyzer`.

The document's "Migration from Old Code" blocks run as written::

    tracker = ParamChangeTracker(measure_interval=100)
    if tracker.has_snapshot():
        metrics = tracker.compute_metrics(model)
    tracker.capture_snapshot(model)

Both warn ``DeprecationWarning`` once (per class): use :class:`ModelAnalysisManager`.
Unlike the manager's first call, ``compute_metrics`` measures against the snapshot at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from ..analyze.compare import DEFAULT_THRESHOLDS
from .change import ParameterChangeMetrics
from .delta import ParameterDelta
from .metric import AnalysisContext
from .snapshot import ParameterSnapshot
from .sparse import SparseQualityMetrics

__all__ = ["ParamChangeTracker", "SparseQualityAnalyzer"]

_warned: set[str] = set()


def _deprecated(name: str) -> None:
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"nbinspect.track.{name} is the original framework's API, kept for migration: "
            "use ModelAnalysisManager.create(AnalysisConfig(...)).on_optimizer_step(model, inputs=...)",
            DeprecationWarning,
            stacklevel=3,
        )


class ParamChangeTracker:
    """Keeps one snapshot and measures ``param_change/*`` against it on request."""

    def __init__(self, measure_interval: int = 100, thresholds: Iterable[float] = DEFAULT_THRESHOLDS):
        _deprecated("ParamChangeTracker")
        self.measure_interval = int(measure_interval)
        self.thresholds = tuple(sorted(float(t) for t in thresholds))
        self.snapshot: ParameterSnapshot | None = None
        self.step = 0

    def has_snapshot(self) -> bool:
        return self.snapshot is not None

    def capture_snapshot(self, model: nn.Module) -> ParameterSnapshot:
        self.snapshot = ParameterSnapshot.take(model, self.step)
        return self.snapshot

    def delta(self, model: nn.Module) -> ParameterDelta:
        if self.snapshot is None:
            raise ValueError("ParamChangeTracker: no snapshot yet: call capture_snapshot(model) first")
        return ParameterDelta.between(self.snapshot, model, self.step, self.thresholds)

    def compute_metrics(self, model: nn.Module) -> dict[str, float]:
        """The ``param_change/*`` keys of the change since the snapshot ({} without one)."""
        if self.snapshot is None:
            return {}
        self.step += 1
        metric = ParameterChangeMetrics(self.thresholds)
        return metric.compute(self.delta(model), self.snapshot, AnalysisContext(model, self.step))


class SparseQualityAnalyzer:
    """``sparse/*`` keys of the change since `tracker`'s snapshot ({} when disabled or
    without a snapshot)."""

    def __init__(self, tracker: ParamChangeTracker, enabled: bool = True, thresholds: Iterable[float] | None = None):
        _deprecated("SparseQualityAnalyzer")
        self.tracker = tracker
        self.enabled = bool(enabled)
        self.metric = SparseQualityMetrics(tracker.thresholds if thresholds is None else thresholds)

    def analyze(
        self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any
    ) -> dict[str, float]:
        if not self.enabled or not self.tracker.has_snapshot():
            return {}
        inputs: Any = input_ids  # the model called on the ids alone, or with keywords
        if attention_mask is not None or kwargs:
            inputs = {"input_ids": input_ids, **kwargs}
            if attention_mask is not None:
                inputs["attention_mask"] = attention_mask
        snapshot = self.tracker.snapshot
        assert snapshot is not None
        context = AnalysisContext(model, self.tracker.step, inputs)
        return self.metric.compute(self.tracker.delta(model), snapshot, context)
