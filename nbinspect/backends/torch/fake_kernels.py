"""The FakeTensorMode traces run under, with stand-ins for meta kernels that are stricter
than the real ones.

``aten._grouped_mm`` (fused mixture-of-experts layers, Mixtral in transformers) has a meta
kernel that accepts only bf16, while the CPU and CUDA kernels take float32 too: a float32
Mixtral on the meta device failed to trace. The mode runs the meta kernel on bf16 stand-ins
of the floating arguments (fake tensors: nothing is allocated), so the meta kernel still
decides the output's shape, and returns the result in the dtype the real kernel would.
FLOPs are counted outside (the FLOP counter sees the op with its real dtypes first).

A subclass rather than a second dispatch mode entered inside FakeTensorMode: every op of a
fake trace passes through Python once less (a second mode cost ~20% of GPT-2's memory plan).
Metadata queries (``prim.device``: 61% of the dispatches of GPT-2's plan, asked by C++
kernels of every op) are answered by FakeTensorMode's own handlers without its dispatch
wrappers (about a tenth of the plan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode

__all__ = ["ShimmedFakeMode"]

_BF16_ONLY = {torch.ops.aten._grouped_mm.default} if hasattr(torch.ops.aten, "_grouped_mm") else set()
_METADATA = getattr(fake_tensor, "_DISPATCH_META_HANDLERS", {})  # what FakeTensorMode.dispatch answers first


def _bf16(x: Any) -> Any:
    return x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


class ShimmedFakeMode(FakeTensorMode):
    """FakeTensorMode, with the ops of ``_BF16_ONLY`` run on bf16 stand-ins."""

    def __torch_dispatch__(
        self, func: Any, types: Sequence[type], args: Sequence[Any] = (), kwargs: Mapping[str, Any] = {}
    ) -> Any:
        answer = _METADATA.get(func)
        if answer is not None:
            return answer(args)
        if func in _BF16_ONLY and args and args[0].dtype != torch.bfloat16:
            out_dtype = kwargs.get("out_dtype") or args[0].dtype
            rest = {k: v for k, v in kwargs.items() if k != "out_dtype"}
            return func(*map(_bf16, args), **rest).to(out_dtype)  # the mode is off here: fakes dispatch back to it
        return super().__torch_dispatch__(func, types, args, kwargs)
