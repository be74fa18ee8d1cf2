"""The dataflow of a torch forward pass: which call or operation produced each tensor that
another one consumed, recorded by the trace itself (no ``torch.export``, no graph breaks).

Tensor identity: ``id(tensor)`` mapped to its producer and a ``weakref`` to the tensor,
checked on each look-up: an entry whose tensor died is not the one of a new tensor that
reuses its id, and no activation is kept alive (a reference without a callback: Python
hands out one such reference per tensor, and nothing runs as each tensor dies). Module
calls come from :class:`~.trace.TorchRecorder` (:meth:`DataflowCapture.enter` /
:meth:`~DataflowCapture.exit`); functional operations run directly in a non-leaf module's
forward (residual adds, softmax, matmuls outside modules) come from :class:`GraphMode`, a
``TorchFunctionMode`` the recorder keeps on only while such a module's own code runs.
Shape-only operations (view, transpose, ...) are contracted into the edge (``via``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ...core.inputs import leaves, tensors_in
from ...core.trace import Dataflow
from ...dtypes import dtype_name

__all__ = ["SHAPE_OPS", "DataflowCapture", "GraphMode"]

SHAPE_OPS = frozenset(
    {
        "view", "reshape", "transpose", "permute", "contiguous", "__getitem__", "chunk", "split",
        "unsqueeze", "squeeze", "expand", "flatten", "unflatten", "to", "float", "half", "bfloat16",
        "type_as", "detach", "clone", "narrow", "t", "movedim", "unbind", "view_as", "expand_as",
        "select", "split_with_sizes", "type", "mT", "T", "__get__", "tensor_split", "swapaxes",
        "astype", "expand_dims", "moveaxis", "broadcast_to", "stop_gradient",
    }
)  # fmt: skip
"""Functions that only view, reshape, cast or copy: an edge passes through them."""

# In-place dunders (``x += y``): the op becomes the producer of the tensor it changed.
_INPLACE_DUNDERS = frozenset(
    f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "matmul")
) | {"__setitem__"}


def _inplace(name: str) -> bool:
    return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("__"))


def _torch_nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class DataflowCapture:
    """Fills a :class:`~nbinspect.core.trace.Dataflow` during one forward pass. Torch tensors
    by default; the MLX trace passes its array type, dtype namer and byte count, and
    ``weak=False`` (it keeps every array alive while it runs, so ids stay unique)."""

    def __init__(
        self,
        leaf_modules: set[int],
        array: type[Any] = torch.Tensor,
        name_dtype: Callable[[Any], str] = dtype_name,
        nbytes: Callable[[Any], int] = _torch_nbytes,
        weak: bool = True,
    ):
        self.array, self.name_dtype, self.nbytes, self.weak = array, name_dtype, nbytes, weak
        self.graph = Dataflow()
        self.leaf_modules = leaf_modules  # id() of modules without children: their call is the node
        self.stack: list[int] = []  # node ids of the calls running
        self.in_leaf = 0
        # id(tensor) -> (producer node, tensor number, contracted shape ops, weakref or None)
        self.producer: dict[int, tuple[int, int, str, Any]] = {}
        self.tensors = 0
        # id(parameter or buffer) -> its path; a view of one is mapped with producer -1 and its path
        self.param_names: dict[int, str] = {}
        self.dtype_names: dict[Any, str] = {}  # name_dtype's answers: a look-up, not a call, per edge

    def _dtype_name(self, dtype: Any) -> str:
        name = self.dtype_names[dtype] = self.name_dtype(dtype)
        return name

    # ---- tensors

    def _of(self, t: Any) -> tuple[int, int, str, Any] | None:
        """The producer entry of `t`; None for none, or for a dead tensor's whose id `t` reuses."""
        found = self.producer.get(id(t))
        if found is not None and found[3] is not None and found[3]() is not t:
            return None
        return found

    def produced(self, t: Any, node: int, number: int | None = None, via: str = "") -> None:
        ref = None
        if self.weak:
            try:
                ref = weakref.ref(t)
            except TypeError:  # not weak-referenceable: not tracked
                return
        if number is None:
            number = self.tensors
            self.tensors += 1
        self.producer[id(t)] = (node, number, via, ref)

    def consumed(self, t: Any, node: int, inplace: bool = False) -> None:
        found = self._of(t)
        if found is None or found[0] < 0:  # no producer: a parameter or buffer read directly?
            name = found[2] if found is not None else self.param_names.get(id(t))
            if name is not None and self.graph.kind[node] == "op":
                self.graph.params.setdefault(node, []).append(name)
            return
        if found[0] == node:
            return
        g = self.graph
        g.src.append(found[0])
        g.dst.append(node)
        g.tensor.append(found[1])
        g.shape.append(tuple(t.shape))
        g.dtype.append(self.name_dtype(t.dtype))
        g.nbytes.append(self.nbytes(t))
        g.via.append(found[2])
        g.inplace.append(inplace)

    def inputs(self, named: dict[str, Any]) -> None:
        """An ``input`` node for each tensor among the model's arguments, named by its path
        (``0``, ``input_ids``, ``pixel_values``, ``batch.mask``)."""
        for path, value in leaves(named):
            if isinstance(value, self.array):
                self.produced(value, self.graph.add_node("input", path, -1))

    # ---- calls (from the recorder)

    def enter(self, module: Any, index: int, name: str, args: tuple, kwargs: dict) -> int:
        return self.enter_key(id(module), index, name, args, kwargs)

    def enter_key(self, key: int, index: int, name: str, args: tuple, kwargs: dict) -> int:
        g = self.graph
        node = g.add_node("call", name, self.stack[-1] if self.stack else -1, index)
        if key in self.leaf_modules:
            for t in tensors_in((args, kwargs) if kwargs else args, self.array):
                self.consumed(t, node)
            self.in_leaf += 1
        self.stack.append(node)
        return node

    def enter_one(self, key: int, index: int, name: str, x: Any, shape: tuple, nbytes: int) -> int:
        """:meth:`enter` for a call with one positional tensor argument (most calls), inlined:
        the same node and edge, without the generic walk over the arguments. `shape` and
        `nbytes` are `x`'s, as the recorder read them for the call."""
        g, stack = self.graph, self.stack
        node = len(g.kind)
        g.kind.append("call")
        g.name.append(name)
        g.parent.append(stack[-1] if stack else -1)
        g.call.append(index)
        g.last.append(node)
        if key in self.leaf_modules:
            found = self.producer.get(id(x))  # consumed(): an edge from a live producer
            if found is not None and found[0] >= 0 and found[0] != node and (found[3] is None or found[3]() is x):
                g.src.append(found[0])
                g.dst.append(node)
                g.tensor.append(found[1])
                g.shape.append(shape)
                dtype = self.dtype_names.get(x.dtype)
                g.dtype.append(dtype if dtype is not None else self._dtype_name(x.dtype))
                g.nbytes.append(nbytes)
                g.via.append(found[2])
                g.inplace.append(False)
            self.in_leaf += 1
        stack.append(node)
        return node

    def exit_one(self, key: int, node: int, out: Any) -> None:
        """:meth:`exit` for a call inside another that returned one tensor, inlined."""
        stack = self.stack
        if len(stack) < 2 or stack[-1] != node:  # the root, or an unusual stack: the general way
            self.exit_by_key(key, node, out)
            return
        stack.pop()
        if key in self.leaf_modules:
            self.in_leaf -= 1
        g = self.graph
        g.last[node] = len(g.kind) - 1
        found = self.producer.get(id(out))  # _own(): made before the call (or a dead id's entry)
        if found is None or found[0] < node or (found[3] is not None and found[3]() is not out):
            ref = None  # produced(), inlined
            if self.weak:
                try:
                    ref = weakref.ref(out)
                except TypeError:  # not weak-referenceable: not tracked
                    return
            self.producer[id(out)] = (node, self.tensors, "", ref)
            self.tensors += 1

    def exit_by_key(self, key: int, node: int, output: Any) -> None:
        self._leave_key(key, node)
        self._exited(node, output)

    def exit(self, module: Any, node: int, output: Any) -> None:
        """A call returned: its outputs made outside it (a leaf's, a pass-through module's)
        get it as their producer; the root's outputs each feed an ``output`` node."""
        self._leave(module, node)
        self._exited(node, output)

    def _exited(self, node: int, output: Any) -> None:
        g = self.graph
        if not self.stack:
            for path, t in leaves(output, "output"):
                if isinstance(t, self.array):
                    self._own(t, node)
                    self.consumed(t, g.add_node("output", path, -1))
            return
        for t in tensors_in(output, self.array):
            self._own(t, node)

    def _own(self, t: Any, node: int) -> None:
        found = self._of(t)
        if (
            found is None or found[0] < node
        ):  # includes a parameter's view (-1)  # made before the call: it passed through
            self.produced(t, node)

    def fail(self, module: Any, node: int) -> None:
        self._leave(module, node)

    def _leave(self, module: Any, node: int) -> None:
        self._leave_key(id(module), node)

    def _leave_key(self, key: int, node: int) -> None:
        if self.stack and self.stack[-1] == node:
            self.stack.pop()
        if key in self.leaf_modules:
            self.in_leaf -= 1
        self.graph.last[node] = len(self.graph.kind) - 1

    # ---- functional operations (from GraphMode)

    def operation(self, name: str, args: tuple, kwargs: dict | None, out: Any) -> None:
        array = self.array
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if name in SHAPE_OPS:  # contracted: the outputs carry their input's producer on
            src = self._of(args[0]) if args and isinstance(args[0], array) else None
            if src is None and args and id(args[0]) in self.param_names:
                path = self.param_names[id(args[0])]  # a view of a parameter (emb.weight.T)
                for t in outs:
                    if isinstance(t, array):
                        self.produced(t, -1, -1, path)
                return
            if src is not None and src[0] >= 0:
                via = f"{src[2]}·{name}" if src[2] else name
                for t in outs:
                    if isinstance(t, array):
                        self.produced(t, src[0], src[1], via)
            return
        g = self.graph
        node = g.add_node("op", name, self.stack[-1])
        inplace = _inplace(name)
        ins = tensors_in((args, kwargs) if kwargs else args, array)
        for i, t in enumerate(ins):
            self.consumed(t, node, inplace and i == 0)
        if inplace and ins:
            self.produced(ins[0], node)
        for t in outs:
            if isinstance(t, array):
                self.produced(t, node)


class GraphMode(TorchFunctionMode):
    """Sees every torch function the forward pass calls and records those that run directly
    in a non-leaf module and return tensors (metadata calls return none: one check)."""

    def __init__(self, capture: DataflowCapture):
        super().__init__()
        self.capture = capture

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **kwargs) if kwargs else func(*args)
        capture = self.capture
        if capture.in_leaf or not capture.stack:
            return out
        if isinstance(out, torch.Tensor) or (
            isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor)
        ):
            capture.operation(getattr(func, "__name__", None) or str(func), args, kwargs, out)
        return out
