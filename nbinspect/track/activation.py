"""Dead and saturated units: :class:`ActivationMetrics`.

One forward pass on the given inputs, watched by forward hooks on the activation modules
(removed however the pass ends), in eval mode inside :func:`.forward.preserved`: nothing
about the model changes. A unit is a feature of the output (the channel of a 4-D or 3-D
convolution output with channels first, the last dimension otherwise); it is *dead* when
it is never positive on any input of the batch. Bounded activations (Tanh, Sigmoid,
Hardtanh, ReLU6) are *saturated* where the output lies within 1% of the range of a bound.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .delta import ParameterDelta
from .forward import preserved, run
from .metric import AnalysisContext, MetricComputer, module_key
from .snapshot import ParameterSnapshot

__all__ = ["ActivationMetrics"]

_RECTIFIERS = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.ELU, nn.CELU, nn.SELU, nn.Mish, nn.Softplus)
_BOUNDED = (nn.Tanh, nn.Sigmoid, nn.Hardtanh, nn.Hardsigmoid)


def _bounds(module: nn.Module) -> tuple[float, float] | None:
    if isinstance(module, (nn.Sigmoid, nn.Hardsigmoid)):
        return 0.0, 1.0
    if isinstance(module, nn.Tanh):
        return -1.0, 1.0
    if isinstance(module, nn.Hardtanh):  # ReLU6 is a Hardtanh(0, 6)
        return float(module.min_val), float(module.max_val)
    return None


class _Watch:
    """Per module: the largest output of each unit over every call (rectifiers), and
    saturated counts (bounded activations)."""

    def __init__(self, bounds: tuple[float, float] | None):
        self.bounds = bounds
        self.unit_max: torch.Tensor | None = None
        self.saturated = 0
        self.elements = 0

    def add(self, x: torch.Tensor) -> None:
        """One call's output, units in the last dimension."""
        x = x.detach().float()
        per_unit = x.reshape(-1, x.shape[-1]).amax(0) if x.dim() else x.reshape(1)
        self.unit_max = per_unit if self.unit_max is None else torch.maximum(self.unit_max, per_unit)
        if self.bounds is not None:
            lo, hi = self.bounds
            margin = 0.01 * (hi - lo)
            self.saturated += int(((x <= lo + margin) | (x >= hi - margin)).sum())
            self.elements += x.numel()


class ActivationMetrics(MetricComputer):
    """``activation/dead_fraction`` (share of units of all activation modules that are
    dead), ``activation/saturated_fraction`` (share of bounded activations' outputs that
    are saturated) and per module ``activation/<module>/dead`` and ``.../saturated``.
    `channels_first` reads 3-D and 4-D outputs as (batch, channels, ...): set it for CNNs."""

    name = "activation"

    def __init__(self, channels_first: bool = False):
        self.channels_first = channels_first

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        model = context.model
        watches = {n: _Watch(_bounds(m)) for n, m in model.named_modules() if isinstance(m, _RECTIFIERS + _BOUNDED)}
        if not watches:
            return {}
        modules = dict(model.named_modules())
        handles = []
        try:
            for name, watch in watches.items():
                handles.append(modules[name].register_forward_hook(self._hook(watch)))
            with preserved(model):
                run(model, context.inputs)
        finally:
            for h in handles:
                h.remove()
        out: dict[str, float] = {}
        dead = units = saturated = elements = 0
        for name, w in watches.items():
            if w.unit_max is None:
                continue
            if w.bounds is None:  # a rectifier: dead units
                d = int((w.unit_max <= 0).sum())
                out[f"activation/{module_key(name)}/dead"] = d / w.unit_max.numel()
                dead, units = dead + d, units + w.unit_max.numel()
            elif w.elements:
                out[f"activation/{module_key(name)}/saturated"] = w.saturated / w.elements
                saturated, elements = saturated + w.saturated, elements + w.elements
        if units:
            out["activation/dead_fraction"] = dead / units
        if elements:
            out["activation/saturated_fraction"] = saturated / elements
        return out

    def _hook(self, watch: _Watch):
        channels_first = self.channels_first

        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.numel() == 0:
                return
            watch.add(output.movedim(1, -1) if channels_first and output.dim() in (3, 4) else output)

        return hook
