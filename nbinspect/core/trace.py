"""What a traced forward pass records, whatever the framework: one :class:`Call` per module
call in execution order, the :class:`TraceResult` that holds them, the :class:`Recorder`
bookkeeping (nesting, failures) a backend feeds from its own call interception, and the
roll-up of per-call figures into totals."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import first_line

__all__ = ["Call", "Dataflow", "Recorder", "TraceResult", "add_block_totals", "failure", "finish"]


class Call:
    """One call of one module. A plain slotted class: one is made per module call, and a
    dataclass's generated ``__init__`` costs four times as much."""

    __slots__ = (
        "activation_bytes",
        "backward_flops",
        "call",
        "depth",
        "flops",
        "index",
        "input_bytes",
        "input_shapes",
        "module_id",
        "name",
        "output_dtypes",
        "output_shapes",
        "own_activation_bytes",
        "own_backward_flops",
        "own_flops",
        "parent",
        "status",
        "type",
    )

    def __init__(self, index, name, type, depth, parent, call, input_shapes, input_bytes, module_id=0):
        self.index: int = index
        self.name: str = name  # first path of the module
        self.type: str = type
        self.depth: int = depth
        self.parent: int | None = parent
        self.call: int = call  # 0 for the module's first call, 1 for its second, ...
        self.input_shapes: list = input_shapes  # of tuples, as the frames show them
        self.input_bytes: int = input_bytes
        self.module_id: int = module_id
        self.output_shapes: list | None = None  # of tuples
        self.output_dtypes: list | None = None  # of torch.dtype
        self.own_flops = self.own_backward_flops = self.own_activation_bytes = 0
        self.flops = self.backward_flops = self.activation_bytes = 0  # own + calls inside, set by finish
        self.status = "ok"  # or failed (raised here) or interrupted (a call inside it raised), set as it raises


class Dataflow:
    """Which node produced each tensor another node consumed, in one forward pass.

    Nodes are module calls (``call``), functional operations run directly inside a
    non-leaf module (``op``), the model's inputs (``input``) and outputs (``output``), one id
    space in creation order: a call gets its id when it is entered, so every node made
    while it runs has a larger id and ``c <= n <= last[c]`` means "n ran inside c". Edges
    are at the finest level (op nodes and leaf calls); a view lifts them to what it shows.
    Plain columns: the backend appends, ``analyze/graph.py`` builds the frames."""

    def __init__(self) -> None:
        self.kind: list[str] = []
        self.name: list[str] = []  # module path (calls), function name (ops), input/output path
        self.parent: list[int] = []  # node id of the enclosing call, -1 for none
        self.call: list[int] = []  # Call.index of a call node, -1 otherwise
        self.last: list[int] = []  # largest node id made inside (a call), the node itself otherwise
        self.src: list[int] = []
        self.dst: list[int] = []
        self.tensor: list[int] = []  # the tensor's number: the edges of one tensor share it
        self.shape: list[tuple] = []
        self.dtype: list[str] = []
        self.nbytes: list[int] = []
        self.via: list[str] = []  # shape operations contracted into the edge, "" for none
        self.inplace: list[bool] = []  # the consumer mutated the tensor
        self.params: dict[
            int, list[str]
        ] = {}  # node -> parameters and buffers it read directly (a functional tied head)

    def add_node(self, kind: str, name: str, parent: int, call: int = -1) -> int:
        node = len(self.kind)
        self.kind.append(kind)
        self.name.append(name)
        self.parent.append(parent)
        self.call.append(call)
        self.last.append(node)
        return node


@dataclass
class TraceResult:
    calls: list[Call]
    inputs: list[dict]
    outputs: list[dict] | None
    uncounted_ops: Counter
    flops: bool  # forward FLOPs were counted
    backward: bool  # backward FLOPs were counted
    fake: bool  # ran on fake tensors: shapes and sizes only, nothing allocated
    totals: dict = field(default_factory=dict)
    dataflow: Dataflow | None = None  # producer -> consumer edges, when the backend records them


class Recorder:
    """The bookkeeping of one trace: the calls in order, the stack of calls running now and
    which call each exception came from. A backend subclasses it with ``attach`` and
    ``detach``, which install and remove its way of seeing calls."""

    def __init__(self, named_modules: list[tuple[str, Any]]):
        """`named_modules`: each module once, at its first path (``named_modules()``)."""
        # id -> [first path, type name, calls so far]: one lookup per call finds all three
        self.info: dict[int, list] = {id(m): [path, type(m).__name__, 0] for path, m in named_modules}
        self.calls: list[Call] = []
        self.stack: list[Call] = []
        self.outside = Call(-1, "", "", 0, None, 0, [], 0)  # absorbs ops outside any module
        self.failures: dict[int, Call] = {}  # id(exception) -> the innermost call it came from
        self.thread = threading.get_ident()  # calls another thread makes at the same time are not ours

    def current(self) -> Call:
        return self.stack[-1] if self.stack else self.outside

    def attach(self) -> None:
        raise NotImplementedError

    def detach(self) -> None:
        raise NotImplementedError

    def failed_call(self, exc: BaseException) -> Call | None:
        """The innermost call that raised `exc` or an exception it was raised from."""
        found, seen = None, set()
        cause: BaseException | None = exc
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            found = self.failures.get(id(cause), found)
            cause = cause.__cause__ or cause.__context__
        return found


def failure(recorder: Recorder, exc: Exception, model_name: str) -> str:
    failed = recorder.failed_call(exc)
    if failed is None:
        return f"forward of {model_name} failed outside its modules: {_reason(exc)}"
    where = f"{failed.name} ({failed.type})" if failed.name else f"{model_name} (the root module)"
    if failed.output_shapes is not None:  # its forward had returned: one of its forward hooks raised
        where += ", in a forward hook,"
    shapes = " ".join("[" + ", ".join(map(str, s)) + "]" for s in failed.input_shapes) or "no tensors"
    return f"forward failed in {where} with inputs {shapes}: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    """``Type: first line of the message``, never an empty reason nor the type twice."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {first_line(exc)}" if text else f"{type(exc).__name__} (no message)"


def finish(result: TraceResult, coverage_note: Callable[[Counter], str]) -> TraceResult:
    calls = result.calls
    for c in calls:
        c.flops, c.backward_flops, c.activation_bytes = c.own_flops, c.own_backward_flops, c.own_activation_bytes
    for c in reversed(calls):  # children come after their parent
        if c.parent is not None:
            p = calls[c.parent]
            p.flops += c.flops
            p.backward_flops += c.backward_flops
            p.activation_bytes += c.activation_bytes
    root = calls[0] if calls else None
    result.totals = {
        "flops": (root.flops if root else 0) if result.flops else None,
        "backward_flops": (root.backward_flops if root else 0) if result.backward else None,
        "activation_bytes": root.activation_bytes if root else 0,
        "input_bytes": root.input_bytes if root else 0,
        "flops_note": coverage_note(result.uncounted_ops) if result.flops else "FLOPs not counted (flops=False).",
    }
    return result


def add_block_totals(result: TraceResult) -> None:
    """Totals over every time the block called the model (each root call), not the first
    call only as a one-pass trace has them; the MLX watch shares this."""
    roots = [c for c in result.calls if c.parent is None]
    result.totals.update(
        flops=sum(c.flops for c in roots) if result.flops else None,
        activation_bytes=sum(c.activation_bytes for c in roots),
        input_bytes=sum(c.input_bytes for c in roots),
        model_calls=len(roots),
    )
