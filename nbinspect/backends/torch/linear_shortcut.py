"""A plain ``nn.Linear`` call run by the trace itself: FLOPs and saved tensors from its
shapes, with the FLOP counter and the saved-tensor hooks off.

Under a Python ``TorchDispatchMode`` every aten op a call runs goes through Python (for a
``Linear`` two: ``t`` and ``addmm`` or ``mm``), each tensor autograd saves goes through the
meter's Python hook (two per ``Linear`` whose input requires grad), and torch's
``Module.__call__`` runs four Python frames (``_wrapped_call_impl``, ``_call_impl``,
``forward``, ``__getattr__`` for the weight and bias) before ``F.linear``: most of what
tracing a ``Linear`` costs. Where what runs is known in advance, none of it is needed: a
call of an ``nn.Linear`` itself (not a subclass, no forward of its own, not compiled), with
no hooks (its own or global), its parameters plain ``Parameter``s, one plain strided tensor
argument that is 2-D (``addmm``/``mm``) or contiguous with more dimensions (flattened to
2-D: ``addmm``, or ``mm`` after a view), under torch's own ``Module.__call__``, with the
trace's counter the one mode and the trace's meter on top of the saved-tensor hooks, and
no autocast (its casts make new tensors that are saved), forward AD, functorch transform
or jit trace recording module scopes. Torch would then run
``F.linear(x, weight, bias)``, whose ops are ``t`` (a view), views and one
``[m, k] @ [k, n]`` that torch counts as ``2·m·k·n`` (``m·n`` the output's elements;
nothing uncounted), and autograd (when grad mode is on) saves a view of ``x`` if the weight
requires grad and ``weight.t()`` if ``x`` does (``addmm``/``mm``'s formulas: each matrix is
saved for the other's gradient). The trace calls ``F.linear`` itself with the counter off
the dispatch stack and the saved-tensor hooks quiet, adds ``2·k`` per output element, and
hands those two tensors to the meter's own ``pack``, which counts each storage once as it
would have. A call that raises is run again torch's way (an op that fails does so before it
makes anything), so the counter and the meter see the failure as before. Every other call
runs torch's way. tests/backends/test_linear_shortcut.py holds the two equal, call by call
(FLOPs, saved bytes, totals), against torch's ``FlopCounterMode`` too, and checks each
fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.forward_ad as _forward_ad
import torch.jit._trace as _jit_trace
from torch import nn
from torch.nn.modules import module as _module

from ...core.trace import INPUT_SHAPES, OWN_FLOPS

__all__ = ["linear_call", "plain_linears"]

_linear = torch._C._nn.linear


def _torch_own(function: Any, module: Any) -> bool:
    """Whether `function` is the one defined in torch's `module` (not a patch, even one
    made with ``functools.wraps``)."""
    return getattr(getattr(function, "__code__", None), "co_filename", None) == module.__file__


def plain_linears(modules: list[nn.Module]) -> set[int]:
    """id() of the modules whose calls may take the shortcut (checked again per call in
    :func:`linear_call`'s function): exactly ``nn.Linear``, torch's forward, not compiled.
    None when ``nn.Linear.forward`` or ``F.linear`` is not torch's own (patched)."""
    if not _torch_own(nn.Linear.__dict__.get("forward"), nn.modules.linear) or nn.functional.linear is not _linear:
        return set()
    linear = nn.Linear
    return {
        id(m)
        for m in modules
        if type(m) is linear and "forward" not in m.__dict__ and getattr(m, "_compiled_call_impl", None) is None
    }


def linear_call(counter: Any, pack: Callable, inner: Any) -> Callable[[nn.Module, torch.Tensor, Any], Any] | None:
    """The function that runs a :func:`plain_linears` module's call with `x` its one
    argument (positional, no keywords) and `call` its record, returning the output, or
    None where the call must run torch's way (see the module's doc). `counter`: the
    trace's FLOP counter; `pack`: its meter's pack hook; `inner`: the ``Module.__call__``
    the trace stands in for. None (no shortcut) when that is not torch's own (a patch, or
    another trace's stand-in, which must see the call)."""
    call_impl = nn.Module.__dict__
    if not (
        inner is call_impl["_wrapped_call_impl"]
        and _torch_own(inner, _module)
        and _torch_own(call_impl["_call_impl"], _module)
        and _torch_own(call_impl["__getattr__"], _module)
    ):
        return None
    linear_type, Parameter, Tensor, strided = nn.Linear, nn.Parameter, torch.Tensor, torch.strided
    pre_hooks, hooks = _module._global_forward_pre_hooks, _module._global_forward_hooks
    backward_pre_hooks, backward_hooks = _module._global_backward_pre_hooks, _module._global_backward_hooks
    dispatch_depth, function_depth = torch._C._len_torch_dispatch_stack, torch._C._len_torch_function_stack
    dispatch_pop, dispatch_push = torch._C._pop_torch_dispatch_stack, torch._C._push_on_torch_dispatch_stack
    try:  # private APIs of recent torch: without one of them, every call goes torch's way
        top_hooks = torch._C._autograd._top_saved_tensors_default_hooks
        # "tracing" keeps autograd from calling the saved-tensor hooks (what dynamo sets while it
        # traces): a flag, where taking the meter's hooks off and on would push them again
        quiet = torch._C._autograd._saved_tensors_hooks_set_tracing
        autocast, transforms = torch._C._is_any_autocast_enabled, torch._C._are_functorch_transforms_active
        _forward_ad._current_level, _jit_trace._trace_module_map  # noqa: B018  # read per call below
    except AttributeError:
        return None
    grad_enabled = torch.is_grad_enabled
    missing = object()

    def run(module: nn.Module, x: torch.Tensor, call: Any) -> Any:
        if type(module) is not linear_type or type(x) is not Tensor:
            return None
        d = module.__dict__  # what Module.__getattr__ reads, without its Python frames
        if (
            d["_forward_pre_hooks"]
            or d["_forward_hooks"]
            or d["_backward_pre_hooks"]
            or d["_backward_hooks"]
            or pre_hooks
            or hooks
            or backward_pre_hooks
            or backward_hooks
            or "forward" in d
            or "weight" in d
            or "bias" in d
            or ("_compiled_call_impl" in d and d["_compiled_call_impl"] is not None)
        ):
            return None
        params = d["_parameters"]
        weight, bias = params.get("weight"), params.get("bias", missing)
        if type(weight) is not Parameter or (bias is not None and type(bias) is not Parameter) or weight.dim() != 2:
            return None
        if x.layout is not strided or x.is_nested:
            return None
        shape = call[INPUT_SHAPES][0]  # x's, as the recorder read it
        dim = len(shape)
        if dim < 2 or (dim > 2 and (not x.is_contiguous() or (bias is not None and bias.dim() != 1))):
            return None
        if (
            dispatch_depth() != 1
            or function_depth()
            or autocast()
            or transforms()
            or _forward_ad._current_level >= 0
            or _jit_trace._trace_module_map is not None  # torch.jit.trace's scopes need _slow_forward
        ):
            return None
        top = top_hooks(False)  # None while quiet (dynamo tracing): nothing saved is seen
        if top is None or top[0] is not pack:  # the model's own hooks (checkpointing) are on
            return None
        mode = dispatch_pop(None)
        if mode is not counter:  # a mode the model swapped in for the counter
            dispatch_push(mode)
            return None
        was_quiet = quiet(True)
        try:
            output = _linear(x, weight, bias)
        except Exception:
            output = None  # torch's way again: it raises there, seen by the counter and the meter
        finally:
            quiet(was_quiet)
            dispatch_push(counter)
        if output is None:
            return None
        call[OWN_FLOPS] += 2 * shape[-1] * output.numel()
        if grad_enabled():  # off under no_grad and inference_mode: nothing saved
            if weight.requires_grad:
                pack(x)
            if x.requires_grad:
                pack(weight)
        return output

    return run
