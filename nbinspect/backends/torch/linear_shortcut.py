"""FLOPs of a plain ``nn.Linear`` call from its shapes, with the FLOP counter off the stack.

Under a Python ``TorchDispatchMode`` every aten op a call runs goes through Python: for a
``Linear`` two (``t`` and ``addmm`` or ``mm``), most of what counting its FLOPs costs. Where
the ops are known in advance, torch's formula on the shapes gives the same count: a call of
an ``nn.Linear`` itself (not a subclass; no forward of its own, not compiled), with no hooks
(its own or global), its parameters plain ``Parameter``s, one plain strided tensor
argument that is 2-D (``addmm``/``mm``) or contiguous with more dimensions (flattened to
2-D: ``addmm``, or ``mm`` after a view), and no mode but the counter on torch's stacks.
Its ops are then ``t`` (a view), views and one ``[m, k] @ [k, n]`` that torch counts as
``2·m·k·n``, ``m·n`` being the output's elements; nothing uncounted. The trace takes the
counter off the dispatch stack for such a call and adds the count itself; every other call
runs under the counter as before. A 1-D input, a non-contiguous one with a bias (an
uncounted ``add``) or anything unusual takes the counter.
tests/backends/test_linear_shortcut.py holds the two equal, call by call, against torch's
``FlopCounterMode`` too, and checks each fallback.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module

__all__ = ["linear_flops", "plain_linears"]

_GLOBAL_HOOKS = (
    _module._global_forward_pre_hooks,
    _module._global_forward_hooks,
    _module._global_backward_pre_hooks,
    _module._global_backward_hooks,
)
_Parameter, _Tensor, _strided = nn.Parameter, torch.Tensor, torch.strided
_dispatch_depth, _function_depth = torch._C._len_torch_dispatch_stack, torch._C._len_torch_function_stack
_dispatch_at = torch._C._get_dispatch_stack_at
_linear = torch._C._nn.linear


def plain_linears(modules: list[nn.Module]) -> set[int]:
    """id() of the modules whose calls may take the shortcut (checked again per call in
    :func:`linear_flops`): exactly ``nn.Linear``, torch's forward, not compiled. None when
    ``nn.Linear.forward`` or ``F.linear`` is not torch's own (patched)."""
    forward = nn.Linear.__dict__.get("forward")
    if getattr(forward, "__module__", None) != "torch.nn.modules.linear" or nn.functional.linear is not _linear:
        return set()
    linear = nn.Linear
    return {
        id(m)
        for m in modules
        if type(m) is linear and "forward" not in m.__dict__ and getattr(m, "_compiled_call_impl", None) is None
    }


def linear_flops(module: nn.Module, x: torch.Tensor, counter: Any) -> int:
    """2·k per output element when this call of a :func:`plain_linears` module, whose one
    argument is `x` (positional, no keywords), runs only the known ops (see the module's
    doc), else 0: run it under the counter. `counter` must be the one mode on the dispatch
    stack (not a mode the model swapped in for it) and no function mode on."""
    if _dispatch_depth() != 1 or _function_depth() or _dispatch_at(0) is not counter:
        return 0
    if module._forward_pre_hooks or module._forward_hooks or module._backward_pre_hooks or module._backward_hooks:
        return 0
    if any(_GLOBAL_HOOKS):
        return 0
    params = module._parameters
    weight, bias = params.get("weight"), params.get("bias")
    if type(weight) is not _Parameter or weight.dim() != 2 or (bias is not None and type(bias) is not _Parameter):
        return 0
    if type(x) is not _Tensor or x.layout is not _strided or x.is_nested:
        return 0
    dim = x.dim()
    if dim == 2 or (dim > 2 and x.is_contiguous() and (bias is None or bias.dim() == 1)):
        return 2 * weight.shape[1]
    return 0
