"""PyTorch: ``nn.Module`` trees, torch's hooks and dispatch modes (the first backend; the
others reuse its tensor handling where their values are torch tensors)."""

from __future__ import annotations

from typing import Any

from .memory import memory_plan
from .source import from_module, read_region
from .trace import run_trace
from .values import plane_bands, value_state
from .watch import watch

__all__ = ["BACKEND"]


def _is_module(obj: Any) -> bool:
    import torch.nn as nn  # torch is nbinspect's one required framework

    return isinstance(obj, nn.Module)


def _zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    return shape  # the trace builds zeros of a shape itself, on the model's device


class TorchBackend:
    name = "torch"
    recognizes = staticmethod(_is_module)
    source = staticmethod(from_module)
    trace = staticmethod(run_trace)
    watch = staticmethod(watch)
    plan_memory = staticmethod(memory_plan)
    read_region = staticmethod(read_region)
    value_state = staticmethod(value_state)
    plane_bands = staticmethod(plane_bands)
    zeros = staticmethod(_zeros)


BACKEND = TorchBackend()
