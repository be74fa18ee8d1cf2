"""Would a sparse update have done as well? :class:`SparseQualityMetrics`.

For each threshold T the model runs on the given inputs with W_old + (Δ where |Δ| > T),
and its outputs are compared with those of the full update (the model as it is): KL
divergence of the softmax of the logits (full ‖ sparse), cosine similarity, mean squared
error and top-1 agreement. The random baseline keeps as many elements of each tensor as
the magnitude mask does, chosen by a seeded private generator. The model's weights, modes,
gradients and RNG are left exactly as they were (see :mod:`.forward`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ..analyze.compare import DEFAULT_THRESHOLDS
from .delta import ParameterDelta
from .forward import logits, preserved, run
from .metric import AnalysisContext, MetricComputer, at
from .snapshot import ParameterSnapshot, trainable_parameters

__all__ = ["SparseQualityMetrics", "output_agreement"]


def output_agreement(full: torch.Tensor, other: torch.Tensor) -> dict[str, float]:
    """kl, cosine, mse and top1_agree of `other` against `full`, row by row over the last
    dimension (in float64), averaged over rows."""
    p = full.detach().double().reshape(-1, full.shape[-1] if full.dim() else 1)
    q = other.detach().double().reshape(p.shape)
    log_p, log_q = torch.log_softmax(p, -1), torch.log_softmax(q, -1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1).clamp_min(0.0).mean()
    cosine = torch.nn.functional.cosine_similarity(p, q, dim=-1, eps=1e-30).mean()
    return {
        "kl": float(kl),
        "cosine": float(cosine),
        "mse": float((p - q).pow(2).mean()),
        "top1_agree": float((p.argmax(-1) == q.argmax(-1)).double().mean()),
    }


class SparseQualityMetrics(MetricComputer):
    """``sparse/kl_at_T``, ``sparse/cosine_at_T``, ``sparse/mse_at_T``,
    ``sparse/top1_agree_at_T``, ``sparse/kept_ratio_at_T`` and, with `include_random`, the
    same with a random mask at equal sparsity (``..._random``), and
    ``sparse/unchanged_ratio_at_T`` (1 − kept ratio, the document's name). Needs `inputs`;
    holds one masked copy of the trainable parameters while it runs. Cost: 1 + 2·len(thresholds)
    forward passes with the random baseline (7 for 3 thresholds; the original document said 3)."""

    name = "sparse"
    needs_inputs = True

    def __init__(self, thresholds: Iterable[float] = DEFAULT_THRESHOLDS, include_random: bool = True, seed: int = 0):
        self.thresholds = tuple(sorted(float(t) for t in thresholds))
        self.include_random = include_random
        self.seed = seed

    def compute(self, delta: ParameterDelta, snapshot: ParameterSnapshot, context: AnalysisContext) -> dict[str, float]:
        model = context.model
        out: dict[str, float] = {}
        generator = torch.Generator().manual_seed(self.seed)
        with preserved(model):
            full = logits(run(model, context.inputs))
            live = dict(trainable_parameters(model))
            for t in self.thresholds:
                magnitude, random, kept, total = {}, {}, 0, 0
                for name, p in live.items():
                    old = snapshot.stored(name).view(p.shape).to(device=p.device, dtype=p.dtype)
                    mask = (p.float() - old.float()).abs_() > t
                    magnitude[name] = torch.where(mask, p, old)
                    k = int(mask.sum())
                    kept, total = kept + k, total + mask.numel()
                    if self.include_random:
                        pick = torch.zeros(mask.numel(), dtype=torch.bool)
                        pick[torch.randperm(mask.numel(), generator=generator)[:k]] = True
                        random[name] = torch.where(pick.view(mask.shape).to(p.device), p, old)
                suffix = at(t)
                out[f"sparse/kept_ratio_{suffix}"] = kept / total if total else 1.0
                out[f"sparse/unchanged_ratio_{suffix}"] = 1.0 - out[f"sparse/kept_ratio_{suffix}"]
                scores = output_agreement(full, logits(run(model, context.inputs, magnitude)))
                out.update({f"sparse/{k}_{suffix}": v for k, v in scores.items()})
                if self.include_random:
                    scores = output_agreement(full, logits(run(model, context.inputs, random)))
                    out.update({f"sparse/{k}_{suffix}_random": v for k, v in scores.items()})
        return out
