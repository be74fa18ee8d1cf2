"""Dtype names both ways: how a frame writes a torch dtype, and what a user may type for one."""

from __future__ import annotations

import torch

__all__ = ["dtype_name", "parse_dtype"]

_NAMES: dict[torch.dtype, str] = {}


def dtype_name(dtype: torch.dtype) -> str:
    """'float32' for torch.float32 (cached: called once per tensor of every model)."""
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def parse_dtype(text: str) -> torch.dtype:
    """torch.bfloat16 for 'bfloat16' or 'torch.bfloat16' (and torch's aliases: 'half', 'long').
    Raises ValueError naming the text for anything else."""
    dtype = getattr(torch, str(text).strip().removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{text!r} is not a torch dtype (e.g. float32, bfloat16, int64)")
    return dtype
