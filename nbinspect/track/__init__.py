"""Training dynamics: follow how a model's weights change while it trains.

>>> from nbinspect.track import AnalysisConfig, ModelAnalysisManager
>>> manager = ModelAnalysisManager.create(AnalysisConfig(interval=10))
>>> # in the loop, after optimizer.step():
>>> # manager.on_optimizer_step(model, inputs=batch, optimizer=optimizer)
>>> # manager.history, manager.plot(), manager.widget(), manager.to_json()

A :class:`ParameterSnapshot` is an immutable copy of the trainable weights at one step; a
:class:`ParameterDelta` is W_new − W_old, streamed tensor by tensor into the comparison
engine's frame and mergeable Moments. :class:`MetricComputer` plugins turn a delta into
named numbers (called with keywords: ``compute(self, delta, context, **kwargs)`` works);
:class:`ModelAnalysisManager` runs them every `interval` steps. Trainer
callbacks live in :mod:`nbinspect.track.integrations` (imported only when used).
"""

from __future__ import annotations

from .activation import ActivationMetrics
from .change import ParameterChangeMetrics
from .config import AnalysisConfig
from .delta import ArchitectureChanged, ParameterDelta
from .gradient import GradientMetrics, OptimizerStateMetrics
from .legacy import ParamChangeTracker, SparseQualityAnalyzer
from .manager import KEY_ALIASES, ModelAnalysisManager, TrackingWarning
from .metric import AnalysisContext, MetricComputer, call_compute
from .snapshot import ParameterSnapshot
from .sparse import SparseQualityMetrics

__all__ = [
    "KEY_ALIASES",
    "ActivationMetrics",
    "AnalysisConfig",
    "AnalysisContext",
    "ArchitectureChanged",
    "GradientMetrics",
    "MetricComputer",
    "ModelAnalysisManager",
    "OptimizerStateMetrics",
    "ParamChangeTracker",
    "ParameterChangeMetrics",
    "ParameterDelta",
    "ParameterSnapshot",
    "SparseQualityAnalyzer",
    "SparseQualityMetrics",
    "TrackingWarning",
    "call_compute",
]
