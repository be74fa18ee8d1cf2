"""Dead and saturated units: :class:`ActivationMetrics`.

One forward pass on the given inputs, watched by forward hooks on the activation modules
(removed however the pass ends), in eval mode inside :func:`.forward.preserved`: nothing
about the model changes. Watched are torch's activation classes and any module without
parameters whose class name says it is an element-wise activation (transformers'
``SiLUActivation``, ``GELUActivation``, ``NewGELUActivation``, ...).

Both figures are defined through the activation's derivative f′, taken with one
``torch.autograd.grad`` of the module on the input it was called with: an element is
*saturated* where |f′(x)| < 1e-2 (no gradient flows back through it), and a unit (a feature
of the output: the channel of a 3-D or 4-D output with channels first, the last dimension
otherwise) is *dead* when it is saturated on every input of the batch. For ReLU that is
"never positive"; for SiLU and GELU the flat negative tail; for tanh and sigmoid both tails.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn

from .delta import ParameterDelta
from .forward import preserved, run
from .metric import AnalysisContext, MetricComputer, module_key
from .snapshot import ParameterSnapshot

__all__ = ["SATURATED_BELOW", "ActivationMetrics", "is_activation"]

SATURATED_BELOW = 1e-2  # |f'(x)| below this: the element passes (almost) no gradient

_TORCH_ACTIVATIONS = (
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.GELU, nn.SiLU, nn.ELU, nn.CELU, nn.SELU, nn.Mish, nn.Softplus,
    nn.Tanh, nn.Sigmoid, nn.Hardtanh, nn.Hardsigmoid, nn.Hardswish, nn.Softsign, nn.Tanhshrink,
)  # fmt: skip
_NAMED = re.compile(r"(?i)(silu|swish|gelu|relu|elu|mish|softplus|tanh|sigmoid|activation)")


def is_activation(module: nn.Module) -> bool:
    """An element-wise activation: one of torch's, or a module without parameters whose
    class name says so."""
    if isinstance(module, _TORCH_ACTIVATIONS):
        return True
    return bool(_NAMED.search(type(module).__name__)) and next(module.parameters(recurse=True), None) is None


class _Watch:
    """Per module: whether each unit ever passed a gradient (|f′| ≥ 1e-2) over every call,
    and the saturated element count."""

    def __init__(self) -> None:
        self.alive: torch.Tensor | None = None
        self.saturated = 0
        self.elements = 0

    def add(self, saturated: torch.Tensor) -> None:
        """One call's saturation mask, units in the last dimension."""
        per_unit = (~saturated).reshape(-1, saturated.shape[-1]).any(0) if saturated.dim() else ~saturated.reshape(1)
        self.alive = per_unit if self.alive is None else self.alive | per_unit
        self.saturated += int(saturated.sum())
        self.elements += saturated.numel()


class ActivationMetrics(MetricComputer):
    """``activation/dead_fraction`` (share of units of all activation modules that are
    dead), ``activation/saturated_fraction`` (share of all activation outputs that are
    saturated) and per module ``activation/<module>/dead`` and ``.../saturated``.
    `channels_first` reads 3-D and 4-D outputs as (batch, channels, ...): set it for CNNs."""

    name = "activation"
    needs_inputs = True

    def __init__(self, channels_first: bool = False):
        self.channels_first = channels_first

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        model = context.model
        watches = {n: _Watch() for n, m in model.named_modules() if is_activation(m)}
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
            if w.alive is None or not w.elements:
                continue
            d = int((~w.alive).sum())
            out[f"activation/{module_key(name)}/dead"] = d / w.alive.numel()
            out[f"activation/{module_key(name)}/saturated"] = w.saturated / w.elements
            dead, units = dead + d, units + w.alive.numel()
            saturated, elements = saturated + w.saturated, elements + w.elements
        if units:
            out["activation/dead_fraction"] = dead / units
        if elements:
            out["activation/saturated_fraction"] = saturated / elements
        return out

    def _hook(self, watch: _Watch):
        channels_first = self.channels_first

        def hook(module: nn.Module, args: Any, output: Any) -> None:
            x = args[0] if args else None
            if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
                return
            if not isinstance(output, torch.Tensor) or output.shape != x.shape:
                return  # not element-wise
            with torch.enable_grad():
                x = x.detach().requires_grad_(True)
                # forward(), not the hooks again; a clone, as inplace=True would write into x
                (slope,) = torch.autograd.grad(module.forward(x.clone()).sum(), x)
            saturated = slope.detach().abs() < SATURATED_BELOW
            watch.add(saturated.movedim(1, -1) if channels_first and saturated.dim() in (3, 4) else saturated)

        return hook
