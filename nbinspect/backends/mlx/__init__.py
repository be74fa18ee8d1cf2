"""MLX: ``mlx.nn.Module`` trees, traced by wrapping ``__call__`` (MLX has no hooks). Nothing
here imports mlx until one of its models is handed over."""

from __future__ import annotations

from typing import Any

from ..torch.source import read_region
from ..torch.values import plane_bands, value_state
from .memory import mlx_memory_plan
from .source import from_mlx_module, is_mlx_module, mlx_dtype_name
from .trace import mlx_dtype, run_mlx_trace, watch_mlx

__all__ = ["BACKEND"]


def _zeros(shape: tuple[int, ...], dtype: Any) -> Any:
    """An input of zeros (`dtype`: an MLX or torch dtype, or a name)."""
    import mlx.core as mx

    return mx.zeros(shape, dtype=mlx_dtype(mlx_dtype_name(dtype)))


class MlxBackend:
    name = "mlx"
    dtype_prefix = "mlx.core."  # how MLX spells a dtype: str(mx.float32) == "mlx.core.float32"
    recognizes = staticmethod(is_mlx_module)
    source = staticmethod(from_mlx_module)
    trace = staticmethod(run_mlx_trace)
    watch = staticmethod(watch_mlx)
    plan_memory = staticmethod(mlx_memory_plan)
    read_region = staticmethod(read_region)
    value_state = staticmethod(value_state)
    plane_bands = staticmethod(plane_bands)  # an MLX entry's values() are a torch view of the array
    zeros = staticmethod(_zeros)


BACKEND = MlxBackend()
