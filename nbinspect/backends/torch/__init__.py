"""PyTorch: ``nn.Module`` trees, torch's hooks and dispatch modes (the first backend; the
others reuse its tensor handling where their values are torch tensors)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ...core.source import ModelSource, TensorEntry
from ...core.trace import TraceResult

__all__ = ["BACKEND"]


class TorchBackend:
    name = "torch"

    def recognizes(self, obj: Any) -> bool:
        import torch.nn as nn  # torch is nbinspect's one required framework

        return isinstance(obj, nn.Module)

    def source(self, obj: Any, name: str | None) -> ModelSource:
        from .source import from_module

        return from_module(obj, name)

    def trace(self, model: Any, args: tuple, kwargs: dict, **options: Any) -> TraceResult:
        from .trace import run_trace

        return run_trace(model, args, kwargs, **options)

    def watch(self, model: Any, *, flops: bool = True) -> AbstractContextManager[TraceResult]:
        from .watch import watch

        return watch(model, flops=flops)

    def plan_memory(self, source: ModelSource, **options: Any) -> Any:
        from .memory import memory_plan

        return memory_plan(source, **options)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An input of this shape: the trace builds the zeros itself (on the model's device)."""
        return shape

    def read_region(self, entry: TensorEntry, index: tuple[slice | int, ...]) -> np.ndarray:
        from .source import read_region

        return read_region(entry, index)


BACKEND = TorchBackend()
