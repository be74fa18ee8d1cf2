"""What a traced forward pass records, whatever the framework: one :class:`Call` (or row)
per module call in execution order, the :class:`TraceResult` that holds them and their
columns, the :class:`Recorder` bookkeeping (nesting, failures) a backend feeds from its own
call interception, and the roll-up of per-call figures into totals."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from ..errors import first_line

__all__ = ["ROW", "Call", "Dataflow", "Recorder", "TraceResult", "add_block_totals", "failure", "finish"]


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

    @classmethod
    def of(cls, fields: Sequence) -> Call:
        """A Call from its fields in ``ROW`` order, then optionally the three rolled-up figures."""
        call = cls(*fields[:9])
        call.output_shapes, call.output_dtypes, call.own_flops, call.own_backward_flops = fields[9:13]
        call.own_activation_bytes, call.status = fields[13:15]
        if len(fields) > 15:
            call.flops, call.backward_flops, call.activation_bytes = fields[15:]
        return call


# A call as the torch recorder keeps it while the pass runs: a list of these fields in this
# order, made by a list display where a Call runs a Python ``__init__`` (one per module call);
# the FLOP counter and the saved-tensor meter add to its figures by position.
ROW = (
    "index", "name", "type", "depth", "parent", "call", "input_shapes", "input_bytes", "module_id", "output_shapes",
    "output_dtypes", "own_flops", "own_backward_flops", "own_activation_bytes", "status",
)  # fmt: skip
(
    INDEX, NAME, TYPE, DEPTH, PARENT, CALL, INPUT_SHAPES, INPUT_BYTES, MODULE_ID, OUTPUT_SHAPES, OUTPUT_DTYPES,
    OWN_FLOPS, OWN_BACKWARD_FLOPS, OWN_ACTIVATION_BYTES, STATUS,
) = range(len(ROW))  # fmt: skip
_ROLLED = ("flops", "backward_flops", "activation_bytes")  # own + calls inside, set by finish
_FIELDS = attrgetter(*ROW)


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


class TraceResult:
    """What one trace recorded. `calls`: the recorder's list, filled as the pass runs, of
    :class:`Call` objects or of rows (lists in ``ROW`` order, the torch recorder's);
    :func:`finish` turns it into `columns`, which the frames read."""

    def __init__(
        self,
        calls: list,
        inputs: list[dict],
        outputs: list[dict] | None,
        uncounted_ops: Counter,
        flops: bool,  # forward FLOPs were counted
        backward: bool,  # backward FLOPs were counted
        fake: bool,  # ran on fake tensors: shapes and sizes only, nothing allocated
        totals: dict | None = None,
        dataflow: Dataflow | None = None,  # producer -> consumer edges, when the backend records them
    ):
        self.recorded = calls
        self.inputs, self.outputs, self.uncounted_ops = inputs, outputs, uncounted_ops
        self.flops, self.backward, self.fake = flops, backward, fake
        self.totals = totals if totals is not None else {}
        self.dataflow = dataflow
        # every field of every call (``ROW`` and the rolled-up figures), one sequence each: set by finish
        self.columns: dict[str, Sequence] | None = None
        self._calls: list[Call] | None = None  # made from the columns on first read

    @property
    def calls(self) -> list[Call]:
        """One :class:`Call` per call in execution order: the recorder's own objects, or
        made from its rows (once the columns are set, on first read)."""
        recorded = self.recorded
        if not recorded or type(recorded[0]) is not list:
            return recorded
        if self.columns is None:  # not finished yet: the rows as they are now
            return list(map(Call.of, recorded))
        if self._calls is None:
            self._calls = list(map(Call.of, zip(*self.columns.values())))
        return self._calls


class Recorder:
    """The bookkeeping of one trace: the calls in order, the stack of calls running now and
    which call each exception came from. A backend subclasses it with ``attach`` and
    ``detach``, which install and remove its way of seeing calls."""

    def __init__(self, named_modules: list[tuple[str, Any]]):
        """`named_modules`: each module once, at its first path (``named_modules()``)."""
        # id -> [first path, type name, calls so far]: one lookup per call finds all three
        self.info: dict[int, list] = {id(m): [path, type(m).__name__, 0] for path, m in named_modules}
        # Call objects, or rows (see ROW) in a subclass that keeps those
        self.calls: list[Any] = []
        self.stack: list[Any] = []
        self.outside: Any = Call(-1, "", "", 0, None, 0, [], 0)  # absorbs ops outside any module
        # id(exception) -> (the innermost call it came from, the exception): kept, so that its
        # id cannot come back for another exception during the pass (a caught one is freed)
        self.failures: dict[int, tuple[Any, BaseException]] = {}
        self.thread = threading.get_ident()  # calls another thread makes at the same time are not ours

    def current(self) -> Call:
        return self.stack[-1] if self.stack else self.outside

    def attach(self) -> None:
        raise NotImplementedError

    def detach(self) -> None:
        raise NotImplementedError

    def raised(self, call: Any, exc: BaseException) -> bool:
        """`exc` passed out of `call` (innermost first): True if it was raised there, False if
        it came from a call inside, which has it already."""
        seen = self.failures.get(id(exc))
        if seen is not None and seen[1] is exc:
            return False
        self.failures[id(exc)] = (call, exc)
        return True

    def failed_call(self, exc: BaseException) -> Call | None:
        """The innermost call that raised `exc` or an exception it was raised from."""
        found, seen = None, set()
        cause: BaseException | None = exc
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            entry = self.failures.get(id(cause))
            if entry is not None and entry[1] is cause:
                found = entry[0]
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
    """Set the result's columns (each call's figures with the calls inside it added) and totals."""
    recorded = result.recorded
    objects = bool(recorded) and type(recorded[0]) is not list
    # transposed in C: the rows as they are, Call objects through one attrgetter each
    fields = zip(*map(_FIELDS, recorded) if objects else recorded) if recorded else repeat((), len(ROW))
    columns: dict[str, Sequence] = dict(zip(ROW, fields))
    parents = columns["parent"]
    for own, name in zip(("own_flops", "own_backward_flops", "own_activation_bytes"), _ROLLED):
        figures = columns[name] = list(columns[own])
        if any(figures):  # all zero (backward not counted): nothing to add up
            for i, p in zip(range(len(parents) - 1, -1, -1), reversed(parents)):  # children after their parent
                if p is not None:
                    figures[p] += figures[i]
    result.columns, result._calls = columns, None
    if objects:  # the recorder's own Call objects carry the figures too
        for c, *rolled in zip(recorded, *(columns[name] for name in _ROLLED)):
            c.flops, c.backward_flops, c.activation_bytes = rolled
    flops, backward_flops, activation, input_bytes = (
        columns[name][0] if recorded else 0 for name in (*_ROLLED, "input_bytes")
    )  # the first call's: the root's
    result.totals = {
        "flops": flops if result.flops else None,
        "backward_flops": backward_flops if result.backward else None,
        "activation_bytes": activation,
        "input_bytes": input_bytes,
        "flops_note": coverage_note(result.uncounted_ops) if result.flops else "FLOPs not counted (flops=False).",
    }
    return result


def add_block_totals(result: TraceResult) -> None:
    """Totals over every time the block called the model (each root call), not the first
    call only as a one-pass trace has them; the MLX watch shares this."""
    columns = result.columns
    assert columns is not None, "finish() first"
    roots = [i for i, p in enumerate(columns["parent"]) if p is None]
    flops, activation, input_bytes = columns["flops"], columns["activation_bytes"], columns["input_bytes"]
    result.totals.update(
        flops=sum(flops[i] for i in roots) if result.flops else None,
        activation_bytes=sum(activation[i] for i in roots),
        input_bytes=sum(input_bytes[i] for i in roots),
        model_calls=len(roots),
    )
