"""The plugin interface: a :class:`MetricComputer` turns one delta into named numbers.

A computer is stateless: ``compute(delta, snapshot, context)`` reads the delta (W_new −
W_old, with its statistics), the snapshot it started from and the :class:`AnalysisContext`
(the model, the inputs, the optimizer and the step), and returns a flat ``{key: float}``.
Keys are ``"<family>/<what>"``; thresholds are written as Python's ``f"{t:g}"``.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from .delta import ParameterDelta
from .snapshot import ParameterSnapshot

__all__ = ["AnalysisContext", "MetricComputer", "at", "call_compute", "module_key"]


@dataclass(frozen=True)
class AnalysisContext:
    """What a metric may look at besides the delta. `inputs` is what the model is called
    with (a tensor, a tuple of positional arguments or a dict of keyword arguments)."""

    model: nn.Module
    step: int
    inputs: Any = None
    optimizer: torch.optim.Optimizer | None = None


class MetricComputer(ABC):
    """Base class of the metric plugins. Subclasses set `name` and implement compute().

    The manager calls ``compute(delta=..., snapshot=..., context=...)`` with keywords, so a
    plugin may take only what it needs (``compute(self, delta, context, **kwargs)``,
    ``compute(self, **kwargs)``); a plugin whose parameters have other names is called
    positionally (see :func:`call_compute`). `needs_inputs` marks plugins that run the model
    on the measurement's `inputs`: without them (or with a wrong `inputs`) they are skipped."""

    name: str = "metric"
    needs_inputs: bool = False

    @abstractmethod
    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        """The metrics of this measurement, as a flat dict of floats."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_ARGUMENTS = ("delta", "snapshot", "context")


@functools.lru_cache(maxsize=256)
def _keywords(cls: Any) -> tuple[str, ...] | None:
    """The keywords `cls.compute` takes (all three when it takes ``**kwargs``), or None to
    call it positionally (a plugin whose parameters have other names)."""
    try:
        parameters = list(inspect.signature(cls.compute).parameters.values())[1:]  # without self
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return _ARGUMENTS
    named = tuple(
        p.name for p in parameters if p.name in _ARGUMENTS and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
    return named or None


def call_compute(
    metric: Any, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext
) -> dict[str, float]:
    """``metric.compute`` called as its signature asks: with keywords when it takes
    ``**kwargs`` or names any of delta/snapshot/context (only those it names), else
    positionally (delta, snapshot, context)."""
    values = {"delta": delta, "snapshot": snapshot, "context": context}
    names = _keywords(type(metric))  # type: ignore[arg-type]  # cached per class (classes hash)
    if names is None:
        return metric.compute(delta, snapshot, context)
    return metric.compute(**{n: values[n] for n in names})


def at(threshold: float) -> str:
    """The key suffix of a threshold: ``at(1e-6) == "at_1e-06"`` (Python's ``:g``)."""
    return f"at_{threshold:g}"


def module_key(path: str) -> str:
    """A module path as it appears inside a key: the root module is ``(root)``."""
    return path or "(root)"
