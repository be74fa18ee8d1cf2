"""One forward pass of an MLX model, watched: every module call with its shapes and FLOPs.

MLX has no forward hooks. For the duration of the call each of the model's module objects
is switched to a subclass of its own class whose ``__call__`` records the call and then
runs the original (``type(m).__call__`` is what ``m(x)`` runs, so an instance attribute
would not do); the FLOP functions of :mod:`.mlx_flops` are patched the same way. Both are
put back in ``finally``: afterwards every module has its own class again, nothing is left
in its dict, and train/eval flags, parameters and MLX's random key are as they were, also
when the forward raises.

The calls are the torch trace's :class:`~.trace.Call` records and the result a
:class:`~.trace.TraceResult`, so the ``flow`` frame and the trace columns of ``layers``
come out of :mod:`.trace_frames` unchanged. Activation bytes are the bytes of the arrays
each call returns, each array once, at the call that returned it first (parameters and the
model's inputs left out): what a training step keeps for backward in the worst case.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ...core.inputs import io_records, map_inputs, tensors_in
from ...core.trace import Call, Recorder, TraceResult, add_block_totals, failure, finish
from ...errors import TraceError
from ..torch.dataflow import DataflowCapture
from .flops import LAYER_FORMULAS, coverage_note, einsum_flops, matmul_flops, sdpa_flops
from .source import flat_arrays, mlx_dtype_name, module_objects

__all__ = ["run_mlx_trace", "watch_mlx"]


def _arrays(obj: Any) -> list:
    import mlx.core as mx

    return tensors_in(obj, mx.array)


def _torch_dtype(dtype: Any) -> torch.dtype:
    # the frames name dtypes as torch does; every MLX dtype has a torch namesake
    return getattr(torch, mlx_dtype_name(dtype))


class MlxRecorder(Recorder):
    """The torch recorder's bookkeeping (calls, nesting, failures), fed by wrapped
    ``__call__`` methods instead of hooks; also counts FLOPs and output bytes."""

    def __init__(self, model: Any, exclude: set[int], flops: bool):
        import mlx.nn as nn

        named = module_objects(model)
        super().__init__(named)
        self.objects = [m for _, m in named]
        self.flops = flops
        self.exclude = exclude  # ids of arrays that are not activations (parameters, inputs)
        self.kept: list = [flat_arrays(model.parameters())]  # every array seen, so ids stay unique while the trace runs
        self.uncounted: Counter = Counter()
        self.inside_formula = 0  # > 0 while a layer counted from its shapes runs
        self.formulas = {getattr(nn, name): f for name, f in LAYER_FORMULAS.items() if hasattr(nn, name)}
        self.leaf = {id(m): not any(isinstance(c, nn.Module) for c in _children(m)) for m in self.objects}
        self._swapped: list[tuple[Any, type]] = []
        self._patched: list[tuple[Any, str, Any]] = []
        self.dataflow: DataflowCapture | None = None  # set to record producer -> consumer edges too
        self.graph_nodes: dict[int, int] = {}  # call index -> its dataflow node, while it runs

    def formula(self, cls: type) -> Callable | None:
        return next((self.formulas[k] for k in cls.__mro__ if k in self.formulas), None)

    # ------------------------------------------------------------- attach / detach
    def attach(self) -> None:
        wrappers: dict[type, type] = {}
        for m in self.objects:
            cls = type(m)
            if cls not in wrappers:
                wrappers[cls] = _wrapper_class(cls, self)
            self._swapped.append((m, cls))
            object.__setattr__(m, "__class__", wrappers[cls])
        if self.flops:
            self._patch_functions()
        if self.dataflow is not None:
            self._patch_graph_functions(self.dataflow)

    def detach(self) -> None:
        for m, cls in reversed(self._swapped):
            object.__setattr__(m, "__class__", cls)
        self._swapped.clear()
        for owner, attr, original in reversed(self._patched):
            setattr(owner, attr, original)
        self._patched.clear()

    def _patch_functions(self) -> None:
        import mlx.core as mx

        def shapes(*arrays: Any) -> list[tuple[int, ...]]:
            return [tuple(a.shape) for a in arrays]

        counted: list[tuple[Any, str, Callable[..., int | None]]] = [
            (mx, "matmul", lambda a, b, *_, **__: matmul_flops(*shapes(a, b))),
            (mx, "addmm", lambda c, a, b, *_, **__: matmul_flops(*shapes(a, b))),
            (mx, "einsum", lambda spec, *ops, **__: einsum_flops(spec, shapes(*ops))),
            (mx.fast, "scaled_dot_product_attention", lambda q, k, v, *_, **__: sdpa_flops(*shapes(q, k, v))),
            (mx.array, "__matmul__", lambda a, b, *_, **__: matmul_flops(*shapes(a, b))),
        ]
        for owner, attr, flops_of in counted:
            original = getattr(owner, attr)
            self._patched.append((owner, attr, original))
            setattr(owner, attr, _counting(original, flops_of, self, attr))

    def _patch_graph_functions(self, capture: DataflowCapture) -> None:
        """The functional operations a forward pass runs between modules (MLX has no function
        mode): arithmetic on arrays and the common ``mx`` functions, recorded while a
        non-leaf module runs."""
        import mlx.core as mx

        for owner, names in ((mx.array, _ARRAY_OPS), (mx, _MX_OPS)):
            for attr in names:
                original = getattr(owner, attr, None)
                if original is None:
                    continue
                self._patched.append((owner, attr, original))
                setattr(owner, attr, _recording(original, capture, attr.strip("_") if attr != "__getitem__" else attr))

    # ------------------------------------------------------------- calls
    def enter(self, module: Any, args: tuple, kwargs: dict) -> Call | None:
        key = id(module)
        info = self.info.get(key)
        if info is None or (self.stack and self.stack[-1].module_id == key):
            return None  # not this model's, or a super().__call__ of the same module
        arrays = _arrays((args, kwargs))
        n = info[2]
        info[2] = n + 1
        stack = self.stack
        call = Call(
            len(self.calls),
            info[0],
            info[1],
            len(stack),
            stack[-1].index if stack else None,
            n,
            [tuple(a.shape) for a in arrays],
            sum({id(a): a.nbytes for a in arrays}.values()),
            key,
        )
        self.calls.append(call)
        stack.append(call)
        self.kept.append((args, kwargs))
        if self.dataflow is not None:
            self.graph_nodes[call.index] = self.dataflow.enter(module, call.index, call.name, args, kwargs)
        if self.formula(self._original(module)) is not None:
            self.inside_formula += 1
        return call

    def exit(self, call: Call, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        self.stack.pop()
        self.kept.append(output)
        outputs = _arrays(output)
        call.output_shapes = [tuple(a.shape) for a in outputs]
        call.output_dtypes = [_torch_dtype(a.dtype) for a in outputs]
        call.status = "ok"
        if self.dataflow is not None:
            self.dataflow.exit(module, self.graph_nodes.pop(call.index), output)
        for a in outputs:
            if id(a) not in self.exclude:
                self.exclude.add(id(a))
                call.own_activation_bytes += a.nbytes
        formula = self.formula(self._original(module))
        if formula is not None:
            self.inside_formula -= 1
        if not self.flops:
            return
        if formula is not None:
            try:
                call.own_flops += formula(module, _arrays((args, kwargs)), outputs)
                return
            except (KeyError, IndexError, ValueError, TypeError, AttributeError):
                pass  # a layer that does not look like its class: left uncounted
        if self.leaf[call.module_id] and not call.own_flops and any(_floating(a) for a in outputs):
            self.uncounted[call.type] += 1

    def fail(self, call: Call, module: Any, exc: BaseException) -> None:
        self.stack.pop()
        if self.dataflow is not None:
            self.dataflow.fail(module, self.graph_nodes.pop(call.index))
        if self.formula(self._original(module)) is not None:
            self.inside_formula -= 1
        call.status = "failed" if self.raised(call, exc) else "interrupted"

    def _original(self, module: Any) -> type:
        return type(module).__mro__[1]  # the wrapper's base: the module's own class

    def add_function_flops(self, flops: int | None, name: str) -> None:
        if self.inside_formula:
            return
        if flops is None:
            self.uncounted[name] += 1
        else:
            self.current().own_flops += flops


def _children(module: Any) -> list:
    out: list = []
    stack = list(module.values())
    while stack:
        v = stack.pop()
        if isinstance(v, dict) and not hasattr(v, "children"):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        else:
            out.append(v)
    return out


def _nbytes(a: Any) -> int:
    return int(a.nbytes)


def _floating(a: Any) -> bool:
    return _torch_dtype(a.dtype).is_floating_point


def _wrapper_class(cls: type, recorder: MlxRecorder) -> type:
    """A subclass of `cls` whose ``__call__`` reports to `recorder` around the original."""
    original = cls.__call__

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        call = recorder.enter(self, args, kwargs)
        if call is None:
            return original(self, *args, **kwargs)
        try:
            output = original(self, *args, **kwargs)
        except BaseException as exc:
            recorder.fail(call, self, exc)
            raise
        recorder.exit(call, self, args, kwargs, output)
        return output

    namespace = {"__call__": __call__, "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__slots__": ()}
    return type(cls.__name__, (cls,), namespace)


# What the graph records between modules: array arithmetic (``x + y``, ``a @ b``, indexing as a
# shape op) and the common functions of ``mlx.core``.
_ARRAY_OPS = (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__matmul__", "__getitem__",
    "swapaxes", "transpose", "reshape", "astype", "flatten", "squeeze", "split",
)  # fmt: skip
_MX_OPS = (
    "add", "subtract", "multiply", "divide", "matmul", "softmax", "concatenate", "split", "reshape",
    "transpose", "sigmoid", "exp", "tanh", "where", "maximum", "minimum", "sqrt", "rsqrt", "mean", "sum",
    "expand_dims", "swapaxes", "broadcast_to", "astype", "addmm", "einsum",
)  # fmt: skip


def _recording(original: Callable, capture: DataflowCapture, name: str) -> Callable:
    def recorded(*args: Any, **kwargs: Any) -> Any:
        output = original(*args, **kwargs)
        if capture.stack and not capture.in_leaf:
            outs = output if isinstance(output, (tuple, list)) else (output,)
            if outs and isinstance(outs[0], capture.array):
                capture.operation(name, args, kwargs, output)
        return output

    return recorded


def _counting(original: Callable, flops_of: Callable[..., int | None], recorder: MlxRecorder, name: str) -> Callable:
    def counted(*args: Any, **kwargs: Any) -> Any:
        output = original(*args, **kwargs)
        try:
            flops = flops_of(*args, **kwargs)
        except (AttributeError, IndexError, TypeError, ValueError):
            flops = None  # operands that are not arrays (a scalar): no shape to count from
        recorder.add_function_flops(flops, name)
        return output

    return counted


@contextlib.contextmanager
def _preserved(modules: list, training: bool | None) -> Iterator[None]:
    """Train/eval flags, the parameter tree and MLX's global random key as they were,
    however the block ends: a forward pass may replace arrays (BatchNorm's running
    statistics in training mode; MLX arrays are immutable, so putting the same objects
    back restores the values) and draw random numbers (Dropout). ``mx.random.seed(s)``
    sets the key to ``[s >> 32, s & 0xffffffff]``, so the key read before comes back exactly."""
    import mlx.core as mx

    state: Any = mx.random.state  # the stubs type it as a plain object; it holds the key array
    hi, lo = (int(v) for v in state[0].tolist())
    modes = [(m, m._training) for m in modules]
    arrays = [(m, dict(m.items())) for m in modules]
    try:
        if training is not None:
            for m in modules:
                m._training = training
        yield
    finally:
        for m, mode in modes:
            m._training = mode
        for m, items in arrays:
            for key, value in items.items():
                if m.get(key) is not value:
                    m[key] = value
        mx.random.seed((hi << 32) | lo)


def _parameter_ids(model: Any) -> set[int]:
    return {id(a) for a in flat_arrays(model.parameters())}


@contextlib.contextmanager
def watch_mlx(model: Any, *, flops: bool = True) -> Iterator[TraceResult]:
    """Record the MLX model's module calls made inside the block (the `%%inspect_model`
    cell magic); the yielded result is complete once the block has ended."""
    recorder = MlxRecorder(model, _parameter_ids(model), flops)
    result = TraceResult(recorder.calls, [], None, recorder.uncounted, flops, False, False)
    recorder.attach()
    try:
        yield result
    finally:
        recorder.detach()
        add_block_totals(_finish(result))


def _finish(result: TraceResult) -> TraceResult:
    return finish(result, coverage_note)


def mlx_dtype(dtype: Any) -> Any:
    """An MLX dtype from an MLX dtype, a torch dtype or a name ('int32', 'torch.int64')."""
    import mlx.core as mx

    if dtype is None or isinstance(dtype, mx.Dtype):
        return dtype
    name = str(dtype).rpartition(".")[2]
    found = getattr(mx, name, None)
    if not isinstance(found, mx.Dtype):
        raise ValueError(f"input_dtype {dtype!r} is not an MLX dtype (e.g. float32, bfloat16, int32)")
    return found


def run_mlx_trace(
    model: Any,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    backward: bool = False,
    flops: bool = True,
    input_dtype: Any = None,
    training: bool | None = None,
    batch_size: int | None = None,
    evaluate: bool = True,
    graph: bool = True,
) -> TraceResult:
    """Run ``model(*args, **kwargs)`` once and record every module call (see the module doc).

    Shape tuples among the inputs become zeros of `input_dtype` (an MLX or torch dtype or
    its name; default the model's floating dtype). `training` sets train/eval for the call,
    `batch_size` resizes the first dimension of every input array. With `evaluate` the
    outputs are computed (MLX is lazy) and MLX's own active / peak memory after the pass is
    reported in ``totals`` as a cross-check. `graph` records the dataflow (``result.dataflow``:
    module calls and the array operations between them). Raises :class:`TraceError` naming the module.
    """
    import mlx.core as mx

    if backward:
        raise ValueError("backward FLOPs are counted for torch models only: trace an MLX model with backward=False")
    kwargs = dict(kwargs or {})
    params = _parameter_ids(model)
    floating = [
        a.dtype for a in flat_arrays(model.parameters()) if a.dtype in (mx.float32, mx.float16, mx.bfloat16, mx.float64)
    ]
    dtype = mlx_dtype(input_dtype) or (floating[0] if floating else mx.float32)

    def resize(a: Any) -> Any:
        if batch_size is None or a.ndim == 0:
            return a
        return mx.zeros((batch_size, *a.shape[1:]), dtype=a.dtype)

    args, kwargs = map_inputs((args, kwargs), resize, lambda shape: resize(mx.zeros(shape, dtype=dtype)), mx.array)
    inputs = _arrays((args, kwargs))
    recorder = MlxRecorder(model, params | {id(a) for a in inputs}, flops)
    result = TraceResult(
        recorder.calls,
        io_records({**{str(i): a for i, a in enumerate(args)}, **kwargs}, "", mx.array, mlx_dtype_name),
        None,
        recorder.uncounted,
        flops,
        False,
        False,
    )
    if graph:
        capture = DataflowCapture(
            {k for k, leaf in recorder.leaf.items() if leaf}, mx.array, mlx_dtype_name, _nbytes, weak=False
        )
        capture.inputs({**{str(i): a for i, a in enumerate(args)}, **kwargs})
        recorder.dataflow, result.dataflow = capture, capture.graph
    name = type(model).__name__
    before = mx.get_active_memory()
    with _preserved(recorder.objects, training):
        recorder.attach()
        try:
            output = model(*args, **kwargs)
        except Exception as exc:
            raise TraceError(failure(recorder, exc, name), _finish(result)) from exc
        finally:
            recorder.detach()
        if evaluate:
            mx.reset_peak_memory()
            mx.eval(_arrays(output), *(_arrays(kept) for kept in recorder.kept))
    result.outputs = io_records(output, "output", mx.array, mlx_dtype_name)
    _finish(result)
    if evaluate:
        result.totals["measured_active_bytes"] = mx.get_active_memory() - before
        result.totals["measured_peak_bytes"] = mx.get_peak_memory()
    return result
