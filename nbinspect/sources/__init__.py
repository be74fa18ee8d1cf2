"""Where tensors come from. Every input becomes a :class:`ModelSource`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .base import ModelSource, ModuleEntry, TensorEntry, ancestors, parent_path, preorder

__all__ = ["ModelSource", "ModuleEntry", "TensorEntry", "ancestors", "as_source", "parent_path", "preorder"]

EXPECTED = "a torch.nn.Module or MLX module instance, a state_dict, or a checkpoint path"


def as_source(obj: Any, name: str | None = None) -> ModelSource:
    """The source for `obj`: a torch or MLX module, a state_dict or training checkpoint dict, or a
    checkpoint path (see :func:`load_checkpoint`); a ModelSource is returned as it is."""
    if isinstance(obj, ModelSource):
        return obj
    from .mlx_module import from_mlx_module, is_mlx_module

    if is_mlx_module(obj):
        return from_mlx_module(obj, name)
    import torch.nn as nn

    from .dtensor import from_sharded_module, is_sharded_module
    from .torch_module import from_module

    if isinstance(obj, nn.Module):
        return from_sharded_module(obj, name) if is_sharded_module(obj) else from_module(obj, name)
    if isinstance(obj, (Mapping, str, os.PathLike)):
        from .checkpoint import load_checkpoint

        return load_checkpoint(obj, name=name)
    if isinstance(obj, type) and issubclass(obj, nn.Module):
        raise TypeError(
            f"nbinspect expected {EXPECTED}, got the class {obj.__name__} itself: "
            f"build it first, e.g. {obj.__name__}(...)"
        )
    raise TypeError(f"nbinspect expected {EXPECTED}, got {type(obj).__name__}: {_short_repr(obj)}")


def _short_repr(obj: Any, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."
