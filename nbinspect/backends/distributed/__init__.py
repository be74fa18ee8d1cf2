"""Models sharded across processes (``DTensor`` parameters: FSDP2, tensor parallelism):
global shapes, each rank's share of the values, combined with ``torch.distributed``."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ...core.source import ModelSource, TensorEntry
from ...core.trace import TraceResult
from ..torch import BACKEND as TORCH

__all__ = ["BACKEND"]


class DistributedBackend:
    name = "distributed"

    def recognizes(self, obj: Any) -> bool:
        import sys

        if "torch.distributed.tensor" not in sys.modules or not TORCH.recognizes(obj):
            return False  # no DTensor can exist before its module is imported
        from .source import is_sharded_module

        return is_sharded_module(obj)

    def source(self, obj: Any, name: str | None) -> ModelSource:
        from .source import from_sharded_module

        return from_sharded_module(obj, name)

    def receives(self, obj: Any) -> bool | None:
        from .reduce import receives

        return receives(obj)

    # A sharded model runs its forward pass as a torch model does (DTensor dispatch).
    def trace(self, model: Any, args: tuple, kwargs: dict, **options: Any) -> TraceResult:
        return TORCH.trace(model, args, kwargs, **options)

    def watch(self, model: Any, *, flops: bool = True) -> AbstractContextManager[TraceResult]:
        return TORCH.watch(model, flops=flops)

    def plan_memory(self, source: ModelSource, **options: Any) -> Any:
        return TORCH.plan_memory(source, **options)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return TORCH.zeros(shape, dtype)

    def read_region(self, entry: TensorEntry, index: tuple[slice | int, ...]) -> np.ndarray:
        return TORCH.read_region(entry, index)  # this rank's share


BACKEND = DistributedBackend()
