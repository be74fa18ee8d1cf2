"""Learning-rate diagnostics: :class:`GradientMetrics` and :class:`OptimizerStateMetrics`.

The update-to-weight ratio ‖Δ‖/‖W‖ per module is the classic check of a learning rate
(around 1e-3 per step is healthy for Adam-trained networks; far below, a part is not
learning; far above, it is thrashing). Gradients are read where the optimizer left them
(``p.grad`` at the optimizer step); Adam's state is read, never changed.
"""

from __future__ import annotations

import math

import torch

from ..core.source import parent_path
from .delta import ParameterDelta
from .metric import AnalysisContext, MetricComputer, module_key
from .snapshot import ParameterSnapshot, trainable_parameters

__all__ = ["GradientMetrics", "OptimizerStateMetrics"]


def _sum_sq(t: torch.Tensor) -> float:
    t = t.detach().reshape(-1)
    t = t if t.dtype in (torch.float32, torch.float64) else t.float()
    return float(torch.dot(t, t))


class GradientMetrics(MetricComputer):
    """``gradient/norm`` (global L2 of the gradients), ``gradient/nonfinite`` (NaN/Inf
    elements), ``gradient/update_ratio`` (‖Δ‖/‖W‖ over the model) and, per module that holds
    parameters, ``gradient/<module>/norm`` and ``gradient/<module>/update_ratio``."""

    name = "gradient"

    def __init__(self, per_module: bool = True):
        self.per_module = per_module

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        grad_sq: dict[str, float] = {}
        nonfinite = 0
        for name, p in trainable_parameters(context.model):
            if p.grad is None:
                continue
            g = p.grad.detach()
            sq = _sum_sq(g)
            if not math.isfinite(sq):
                nonfinite += int((~torch.isfinite(g)).sum())
            module = parent_path(name) or ""
            grad_sq[module] = grad_sq.get(module, 0.0) + sq
        out = {"gradient/update_ratio": delta.rel_change}
        if grad_sq:
            out["gradient/norm"] = math.sqrt(math.fsum(grad_sq.values()))
            out["gradient/nonfinite"] = float(nonfinite)
        if self.per_module:
            for module, sq in grad_sq.items():
                out[f"gradient/{module_key(module)}/norm"] = math.sqrt(sq)
            frame = delta.frame
            moved: dict[str, list[float]] = {}
            for module, l2_a, l2_d in zip(frame["module"], frame["l2_a"], frame["l2_delta"]):
                pair = moved.setdefault(module, [0.0, 0.0])
                pair[0] += l2_a**2
                pair[1] += l2_d**2
            for module, (w, d) in moved.items():
                out[f"gradient/{module_key(module)}/update_ratio"] = math.sqrt(d / w) if w > 0 else math.inf
        return out


class OptimizerStateMetrics(MetricComputer):
    """For Adam-family optimizers (state ``exp_avg``/``exp_avg_sq``): the norms of the first
    and second moments and the effective step size, the root mean square of the step Adam
    takes, lr·m̂/(√v̂ + ε) with bias correction; over the model (``optimizer/...``) and per
    module (``optimizer/<module>/...``). Without an optimizer, or without Adam state, it
    reports nothing."""

    name = "optimizer"

    def __init__(self, per_module: bool = True):
        self.per_module = per_module

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        optimizer = context.optimizer
        if optimizer is None:
            return {}
        names = {id(p): n for n, p in context.model.named_parameters()}
        sums: dict[str, list[float]] = {}  # module -> [‖m‖², ‖v‖², ‖step‖², elements]
        with torch.no_grad():
            for group in optimizer.param_groups:
                lr, eps = float(group.get("lr", 0.0)), float(group.get("eps", 1e-8))
                beta1, beta2 = group.get("betas", (0.9, 0.999))
                for p in group["params"]:
                    state = optimizer.state.get(p, {})
                    if "exp_avg" not in state or "exp_avg_sq" not in state:
                        continue
                    m, v = state["exp_avg"].double(), state["exp_avg_sq"].double()
                    t = float(state.get("step", 1))
                    # torch.optim.Adam: p -= lr / (1 - β1^t) * m / (√v / √(1 - β2^t) + ε)
                    step = (lr / (1 - beta1**t)) * m / (v.sqrt() / math.sqrt(1 - beta2**t) + eps)
                    part = sums.setdefault(parent_path(names.get(id(p), "")) or "", [0.0, 0.0, 0.0, 0])
                    part[0] += float(m.pow(2).sum())
                    part[1] += float(v.pow(2).sum())
                    part[2] += float(step.pow(2).sum())
                    part[3] += m.numel()
        if not sums:
            return {}
        out = {}
        for prefix, (m_sq, v_sq, step_sq, n) in [("optimizer", [sum(c) for c in zip(*sums.values())])] + (
            [(f"optimizer/{module_key(k)}", s) for k, s in sums.items()] if self.per_module else []
        ):
            out[f"{prefix}/exp_avg_norm"] = math.sqrt(m_sq)
            out[f"{prefix}/exp_avg_sq_norm"] = math.sqrt(v_sq)
            out[f"{prefix}/step_size"] = math.sqrt(step_sq / n) if n else 0.0
        return out
