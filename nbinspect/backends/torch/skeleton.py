"""A stand-in module for a checkpoint without its model class: the module tree rebuilt
from the names, holding meta-device tensors of the checkpoint's shapes and dtypes.

It lets analyzers that need an ``nn.Module`` but no values (the memory planner's
parameter, gradient and optimizer rows) run on a checkpoint. Tensors sharing storage in the
file become one Parameter at several paths, so tied weights count once. It cannot run
forward: it has no forward.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ...core.source import ModelSource, parent_path
from ...dtypes import parse_dtype
from ...schema import PARAMETER

__all__ = ["skeleton"]


def skeleton(source: ModelSource) -> nn.Module:
    """An ``nn.Module`` tree with meta tensors at the source's paths."""
    modules: dict[str, nn.Module] = {"": nn.Module()}
    for m in source.modules[1:]:
        modules[m.name] = child = nn.Module()
        modules[parent_path(m.name) or ""].add_module(m.name.rpartition(".")[2], child)
    shared: dict[Any, torch.Tensor] = {}
    for t in source.tensors:
        if t.storage_key not in shared:
            assert t.shape is not None, f"{t.name}: a file tensor always has a shape"
            empty = torch.empty(t.shape, dtype=parse_dtype(t.dtype), device="meta")
            shared[t.storage_key] = nn.Parameter(empty, requires_grad=t.requires_grad) if t.kind == PARAMETER else empty
        value, local = shared[t.storage_key], t.name.rpartition(".")[2]
        if isinstance(value, nn.Parameter):
            modules[t.module].register_parameter(local, value)
        else:
            modules[t.module].register_buffer(local, value)
    return modules[""]
