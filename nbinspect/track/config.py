"""What to measure while a model trains, and how often: :class:`AnalysisConfig`.

The field names are those of the original training-dynamics framework, so existing
configs carry over; the flags for gradients, optimizer state and activations are new.
Every value is checked when the config is made: a bad one is one clear error there, not a
failure hundreds of steps into training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from ..analyze.compare import DEFAULT_THRESHOLDS

__all__ = ["DEFAULT_THRESHOLDS", "SNAPSHOT_DTYPES", "AnalysisConfig"]

SNAPSHOT_DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def _thresholds(field: str, value: Any) -> tuple[float, ...]:
    try:
        values = tuple(float(t) for t in ([value] if isinstance(value, (int, float)) else value))
    except (TypeError, ValueError):
        raise ValueError(f"AnalysisConfig.{field}: need a list of numbers, got {value!r}") from None
    bad = [t for t in values if not (math.isfinite(t) and t >= 0)]
    if bad or not values:
        raise ValueError(f"AnalysisConfig.{field}: thresholds must be finite and >= 0, got {list(values)}")
    return tuple(sorted(set(values)))


@dataclass(frozen=True)
class AnalysisConfig:
    """Which metrics run, every how many optimizer steps, and how snapshots are kept."""

    interval: int = 100  # measure every `interval` optimizer steps
    snapshot_device: str = "cpu"  # where the copy of the weights lives
    snapshot_dtype: str = "float32"  # float16 / bfloat16 halve the snapshot's memory
    param_change_enabled: bool = True
    param_change_thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    param_change_per_layer: bool = False  # param_change/layer_N/...
    param_change_track_components: bool = False  # param_change/attn.q/..., mlp.up, norm, ...
    sparse_quality_enabled: bool = True  # needs `inputs` at on_optimizer_step (skipped, said once, without)
    sparse_quality_thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    sparse_quality_include_random: bool = True  # the same at equal sparsity with a random mask
    sparse_quality_seed: int = 0  # seed of the random masks (a private generator)
    gradient_enabled: bool = False  # gradient norms and update-to-weight ratios
    gradient_per_module: bool = True
    optimizer_state_enabled: bool = False  # Adam moments and effective step size (needs `optimizer`)
    momentum_enabled: bool = False  # the original framework's name for optimizer-state metrics
    activation_enabled: bool = False  # dead and saturated units (needs `inputs`)

    def __post_init__(self) -> None:
        if isinstance(self.interval, bool) or not isinstance(self.interval, int) or self.interval < 1:
            raise ValueError(f"AnalysisConfig.interval: need a positive whole number of steps, got {self.interval!r}")
        dtype = self.snapshot_dtype
        if isinstance(dtype, torch.dtype):
            dtype = str(dtype).removeprefix("torch.")
        if dtype not in SNAPSHOT_DTYPES:
            raise ValueError(
                f"AnalysisConfig.snapshot_dtype: unknown dtype {self.snapshot_dtype!r}, "
                f"choose one of {list(SNAPSHOT_DTYPES)}"
            )
        object.__setattr__(self, "snapshot_dtype", dtype)
        try:
            device = torch.device(self.snapshot_device)
        except (RuntimeError, TypeError):
            raise ValueError(f"AnalysisConfig.snapshot_device: not a device: {self.snapshot_device!r}") from None
        object.__setattr__(self, "snapshot_device", str(device))
        for name in ("param_change_thresholds", "sparse_quality_thresholds"):
            object.__setattr__(self, name, _thresholds(name, getattr(self, name)))
        for f in fields(self):
            if f.type == "bool" and not isinstance(getattr(self, f.name), bool):
                raise ValueError(f"AnalysisConfig.{f.name}: need True or False, got {getattr(self, f.name)!r}")

    @property
    def dtype(self) -> torch.dtype:
        return SNAPSHOT_DTYPES[self.snapshot_dtype]

    @classmethod
    def minimal(cls, **overrides: Any) -> AnalysisConfig:
        """Parameter-change metrics only, every 1,000 steps: costs next to nothing."""
        return replace(cls(interval=1000, sparse_quality_enabled=False), **overrides)

    @classmethod
    def comprehensive(cls, **overrides: Any) -> AnalysisConfig:
        """Every built-in metric with all breakdowns, every 10 steps."""
        everything = cls(
            interval=10,
            param_change_per_layer=True,
            param_change_track_components=True,
            sparse_quality_enabled=True,
            gradient_enabled=True,
            optimizer_state_enabled=True,
            activation_enabled=True,
        )
        return replace(everything, **overrides)
