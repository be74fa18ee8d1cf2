"""MLX: ``mlx.nn.Module`` trees, traced by wrapping ``__call__`` (MLX has no hooks). Never
imports mlx until one of its models is handed over."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ...core.source import ModelSource, TensorEntry
from ...core.trace import TraceResult

__all__ = ["BACKEND"]


class MlxBackend:
    name = "mlx"

    def recognizes(self, obj: Any) -> bool:
        from .source import is_mlx_module

        return is_mlx_module(obj)

    def source(self, obj: Any, name: str | None) -> ModelSource:
        from .source import from_mlx_module

        return from_mlx_module(obj, name)

    def trace(self, model: Any, args: tuple, kwargs: dict, **options: Any) -> TraceResult:
        from .trace import run_mlx_trace

        for unused in ("fake", "param_dtype", "autocast_dtype"):  # torch-only settings, never set for MLX
            options.pop(unused, None)
        return run_mlx_trace(model, args, kwargs, **options)

    def watch(self, model: Any, *, flops: bool = True) -> AbstractContextManager[TraceResult]:
        from .trace import watch_mlx

        return watch_mlx(model, flops=flops)

    def plan_memory(self, source: ModelSource, **options: Any) -> Any:
        from .memory import mlx_memory_plan

        return mlx_memory_plan(source, **options)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An input of zeros (`dtype`: an MLX or torch dtype, or a name)."""
        import mlx.core as mx

        from .source import mlx_dtype_name
        from .trace import mlx_dtype

        return mx.zeros(shape, dtype=mlx_dtype(mlx_dtype_name(dtype)))

    def read_region(self, entry: TensorEntry, index: tuple[slice | int, ...]) -> np.ndarray:
        from ..torch.source import read_region  # an MLX entry's values() are a torch view of the array

        return read_region(entry, index)


BACKEND = MlxBackend()
