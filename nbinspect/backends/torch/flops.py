"""FLOP counting per module call, from torch's own formulas (``torch.utils.flop_counter``).

A :class:`FlopCounter` is a ``TorchDispatchMode``: it sees every aten op that runs, looks
the op up in ``flop_registry`` (matrix multiplies, convolutions, attention kernels) and
adds the count to the module call that is running. Ops the registry does not know and
that do work on floating-point data are tallied by name, for the coverage note.

CPU attention: torch picks ``_scaled_dot_product_flash_attention_for_cpu``, which the
registry does not list, so it is counted with the registry's own SDPA formula; the math
backend decomposes into ``bmm``s that the registry counts anyway. Either way attention
costs ``4·b·h·s_q·s_k·d`` forward (causal masking not discounted, as in torch).

Backward FLOPs (on request): every module call's entry and exit records autograd's
sequence number (:class:`AutogradMarks`); an autograd node made in the forward pass carries
the sequence number it was made at, so during backward the node running
(``torch._C._current_autograd_node``) is bisected into those marks to find whose backward
an op belongs to. This works on fake tensors too, whose dispatch outputs never carry the
``grad_fn`` (tagging those, the fallback where torch lacks the API, credits every backward
FLOP of a meta model to the root).
"""

from __future__ import annotations

import bisect
import operator
from collections import Counter
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from ...core.trace import INDEX, OWN_BACKWARD_FLOPS, OWN_FLOPS

__all__ = ["DIRECT_FORMULAS", "FLASH_BACKWARD_NOTE", "AutogradMarks", "FlopCounter", "coverage_note"]

FLASH_BACKWARD_NOTE = (
    " Attention backward is counted as the flash kernel that ran computes it: the scores are recomputed,"
    " 2.5x its forward FLOPs (the math kernel, which torch's FlopCounterMode counts, does 2x)."
)

aten = torch.ops.aten


def _grouped_mm_flops(mat_a: Any, mat_b: Any, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    """Grouped matrix multiply (fused mixture-of-experts layers): each output element is a
    dot product of length K, whichever expert's matrix it used. 2-D x 2-D splits K into the
    groups (one output per group), so it costs one M x K_total x N multiply."""
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return 2 * mat_a.shape[0] * mat_a.shape[1] * mat_b.shape[1]
    return 2 * out_val.numel() * mat_a.shape[-1]


# torch's formulas for the matrix multiplies, most ops the counter sees, on the tensors
# themselves: the registry's wrappers (and a cache keyed by shapes) cost 1.6 us per op more.
# Every counting function the counter calls takes (args, kwargs, out) positionally: an
# ``out_val=`` keyword per call cost ~0.2 us per op. tests/test_trace.py holds each equal to
# the registry's on many shapes.
def _mm_flops(args: tuple, kwargs: dict | None, out: Any) -> int:
    m, k = args[0].shape
    return m * args[1].shape[1] * 2 * k


def _addmm_flops(args: tuple, kwargs: dict | None, out: Any) -> int:
    m, k = args[1].shape
    return m * args[2].shape[1] * 2 * k


def _bmm_flops(args: tuple, kwargs: dict | None, out: Any) -> int:
    batch, m, k = args[0].shape
    return batch * m * args[1].shape[2] * 2 * k


def _baddbmm_flops(args: tuple, kwargs: dict | None, out: Any) -> int:
    batch, m, k = args[1].shape
    return batch * m * args[2].shape[2] * 2 * k


DIRECT_FORMULAS = {aten.mm: _mm_flops, aten.addmm: _addmm_flops, aten.bmm: _bmm_flops, aten.baddbmm: _baddbmm_flops}

_EXTRA_FORMULAS = {
    aten._grouped_mm: _grouped_mm_flops,
    aten._scaled_dot_product_flash_attention_for_cpu: flop_registry[aten._scaled_dot_product_flash_attention],
    aten._scaled_dot_product_flash_attention_for_cpu_backward: flop_registry[
        aten._scaled_dot_product_flash_attention_backward
    ],
}

# Ops that move or create data without arithmetic: never listed as "not counted".
_DATA_MOVEMENT = {
    aten.clone,
    aten._to_copy,
    aten.copy_,
    aten.copy,
    aten.cat,
    aten.stack,
    aten.detach,
    aten.lift_fresh,
    aten.empty_like,
    aten.zeros_like,
    aten.ones_like,
    aten.full_like,
    aten.new_empty_strided,
    aten.new_zeros,
    aten.new_ones,
    aten.new_empty,
    aten.fill_,
    aten.zero_,
    aten.index_select,
    aten.gather,
    aten.embedding,
    aten.constant_pad_nd,
    aten.slice_scatter,
    aten.select_scatter,
    aten.masked_fill,
    aten.where,
    aten.index,
    aten.split_with_sizes_copy,
    aten.empty_strided,
    aten.empty,
    aten.zeros,
    aten.ones,
    aten.full,
    aten.arange,
    aten._unsafe_view,
    aten.alias,
    aten.scalar_tensor,
    aten._local_scalar_dense,
    aten.tril,
    aten.triu,
}

_NODE_KEY = "nbinspect_call"
_FREE, _UNCOUNTED, _COMPOSITE = object(), object(), object()  # op kinds besides a FLOP formula


def _shape_of(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_shape_of(v) for v in value)
    return value


_SHAPE = operator.attrgetter("shape")


def _signature(args: tuple, out: Any) -> tuple:
    """What a formula's count depends on: the shapes of the tensors, other arguments as they are."""
    try:  # every argument and the output a tensor (matrix multiplies): built in C
        return tuple(map(_SHAPE, args)), out.shape
    except AttributeError:
        return tuple([_shape_of(a) for a in args]), _shape_of(out)


def _cached(formula: Callable) -> Callable[[tuple, dict | None, Any], int]:
    """A registry formula as the counter calls it, ``(args, kwargs, out)``. Formulas depend
    only on shapes and plain arguments, but the registry's wrappers map tensors to shapes
    with pytree at ~50 us per op (and nest: addmm calls mm); remember each distinct shape
    signature's count instead."""
    cache: dict[Any, int] = {}

    def count(args: tuple, kwargs: dict | None, out: Any) -> int:
        kwargs = kwargs or {}
        try:
            key = (*_signature(args, out), tuple([(k, _shape_of(v)) for k, v in kwargs.items()]) if kwargs else ())
            return cache[key]
        except KeyError:
            n = cache[key] = formula(*args, **kwargs, out_val=out)
            return n
        except TypeError:  # an unhashable argument: count without the cache
            return formula(*args, **kwargs, out_val=out)

    return count


def _floating_out(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return out.is_floating_point()
    if isinstance(out, (tuple, list)):
        return any(isinstance(o, torch.Tensor) and o.is_floating_point() for o in out)
    return False


class AutogradMarks:
    """Autograd sequence numbers at module-call boundaries: from ``seq[i]`` on, autograd nodes
    belong to call ``call[i]`` (-1: outside every call). None where torch lacks the API."""

    def __init__(self) -> None:
        self.seq: list[int] = []
        self.call: list[int] = []
        self.now = torch._C._autograd._get_sequence_nr

    @classmethod
    def available(cls) -> bool:
        return hasattr(torch._C._autograd, "_get_sequence_nr") and hasattr(torch._C, "_current_autograd_node")

    def mark(self, call: int) -> None:
        self.seq.append(self.now())
        self.call.append(call)

    def call_of(self, sequence_nr: int) -> int:
        i = bisect.bisect_right(self.seq, sequence_nr) - 1
        return self.call[i] if i >= 0 else -1


class FlopCounter(TorchDispatchMode):
    """Adds each op's FLOPs to the call on top of `stack` (`outside` when it is empty; rows,
    see ``core.trace.ROW``). With ``tag_nodes``, autograd
    nodes made in the forward pass remember their call (an index into ``calls``) for
    backward attribution."""

    # Never set: torch reads ``_mode_key`` on every push of a mode (an infra mode has one),
    # and the plain Linear shortcut pushes the counter back once per call. An attribute
    # missing from the instance and its type fails with Python's "did you mean" context
    # (~4k instructions); an empty slot fails as plainly, for less. hasattr() stays False.
    __slots__ = ("_mode_key",)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps every mode's __torch_dispatch__ in torch._dynamo.disable, a chain of
        # Python calls per op (~1.3 us, a fifth of the trace); the same protection is set
        # once on the code object below, where this torch allows it.
        return False

    def __init__(self, stack: list, outside: Any, calls: list, tag_nodes: bool = False, marks: Any = None):
        super().__init__()
        self.marks: AutogradMarks | None = marks  # when given, backward attribution by sequence number
        tag_nodes = tag_nodes and marks is None
        self.stack = stack  # read, not called: a method call per op would cost more than the count
        self.outside = outside
        self.calls = calls
        self.tag_nodes = tag_nodes
        self.in_backward = False
        self.flash_backward = False  # the CPU flash attention's backward ran (see FLASH_BACKWARD_NOTE)
        self.uncounted: Counter[str] = Counter()
        self._pending: tuple[Any, int] | None = None
        # id(OpOverload) -> (formula, _FREE, _COMPOSITE or _UNCOUNTED; the op's C function).
        # By id: OpOverload hashes in Python, and each is one object for the process's life.
        self._kind: dict[int, tuple[Any, Callable]] = {}

    def _classify(self, func) -> Any:
        packet = func._overloadpacket
        direct = DIRECT_FORMULAS.get(packet)
        if direct is not None:
            return direct
        formula = _EXTRA_FORMULAS.get(packet) or flop_registry.get(packet)
        if packet is aten._scaled_dot_product_flash_attention_for_cpu_backward:
            self.flash_backward = True
        if formula is not None:
            return _cached(formula)
        if func.is_view or packet in _DATA_MOVEMENT or func.namespace != "aten":
            return _FREE
        if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
            return _COMPOSITE  # reaches us undecomposed in inference mode (e.g. linear): count its parts
        return _UNCOUNTED

    def tag_pending(self) -> None:
        """Tag the autograd nodes of the last op's outputs with the call that ran it."""
        if self._pending is None:
            return
        out, index = self._pending
        self._pending = None
        if index < 0:  # ran outside the model's modules
            return
        for t in out if isinstance(out, (tuple, list)) else (out,):
            node = getattr(t, "grad_fn", None) if isinstance(t, torch.Tensor) else None
            if node is not None and _NODE_KEY not in node.metadata:
                node.metadata[_NODE_KEY] = index

    def _backward_call(self) -> Any:
        node = torch._C._current_autograd_node()
        if self.marks is not None:
            at = self.marks.call_of(node._sequence_nr()) if node is not None else -1
            return self.calls[at if at >= 0 else 0]  # AccumulateGrad (max sequence number): the root
        # torch's stubs call Node.metadata a method; at run time it is the dict property
        metadata: dict = node.metadata if node is not None else {}  # type: ignore[assignment]
        index = metadata.get(_NODE_KEY)
        return self.calls[index if index is not None else 0]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self._pending is not None:
            self.tag_pending()
        found = self._kind.get(id(func))
        if found is None:  # the C function skips OpOverload.__call__, a Python frame per op
            found = self._kind[id(func)] = (self._classify(func), getattr(func, "_op", func))
        kind, run = found
        if kind is _FREE:  # views and data movement: no arithmetic, forward or backward (most ops: first)
            return run(*args, **kwargs) if kwargs else run(*args)
        if kind is _COMPOSITE:
            with self:
                decomposed = func.decompose(*args, **(kwargs or {}))
            if decomposed is not NotImplemented:
                return decomposed
            kind = _UNCOUNTED
        out = run(*args, **kwargs) if kwargs else run(*args)
        if self.in_backward:
            if kind is _UNCOUNTED:
                if _floating_out(out):
                    self.uncounted[func._overloadpacket.__name__] += 1
            else:
                self._backward_call()[OWN_BACKWARD_FLOPS] += kind(args, kwargs, out)
            return out
        stack = self.stack
        call = stack[-1] if stack else self.outside
        if kind is _UNCOUNTED:
            if _floating_out(out):
                self.uncounted[func._overloadpacket.__name__] += 1
        else:
            call[OWN_FLOPS] += kind(args, kwargs, out)
        if self.tag_nodes:
            self._pending = (out, call[INDEX])
        return out


def _skip_in_dynamo(code: CodeType) -> bool:
    """Mark `code`, and every frame it calls, as never compiled by dynamo: what
    ``torch._dynamo.disable(recursive=True)`` does, but checked in C at no cost per call
    (a model that calls a compiled function would otherwise have dynamo trace the FLOP
    counter while it runs). False where this torch has no such switch."""
    try:
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy
    except ImportError:
        return False
    set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))
    return True


if not _skip_in_dynamo(FlopCounter.__torch_dispatch__.__code__):  # torch's own, slower guard
    FlopCounter.__torch_dispatch__ = torch._disable_dynamo(  # type: ignore[method-assign]  # as torch's __init_subclass__ does
        FlopCounter.__dict__["__torch_dispatch__"], recursive=True
    )


def coverage_note(uncounted: Counter) -> str:
    """One line saying what the FLOP figures include and which ops they leave out."""
    head = "FLOPs count matrix multiplies, convolutions and attention (torch.utils.flop_counter)"
    if not uncounted:
        return head + "; every floating-point op that ran was counted."
    listed = ", ".join(f"{name} x{n}" for name, n in sorted(uncounted.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{head}; not counted: {listed}."
