"""Mixture-of-experts summaries: what a model routes, and what one token uses."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pandas as pd

from .analyze import structure
from .analyze.moe import expert_changes, expert_groups, moe_frame, moe_totals, split_experts
from .backends import as_source, on_receiving_rank
from .render.moe_text import moe_text
from .terminal import safe_lines, safe_text

__all__ = ["MixtureOfExperts", "expert_changes", "moe", "split_experts"]


class MixtureOfExperts:
    """The routed experts of one model: ``frame`` (schema.MOE, one row per MoE layer) and
    ``totals`` (total and activated parameters per token). ``print()`` it for text."""

    def __init__(self, name: str, frame: pd.DataFrame, totals: dict[str, Any]):
        self.name = name
        self.frame = frame
        self.totals = MappingProxyType(totals)

    def __str__(self) -> str:
        return safe_lines(moe_text(self.name, self.totals, self.frame))

    def __repr__(self) -> str:
        t = self.totals
        activated = "unknown" if t["activated_params"] is None else f"{t['activated_params']:,}"
        name = safe_text(self.name)
        return f"<MixtureOfExperts {name}: {t['total_params']:,} parameters, {activated} activated per token>"


@on_receiving_rank(0)
def moe(model: Any, top_k: int | None = None) -> MixtureOfExperts:
    """Routed experts and activated parameters per token of `model` (a module, a meta model
    built from a config, a checkpoint path or a source). `top_k` overrides the experts per
    token the model's routers or config say. A model without experts gives an empty frame."""
    source = as_source(model)
    groups = expert_groups(source, top_k)
    totals = moe_totals(structure.totals(source)["total_params"], groups)
    return MixtureOfExperts(source.name, moe_frame(groups), totals)
