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

:func:`stand_in` makes the fakes that parameters and buffers are swapped for. A plain dense
tensor's fake is made from a meta tensor of its shape and strides, as FakeTensorMode's
converter ends up making it, without describing the real tensor first (swapping GPT-2's 149
tensors: 28-39 -> 8-10 ms, a tenth of its memory plan); anything else is converted by
``from_tensor``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._mode_utils import no_dispatch

__all__ = ["ShimmedFakeMode", "stand_in"]

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


def stand_in(t: torch.Tensor, mode: FakeTensorMode, device: torch.device | None, dtype: torch.dtype | None) -> Any:
    """A fake tensor like `t`, on `device` (t's own when None), floating ones in `dtype` when
    given, with t's shape, strides and ``requires_grad``; a leaf, nothing allocated."""
    floating = t.is_floating_point()
    kind = dtype if dtype is not None and floating else t.dtype
    if _plain(t):
        with no_dispatch():  # the meta tensor is made by torch, not by the mode
            meta = torch.empty_strided(t.shape, t.stride(), dtype=kind, device="meta", requires_grad=t.requires_grad)
        made = mode.fake_tensor_converter.from_meta_and_device(mode, meta, device or t.device)
        if device is None and kind == t.dtype:  # what from_tensor(t) gives: code that reaches t itself gets this one
            mode.fake_tensor_converter.set_tensor_memo(t, made)
        return made
    fake: torch.Tensor
    if device is None:
        fake = mode.from_tensor(t)
    else:
        fake = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
    if kind != fake.dtype:
        fake = fake.detach().to(kind)
    if floating and fake.requires_grad != t.requires_grad:
        fake = fake.detach().requires_grad_(t.requires_grad)
    return fake


def _plain(t: torch.Tensor) -> bool:
    """A dense tensor that owns all of its storage: its fake needs nothing but shape, strides
    and dtype (subclasses, views, quantized, sparse, conjugate or inference tensors do)."""
    if type(t) not in _PLAIN or t.layout != torch.strided or t.is_quantized or t._is_view():
        return False
    if t.is_conj() or t.is_neg() or t.is_inference() or t.storage_offset() != 0:
        return False
    if t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return False
    return t.is_contiguous() or _dense(t.shape, t.stride())


def _dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Every element at its own place of a gapless block: strides, smallest first, step by
    the sizes before them (a transposed or channels-last tensor; not an expanded one)."""
    step = 1
    for size, stride in sorted(((n, s) for n, s in zip(shape, strides) if n != 1), key=lambda p: p[1]):
        if stride != step:
            return False
        step *= size
    return True


_PLAIN = (torch.Tensor, torch.nn.Parameter)
