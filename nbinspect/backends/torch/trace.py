"""One forward pass, watched: every module call with its shapes, FLOPs and saved tensors.

:func:`run_trace` sees every module call by standing in for ``nn.Module.__call__`` (put
back in ``finally``), runs the forward pass once under a :class:`~.flops.FlopCounter` and a
:class:`~.activations.SavedTensorMeter`, and returns a :class:`TraceResult`: one
:class:`Call` per module call in execution order. :mod:`.trace_frames` turns it into the
``flow`` frame and the trace columns of ``layers``.

Models on the meta device run under ``FakeTensorMode``: parameters and buffers are
swapped for fake tensors (on the CPU, so autocast and CPU attention kernels apply) for the
duration of the call and put back afterwards, so shapes, FLOPs and saved-tensor sizes
come out without allocating anything, and code that calls ``.item()`` on a mask
(transformers) still runs.

Nothing about the model changes: modes, parameters, buffers (BatchNorm running stats are
put back), gradients (backward FLOPs use ``torch.autograd.grad``, which fills no
``.grad``), hooks, ``nn.Module.__call__`` and the global RNG state (forked) are as they
were, also on error.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import threading
from collections.abc import Iterator
from itertools import compress
from threading import get_ident
from typing import Any

import torch
from torch import nn

from ...core.gc_pause import gc_paused
from ...core.inputs import io_records, map_inputs, tensors_in
from ...core.trace import INDEX, OUTPUT_DTYPES, OUTPUT_SHAPES, STATUS, Call, Recorder, TraceResult, failure, finish
from ...dtypes import dtype_name
from ...errors import DTYPE_HINT, TraceError
from .activations import SavedTensorMeter, storage_ids
from .dataflow import DataflowCapture, GraphMode
from .fake_kernels import ShimmedFakeMode, stand_in
from .flops import FLASH_BACKWARD_NOTE, AutogradMarks, FlopCounter, coverage_note
from .linear_shortcut import linear_call, plain_linears
from .preserve import preserved
from .source import LAZY, ModelWalk

__all__ = ["TorchRecorder", "named_modules_of", "run_trace", "tensors_of"]

# Traces swap parameters for fakes, change train flags and restore buffers on modules that
# other threads may trace too: one at a time (re-entrant, a model may trace inside forward).
_TRACING = threading.RLock()


class TorchRecorder(Recorder):
    """Sees every call of the model's modules by standing in for ``nn.Module.__call__``
    while attached: one Python frame around torch's own call (a fraction of a microsecond,
    against 2-3 us for torch's global hook pair), and it sees what a caller sees: the
    arguments (keyword ones too) before any forward pre-hook, the output after every
    forward hook, and an exception from the module or its hooks as it passes. Calls of
    other modules, and calls other threads make at the same time, go straight through.

    With `dataflow` it records producer -> consumer edges too, and keeps its
    :class:`~.dataflow.GraphMode` on torch's function-mode stack only while a module with
    children runs its own code, the one place the mode records anything: under a
    ``TorchFunctionMode`` every torch function and every tensor attribute read from Python
    (``x.shape``) goes through Python (~8 us on a ``Linear``'s attribute against 0.15), so
    the mode is taken off for leaf modules and for the recorder's own reads.

    It keeps each call as a row (a list in ``core.trace.ROW`` order), not a :class:`Call`:
    `calls`, `stack`, `outside` and `failures` hold rows; the result makes Calls from them."""

    marks: AutogradMarks | None = None  # set to mark autograd sequence numbers at call boundaries

    def __init__(self, named_modules: list[tuple[str, nn.Module]], dataflow: DataflowCapture | None = None):
        super().__init__(named_modules)
        self.outside = [-1, "", "", 0, None, 0, [], 0, 0, None, None, 0, 0, 0, "ok"]
        self.dataflow = dataflow
        self.graph_mode = GraphMode(dataflow) if dataflow is not None else None
        # id() of the plain nn.Linear modules whose calls the trace may run itself (see
        # .linear_shortcut), the FLOP counter and the saved-tensor meter; set before attach
        self.quick: set[int] = set()
        self.counter: Any = None  # FlopCounter
        self.meter: Any = None  # SavedTensorMeter

    def attach(self) -> None:
        _install(self)

    def detach(self) -> None:
        _uninstall(self)
        # A stand-in someone else's patch of Module.__call__ put back later must not record
        # into a finished trace: with no modules of its own it lets every call through.
        self.info.clear()

    def failed_call(self, exc: BaseException) -> Call | None:
        found: Any = super().failed_call(exc)  # a row
        return Call.of(found) if found is not None else None

    def _wrap(self, inner: Any) -> Any:
        """A ``Module.__call__`` that records this model's calls around `inner`. Everything
        it reads per call is bound here: this runs once per module call."""
        info_of, calls, stack, raised, thread = self.info.get, self.calls, self.stack, self.raised, self.thread
        flow, marks, mode = self.dataflow, self.marks, self.graph_mode
        linear = linear_call(self.counter, self.meter.pack, inner) if self.quick and self.meter is not None else None
        quick = self.quick if linear is not None else ()
        leaves = flow.leaf_modules if flow is not None else set()
        Tensor = torch.Tensor
        # popping returns the mode: 3x cheaper than reading the top (_get_function_stack_at)
        depth, pop, push = (
            torch._C._len_torch_function_stack,
            torch._C._pop_torch_function_stack,
            torch._C._push_on_torch_function_stack,
        )

        def __call__(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            key = id(module)
            info = info_of(key)
            if info is None or get_ident() != thread:  # not one of this model's modules, or not our call
                return inner(module, *args, **kwargs)
            # The mode on top (called from a parent's own code): off until this call returns.
            # Under another mode, or inside a torch function's handler (the mode stashed),
            # it stays as it is: leaf calls then pass through it unrecorded, as before.
            took = False
            if mode is not None and depth():
                top = pop()
                took = top is mode
                if not took:
                    push(top)
            x = args[0] if not kwargs and len(args) == 1 else None
            if isinstance(x, Tensor):  # the common case, kept cheap
                shape, nbytes = tuple(x.shape), x.nbytes
                shapes = [shape]
            else:
                x = None
                tensors = tensors_in((args, kwargs) if kwargs else args)
                shapes, nbytes = [tuple(t.shape) for t in tensors], sum({id(t): t.nbytes for t in tensors}.values())
            n = info[2]
            info[2] = n + 1
            index = len(calls)
            # its row (core.trace.ROW): index, name, type, depth, parent, call, input_shapes, input_bytes,
            # module_id, output_shapes, output_dtypes, own_flops, own_backward_flops, own_activation_bytes, status
            parent = stack[-1][INDEX] if stack else None
            call = [index, info[0], info[1], len(stack), parent, n, shapes, nbytes, key, None, None, 0, 0, 0, "ok"]
            calls.append(call)
            stack.append(call)
            own_mode = False
            if flow is not None:
                if x is not None:
                    node = flow.enter_one(key, index, info[0], x, shape, nbytes)
                else:
                    node = flow.enter(module, index, info[0], args, kwargs)
                # a module with children records the ops its own code runs: the mode on
                # again, unless it already is (under another mode) or is stashed
                own_mode = key not in leaves and (took or len(stack) == 1)
            if marks is not None:
                marks.mark(index)
            if own_mode:
                push(mode)
            try:
                # x: the one positional tensor argument, if that is all there is
                output = linear(module, x, call) if x is not None and key in quick else None  # type: ignore[misc]
                if output is None:  # torch's way
                    output = inner(module, *args, **kwargs)
            except BaseException as exc:
                if own_mode and depth() and (top := pop()) is not mode:
                    push(top)
                stack.pop()
                if marks is not None:
                    marks.mark(stack[-1][INDEX] if stack else -1)
                if flow is not None:
                    flow.fail(module, node)
                if raised(call, exc):
                    call[STATUS] = "failed"
                    _output_before_hook(call, module, exc)
                else:  # raised by a call inside this one
                    call[STATUS] = "interrupted"
                if took:
                    push(mode)
                raise
            if own_mode and depth() and (top := pop()) is not mode:
                push(top)
            stack.pop()
            if marks is not None:
                marks.mark(stack[-1][INDEX] if stack else -1)
            if isinstance(output, Tensor):
                if flow is not None:
                    flow.exit_one(key, node, output)
                call[OUTPUT_SHAPES], call[OUTPUT_DTYPES] = [tuple(output.shape)], [output.dtype]
            else:
                if flow is not None:
                    flow.exit(module, node, output)
                tensors = tensors_in(output)
                call[OUTPUT_SHAPES], call[OUTPUT_DTYPES] = [tuple(t.shape) for t in tensors], [t.dtype for t in tensors]
            if took:
                push(mode)
            return output

        return __call__


# Recorders attached now, innermost last, each with the ``Module.__call__`` it installed
# around the one before it, so nested traces (a model tracing inside its forward) and a
# trace inside a ``watch`` block all see the calls; detaching out of order (threads)
# rebuilds the chain above without it.
_attached: list[tuple[TorchRecorder, Any]] = []
_attach_lock = threading.Lock()
_original_call: Any = None  # Module.__call__ as found when the first recorder attached


def _install(recorder: TorchRecorder) -> None:
    global _original_call
    with _attach_lock:
        if not _attached:
            _original_call = nn.Module.__dict__["__call__"]
        _attached.append((recorder, recorder._wrap(_attached[-1][1] if _attached else _original_call)))
        nn.Module.__call__ = _attached[-1][1]  # type: ignore[method-assign]


def _uninstall(recorder: TorchRecorder) -> None:
    with _attach_lock:
        at = next((i for i, (r, _) in enumerate(_attached) if r is recorder), None)
        if at is None:  # not attached
            return
        above = [r for r, _ in _attached[at + 1 :]]
        del _attached[at:]
        for r in above:
            _attached.append((r, r._wrap(_attached[-1][1] if _attached else _original_call)))
        nn.Module.__call__ = _attached[-1][1] if _attached else _original_call  # type: ignore[method-assign]


def _output_before_hook(call: list, module: nn.Module, exc: BaseException) -> None:
    """If `module`'s forward returned and one of its forward hooks raised, record the
    forward's output (torch's ``_call_impl`` holds it as ``result``), so the error can say
    it was the hook. A forward that returned None cannot be told from one that raised:
    the error then names the module, not its hook."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "inner" and frame.f_locals.get("self") is module:
            result = frame.f_locals.get("result")
            if result is not None:
                tensors = tensors_in(result)
                call[OUTPUT_SHAPES], call[OUTPUT_DTYPES] = [tuple(t.shape) for t in tensors], [t.dtype for t in tensors]
            return
        tb = tb.tb_next


@contextlib.contextmanager
def _quiet_fake_errors() -> Iterator[None]:
    """FakeTensorMode logs a full traceback when an op fails on fake tensors; the failure
    reaches the caller as a one-line TraceError, so the log is only noise on stderr."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    quiet = logging.Filter("-")  # a filter named after no logger rejects every record
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


_IS_META = operator.attrgetter("is_meta")
_CHILDREN = operator.attrgetter("_modules")
_SECOND = operator.itemgetter(1)


def _leaves(modules: list[nn.Module]) -> set[int]:
    """id() of the modules without children (or with only None in their place), sorted
    in C: Python runs only for the modules that have some (containers, the few)."""
    children = list(map(_CHILDREN, modules))
    leaves = set(map(id, compress(modules, map(operator.not_, children))))
    leaves.update(id(m) for m in compress(modules, children) if all(c is None for c in m._modules.values()))
    return leaves


def named_modules_of(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """``list(model.named_modules())``: each module once, at its first path, in pre-order,
    without torch's generator per level of nesting (3x the cost on a deep or wide model)."""
    out: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()
    todo: list[tuple[str, nn.Module]] = [("", model)]
    while todo:
        path, m = todo.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.append((path, m))
        if m._modules:
            prefix = f"{path}." if path else ""
            kids = [(prefix + k, c) for k, c in m._modules.items() if c is not None]
            children = list(map(_SECOND, kids))
            ids = list(map(id, children))
            # children that are all leaves, each new: the next ones in pre-order, added in C
            if not any(map(_CHILDREN, children)) and seen.isdisjoint(ids) and len(set(ids)) == len(ids):
                out += kids
                seen.update(ids)
            else:
                todo += reversed(kids)
    return out


def _tensor_paths(named_modules: list[tuple[str, nn.Module]]) -> dict[int, str]:
    """id -> first path of every parameter and buffer now in the modules (fakes during a fake trace)."""
    out: dict[int, str] = {}
    for path, m in named_modules:
        for table in (m._parameters, m._buffers):
            for name, t in table.items():
                if t is not None:
                    out.setdefault(id(t), f"{path}.{name}" if path else name)
    return out


def tensors_of(modules: list[nn.Module]) -> list[torch.Tensor]:
    """Every parameter and buffer of `modules` (a tied one at each place it appears)."""
    out: list[torch.Tensor | None] = []
    for m in modules:
        if m._parameters:
            out += m._parameters.values()
        if m._buffers:
            out += m._buffers.values()
    return [t for t in out if t is not None]


def _device_dtype(tensors: list[torch.Tensor]) -> tuple[torch.device, torch.dtype]:
    device = tensors[0].device if tensors else torch.device("cpu")
    dtype = next((t.dtype for t in tensors if t.is_floating_point()), torch.get_default_dtype())
    return device, dtype


def _holds_script_objects(modules: list[nn.Module]) -> bool:
    """Whether a module keeps a TorchScript object (the packed weights of quantized layers)."""
    return any(isinstance(v, torch.ScriptObject) for m in modules for v in vars(m).values())


@contextlib.contextmanager
def _faked(
    modules: list[nn.Module], fake_mode, device: torch.device | None, param_dtype: torch.dtype | None
) -> Iterator[list[torch.Tensor]]:
    """Swap every parameter and buffer for a fake stand-in (tied tensors share one; no memory
    is copied) and put the originals back however the block ends. Done on each module's own
    dicts, once per module object: ``torch.func.functional_call`` leaves fakes behind on a
    module registered at two paths."""
    memo: dict[int, torch.Tensor] = {}
    swapped: list[tuple[dict[str, Any], str, Any]] = []
    try:
        for m in modules:
            tables: tuple[dict[str, Any], ...] = (m._parameters, m._buffers)
            for table in tables:
                for name, t in table.items():
                    if t is None:
                        continue
                    fake = memo.get(id(t))
                    if fake is None:
                        fake = memo[id(t)] = stand_in(t, fake_mode, device, param_dtype)
                    swapped.append((table, name, t))
                    table[name] = fake
        yield list(memo.values())
    finally:
        for table, name, t in reversed(swapped):
            table[name] = t


def _backward(output: Any, wrt: list[torch.Tensor], counter: FlopCounter) -> None:
    outs = [t for t in tensors_in(output) if t.requires_grad and t.is_floating_point()]
    wrt = [t for t in wrt if t.requires_grad]
    if not outs or not wrt:
        return
    counter.in_backward = True
    torch.autograd.grad(outs, wrt, grad_outputs=[torch.ones_like(t) for t in outs], allow_unused=True)


@gc_paused()  # from the start: the setup allocates per module and tensor too
def run_trace(
    model: nn.Module,
    args: tuple = (),
    kwargs: dict | None = None,
    *,
    backward: bool = False,
    flops: bool = True,
    input_dtype: torch.dtype | None = None,
    training: bool | None = None,
    fake: bool | None = None,
    param_dtype: torch.dtype | None = None,
    autocast_dtype: torch.dtype | None = None,
    batch_size: int | None = None,
    graph: bool = True,
    walk: ModelWalk | None = None,
) -> TraceResult:
    """Run ``model(*args, **kwargs)`` once and record every module call.

    Shape tuples among the inputs become zeros of `input_dtype` (default: the model's
    floating dtype) on the model's device. `training` sets train/eval mode for the call,
    `param_dtype` casts floating parameters and `autocast_dtype` runs under
    ``torch.autocast``; `batch_size` resizes the first dimension of every input tensor.
    `flops=False` skips FLOP counting (its dispatch mode is most of the trace's cost);
    `graph=False` skips recording the dataflow (``result.dataflow``, see :mod:`.dataflow`).
    `fake` forces (or forbids) FakeTensorMode; by default it is used for meta models, and
    whenever the parameters are cast or the batch resized, so the model is never touched.
    `walk`: the model's tree as :func:`.source.from_module` just walked it (the trace then
    does not walk it again). Raises :class:`TraceError` naming the module that failed.
    """
    if not isinstance(model, nn.Module):
        what = "a checkpoint or state_dict (no forward pass to run)" if model is None else type(model).__name__
        raise TypeError(f"tracing needs a live torch.nn.Module, got {what}")
    kwargs = dict(kwargs or {})
    if backward and not flops:
        raise ValueError("backward=True counts backward FLOPs, so it needs flops=True")
    if walk is None:
        named_modules = named_modules_of(model)
        walk = ModelWalk(named_modules, tensors_of(list(map(_SECOND, named_modules))), {})
    named_modules, model_tensors = walk.named_modules, walk.tensors
    _refuse_lazy(named_modules, model_tensors)
    modules = list(map(_SECOND, named_modules))
    device, model_dtype = _device_dtype(model_tensors)
    dtype = input_dtype or param_dtype or model_dtype
    given = tensors_in((args, kwargs))
    # any meta tensor: a model built with empty weights keeps real buffers beside meta parameters
    on_meta = any(map(_IS_META, model_tensors)) or any(map(_IS_META, given))
    use_fake = fake if fake is not None else (on_meta or param_dtype is not None or batch_size is not None)
    recorder = TorchRecorder(named_modules, DataflowCapture(_leaves(modules)) if graph else None)
    name = type(model).__name__

    shapes_given: list[tuple] = []

    def resize(t: torch.Tensor) -> torch.Tensor:
        if batch_size is None or t.dim() == 0:
            return t
        return torch.zeros((batch_size, *t.shape[1:]), dtype=t.dtype, device=t.device)

    def zeros(shape: tuple) -> torch.Tensor:
        shapes_given.append(shape)
        return resize(torch.zeros(shape, dtype=dtype, device=device))

    # Inference tensors (made under torch.inference_mode) cannot be saved for backward:
    # given inputs are cloned into normal ones; a model whose own tensors are inference
    # tensors runs in inference mode, and what autograd would save is not measured.
    inference_model = any(map(torch.Tensor.is_inference, model_tensors))
    if inference_model and backward:
        raise ValueError("backward=True needs autograd, and the model's tensors are inference tensors")
    own_tensor = (lambda t: t.clone() if t.is_inference() else t) if not inference_model else (lambda t: t)

    with _TRACING, contextlib.ExitStack() as stack:  # one trace at a time: they swap and restore shared state
        stack.enter_context(torch.inference_mode(inference_model))
        stack.enter_context(preserved(modules, model_tensors, training, real=not use_fake))
        if use_fake:
            stack.enter_context(_quiet_fake_errors())
            fake_mode = stack.enter_context(ShimmedFakeMode(allow_non_fake_inputs=True))
            # FakeTensorMode's op cache (shared by every trace of the process) compares keys
            # holding a quantized layer's packed weights, which cannot be compared: the second
            # trace of such a model failed there and fell back to a real run, scaled
            fake_mode.cache_enabled = not _holds_script_objects(modules)
            stand_in_device = torch.device("cpu") if on_meta else None
            device = stand_in_device or device
            params = stack.enter_context(_faked(modules, fake_mode, stand_in_device, param_dtype))
            args, kwargs = map_inputs(
                (args, kwargs), lambda t: resize(stand_in(own_tensor(t), fake_mode, stand_in_device, None)), zeros
            )
        else:
            args, kwargs = map_inputs((args, kwargs), own_tensor, zeros)
            params = model_tensors
        inputs = tensors_in((args, kwargs))
        exclude = storage_ids([*params, *inputs])
        if backward and AutogradMarks.available():
            recorder.marks = AutogradMarks()
        counter = FlopCounter(
            recorder.stack, recorder.outside, recorder.calls, tag_nodes=backward, marks=recorder.marks
        )
        if flops and not backward and not use_fake and not inference_model:  # forward FLOPs of plain tensors only
            recorder.quick, recorder.counter = plain_linears(modules), counter
        meter = recorder.meter = SavedTensorMeter(recorder.stack, recorder.outside, exclude)
        inputs_io = io_records({**{str(i): a for i, a in enumerate(args)}, **kwargs}, "")
        result = TraceResult(recorder.calls, inputs_io, None, counter.uncounted, flops, backward, use_fake)
        capture = recorder.dataflow
        if capture is not None:
            # the fakes' ids when swapped in; the walk's paths hold the real tensors'
            capture.param_names = walk.paths if walk.paths and not use_fake else _tensor_paths(named_modules)
            capture.inputs({**{str(i): a for i, a in enumerate(args)}, **kwargs})
            result.dataflow = capture.graph
        if not inference_model:
            stack.enter_context(torch.enable_grad())
        if autocast_dtype is not None:
            stack.enter_context(torch.autocast(device.type, dtype=autocast_dtype))
        stack.callback(recorder.detach)
        recorder.attach()
        with meter, counter if flops else contextlib.nullcontext():
            try:
                output = model(*args, **kwargs)  # the recorder puts the graph's mode on and off
            except Exception as exc:
                message = failure(recorder, exc, name) + (_dtype_hint(exc, dtype) if shapes_given else "")
                if use_fake:
                    message += " [traced on fake tensors: values are unknown, only shapes]"
                raise TraceError(message, finish(result, coverage_note)) from exc
            counter.tag_pending()
            result.outputs = io_records(output, "output")
            if backward:
                _backward(output, [*params, *inputs], counter)
    finish(result, coverage_note)
    if counter.flash_backward:
        result.totals["flops_note"] += FLASH_BACKWARD_NOTE
    if inference_model:
        result.totals["activation_bytes"] = None
        result.totals["flops_note"] += (
            " Saved-for-backward bytes not measured: the model's tensors are inference tensors"
            " (made under torch.inference_mode), so autograd cannot run on them."
        )
    return result


def _refuse_lazy(named_modules: list[tuple[str, nn.Module]], tensors: list[torch.Tensor]) -> None:
    """One line instead of torch's paragraph for a model whose lazy modules have not run yet:
    their first forward would make the parameters, and the trace never changes the model."""
    if not any(issubclass(kind, LAZY) for kind in set(map(type, tensors))):  # a few types: no lazy tensor
        return
    lazy = [
        f"{type(m).__name__} '{path}'"
        for path, m in named_modules
        if any(isinstance(t, LAZY) for t in (*m._parameters.values(), *m._buffers.values()))
    ]
    shown = ", ".join(lazy[:3]) + (f" and {len(lazy) - 3} more" if len(lazy) > 3 else "")
    raise ValueError(
        f"{shown}: lazy, not initialized yet; run the model once on a real input to make its parameters"
        " (nbinspect does not: it never changes the model)"
    )


def _dtype_hint(exc: Exception, dtype: torch.dtype) -> str:
    text = str(exc)
    if not dtype.is_floating_point or ("Long" not in text and "indices" not in text):
        return ""
    return f" (inputs built from shapes are {dtype_name(dtype)}; {DTYPE_HINT} for token ids)"
