"""The plugin interface: a :class:`MetricComputer` turns one delta into named numbers.

A computer is stateless: ``compute(delta, snapshot, context)`` reads the delta (W_new −
W_old, with its statistics), the snapshot it started from and the :class:`AnalysisContext`
(the model, the inputs, the optimizer and the step), and returns a flat ``{key: float}``.
Keys are ``"<family>/<what>"``; thresholds are written as Python's ``f"{t:g}"``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .delta import ParameterDelta
from .snapshot import ParameterSnapshot

__all__ = ["AnalysisContext", "MetricComputer", "at", "module_key"]


@dataclass(frozen=True)
class AnalysisContext:
    """What a metric may look at besides the delta. `inputs` is what the model is called
    with (a tensor, a tuple of positional arguments or a dict of keyword arguments)."""

    model: nn.Module
    step: int
    inputs: Any = None
    optimizer: torch.optim.Optimizer | None = None


class MetricComputer(ABC):
    """Base class of the metric plugins. Subclasses set `name` and implement compute()."""

    name: str = "metric"

    @abstractmethod
    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        """The metrics of this measurement, as a flat dict of floats."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def at(threshold: float) -> str:
    """The key suffix of a threshold: ``at(1e-6) == "at_1e-06"`` (Python's ``:g``)."""
    return f"at_{threshold:g}"


def module_key(path: str) -> str:
    """A module path as it appears inside a key: the root module is ``(root)``."""
    return path or "(root)"
