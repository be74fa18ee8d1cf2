"""The one restricted unpickler every pickle from a file goes through (torch files, DCP
``.metadata``, legacy torch pickles).

Our own loop over opcodes, not ``pickle.Unpickler``: ``find_class`` and its dotted-name
resolution (``STACK_GLOBAL('mod', 'os.system')`` walking attributes into ``os``) and
``__reduce__``/``__setstate__`` machinery never run. A global is looked up as the exact pair
``(module, name)`` in the table the caller passes; the table maps it to a value (a dtype, a
marker) or to a :class:`Handler`, an nbinspect function that checks its arguments; the real
callables of torch or the standard library are never called by the pickle. Every length is
checked against the bytes left before anything is read or allocated, and memo, nesting and
string sizes are capped (``core/limits.py``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from ..core.limits import MAX_DEPTH, MAX_NAME_CHARS, MAX_PICKLE_MEMO, MAX_PICKLE_STRING
from ..errors import CheckpointError, UnsafeCheckpointError
from ..terminal import safe_text

__all__ = ["Handler", "StateDict", "unpickle", "unpickle_stream"]


class Handler:
    """A callable a pickle may name: ``reduce(args)`` for REDUCE, ``newobj(args)`` for
    NEWOBJ; each checks the exact shape of its arguments and raises ``ValueError`` otherwise."""

    def __init__(
        self,
        name: str,
        reduce: Callable[..., Any] | None = None,
        newobj: Callable[..., Any] | None = None,
    ):
        self.name = name
        self.reduce = reduce
        self.newobj = newobj

    def __repr__(self) -> str:
        return f"<{self.name}>"


class StateDict(dict):
    """A pickled ``OrderedDict`` (every ``state_dict()``): a plain dict whose only attribute
    is ``_metadata`` (module versions). No other attribute can be set by a pickle, so a file
    cannot shadow ``items``/``keys``/``get``."""

    __slots__ = ("_metadata",)
    _metadata: Any


class _Mark:
    pass


_MARK = _Mark()
_COMPAT = {("__builtin__", "set"): ("builtins", "set"), ("__builtin__", "bytearray"): ("builtins", "bytearray")}


def unpickle(
    data: bytes | memoryview,
    where: str,
    table: Mapping[tuple[str, str], Any],
    persistent_load: Callable[[Any], Any] | None = None,
    build: Callable[[Any, Any], bool] | None = None,
) -> Any:
    """The object the pickle in `data` describes, built only from plain containers, numbers,
    strings and what `table` maps globals to. `build(obj, state)` handles BUILD for objects
    the caller's handlers made (returns False to refuse). Every problem is one line naming
    `where`; a global outside `table` is an :class:`UnsafeCheckpointError`."""
    return unpickle_stream(data, 0, where, table, persistent_load, build)[0]


def unpickle_stream(
    data: bytes | memoryview,
    pos: int,
    where: str,
    table: Mapping[tuple[str, str], Any],
    persistent_load: Callable[[Any], Any] | None = None,
    build: Callable[[Any, Any], bool] | None = None,
) -> tuple[Any, int]:
    """(the object of the pickle starting at byte `pos` of `data`, where it ends)."""
    try:
        loop = _Loop(data, where, table, persistent_load, build)
        loop.pos = pos
        return loop.run(), loop.pos
    except CheckpointError:
        raise
    except RecursionError:
        raise CheckpointError(f"{where}: pickle nested too deeply") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, struct.error, MemoryError) as exc:
        text = str(exc).splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{where}: corrupt or unsupported pickle ({text})") from None


class _Loop:
    def __init__(self, data, where, table, persistent_load, build):
        self.data = memoryview(data).cast("B") if not isinstance(data, bytes) else data
        self.where = where
        self.table = table
        self.persistent_load = persistent_load
        self.build = build
        self.pos = 0
        self.stack: list[Any] = []
        self.marks: list[list[Any]] = []
        self.memo: dict[int, Any] = {}
        self.depths: dict[int, tuple[Any, int]] = {}  # tuples/frozensets: nesting (hashing one recurses in C)

    def nested(self, items: Any, make: Callable[[Any], Any]) -> Any:
        """A tuple or frozenset of `items`, refused past MAX_DEPTH levels of tuples: hashing a
        100,000-deep tuple overflows the C stack (SIGSEGV)."""
        depth = 1
        for item in items:
            if isinstance(item, tuple | frozenset):
                known = self.depths.get(id(item))
                depth = max(depth, 1 + (known[1] if known is not None and known[0] is item else 1))
        if depth > MAX_DEPTH:
            raise ValueError(f"tuples nested more than {MAX_DEPTH} levels deep")
        out = make(items)
        self.depths[id(out)] = (out, depth)
        return out

    # --- reading ---------------------------------------------------------------------------
    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"truncated: {n:,} bytes claimed at byte {self.pos:,}, {len(self.data) - self.pos:,} left")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def counted(self, size: int) -> bytes:
        n = self.uint(size)
        if n > MAX_PICKLE_STRING:
            raise ValueError(f"a string of {n:,} bytes, over the limit of {MAX_PICKLE_STRING:,}")
        return self.take(n)

    def line(self) -> str:
        end = bytes(self.data[self.pos : self.pos + MAX_NAME_CHARS + 1]).find(b"\n")
        if end < 0:
            raise ValueError("a GLOBAL name is unterminated or longer than 1,024 bytes")
        out = self.take(end + 1)[:-1]
        return out.decode("utf-8")

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise ValueError("MARK missing")
        items = self.stack
        self.stack = self.marks.pop()
        return items

    def pop(self) -> Any:
        if not self.stack:
            raise ValueError("stack underflow")
        return self.stack.pop()

    def memo_put(self, index: int) -> None:
        if index > MAX_PICKLE_MEMO or len(self.memo) >= MAX_PICKLE_MEMO:
            raise ValueError(f"memo index {index:,} over the limit of {MAX_PICKLE_MEMO:,}")
        if not self.stack:
            raise ValueError("stack underflow")
        self.memo[index] = self.stack[-1]

    def memo_get(self, index: int) -> None:
        if index not in self.memo:
            raise ValueError(f"memo entry {index} missing")
        self.stack.append(self.memo[index])

    def find(self, module: str, name: str) -> Any:
        module, name = _COMPAT.get((module, name), (module, name))
        if (module, name) not in self.table:
            raise UnsafeCheckpointError(
                f"{self.where}: refused to unpickle: the file needs {_short(module)}.{_short(name)}, which is not "
                "on nbinspect's list of what checkpoints hold, and loading it could run code from the file. "
                "Nothing was run. If you trust this file, pass trust=True (--trust on the command line)"
            )
        return self.table[(module, name)]

    # --- the loop --------------------------------------------------------------------------
    def run(self) -> Any:  # one branch per opcode, on purpose
        take, stack = self.take, None
        while True:
            stack = self.stack
            if self.pos >= len(self.data):
                raise ValueError("pickle ends without STOP")
            op = self.data[self.pos]
            self.pos += 1
            if op == 0x80:  # PROTO
                if self.uint(1) > 5:
                    raise ValueError("unsupported pickle protocol")
            elif op == 0x95:  # FRAME
                self.uint(8)
            elif op == 0x2E:  # STOP
                if len(stack) != 1 or self.marks:
                    raise ValueError("stack not empty at STOP")
                return stack[0]
            elif op == 0x28:  # MARK
                if len(self.marks) >= MAX_DEPTH:
                    raise ValueError(f"MARKs nested deeper than {MAX_DEPTH}")
                self.marks.append(stack)
                self.stack = []
            elif op == 0x7D:  # EMPTY_DICT
                stack.append({})
            elif op == 0x5D:  # EMPTY_LIST
                stack.append([])
            elif op == 0x29:  # EMPTY_TUPLE
                stack.append(())
            elif op == 0x8F:  # EMPTY_SET
                stack.append(set())
            elif op == 0x74:  # TUPLE
                items = self.pop_mark()
                self.stack.append(self.nested(items, tuple))
            elif op in (0x85, 0x86, 0x87):  # TUPLE1..3
                n = op - 0x84
                if len(stack) < n:
                    raise ValueError("stack underflow")
                items = stack[-n:]
                del stack[-n:]
                stack.append(self.nested(items, tuple))
            elif op == 0x61:  # APPEND
                value = self.pop()
                target = self.pop()
                _append(target, [value])
                self.stack.append(target)
            elif op == 0x65:  # APPENDS
                items = self.pop_mark()
                target = self.pop()
                _append(target, items)
                self.stack.append(target)
            elif op == 0x73:  # SETITEM
                value, key = self.pop(), self.pop()
                target = self.pop()
                _setitems(target, [key, value])
                self.stack.append(target)
            elif op == 0x75:  # SETITEMS
                items = self.pop_mark()
                target = self.pop()
                _setitems(target, items)
                self.stack.append(target)
            elif op == 0x90:  # ADDITEMS
                items = self.pop_mark()
                target = self.pop()
                if not isinstance(target, set):
                    raise ValueError("ADDITEMS to a non-set")
                for item in items:
                    target.add(_hashable(item))
                self.stack.append(target)
            elif op == 0x91:  # FROZENSET
                self.stack.append(self.nested([_hashable(i) for i in self.pop_mark()], frozenset))
            elif op == 0x71:  # BINPUT
                self.memo_put(self.uint(1))
            elif op == 0x72:  # LONG_BINPUT
                self.memo_put(self.uint(4))
            elif op == 0x94:  # MEMOIZE
                self.memo_put(len(self.memo))
            elif op == 0x68:  # BINGET
                self.memo_get(self.uint(1))
            elif op == 0x6A:  # LONG_BINGET
                self.memo_get(self.uint(4))
            elif op == 0x4A:  # BININT
                stack.append(int.from_bytes(take(4), "little", signed=True))
            elif op == 0x4B:  # BININT1
                stack.append(self.uint(1))
            elif op == 0x4D:  # BININT2
                stack.append(self.uint(2))
            elif op == 0x8A:  # LONG1
                n = self.uint(1)
                if n > 10:  # 10: torch's legacy magic number; 2**63 needs 9
                    raise ValueError(f"an integer of {n} bytes, over the limit of 10")
                stack.append(int.from_bytes(take(n), "little", signed=True))
            elif op == 0x47:  # BINFLOAT
                stack.append(struct.unpack(">d", take(8))[0])
            elif op == 0x4E:  # NONE
                stack.append(None)
            elif op == 0x88:  # NEWTRUE
                stack.append(True)
            elif op == 0x89:  # NEWFALSE
                stack.append(False)
            elif op == 0x58:  # BINUNICODE
                stack.append(self.counted(4).decode("utf-8", "surrogatepass"))
            elif op == 0x8C:  # SHORT_BINUNICODE
                stack.append(self.counted(1).decode("utf-8", "surrogatepass"))
            elif op == 0x8D:  # BINUNICODE8
                stack.append(self.counted(8).decode("utf-8", "surrogatepass"))
            elif op == 0x42:  # BINBYTES
                stack.append(self.counted(4))
            elif op == 0x43:  # SHORT_BINBYTES
                stack.append(self.counted(1))
            elif op == 0x8E:  # BINBYTES8
                stack.append(self.counted(8))
            elif op == 0x54:  # BINSTRING (protocol <= 2 str)
                stack.append(self.counted(4).decode("latin-1"))
            elif op == 0x55:  # SHORT_BINSTRING
                stack.append(self.counted(1).decode("latin-1"))
            elif op == 0x63:  # GLOBAL
                module = self.line()
                name = self.line()
                stack.append(self.find(module, name))
            elif op == 0x93:  # STACK_GLOBAL
                name, module = self.pop(), self.pop()
                if not (isinstance(module, str) and isinstance(name, str)):
                    raise ValueError("STACK_GLOBAL of non-strings")
                if len(module) > MAX_NAME_CHARS or len(name) > MAX_NAME_CHARS:
                    raise ValueError("a global name over 1,024 characters")
                self.stack.append(self.find(module, name))
            elif op == 0x52:  # REDUCE
                args = self.pop()
                func = self.pop()
                if not isinstance(func, Handler) or func.reduce is None or not isinstance(args, tuple):
                    raise ValueError(f"REDUCE of {_what(func)}, which is not callable here")
                self.stack.append(func.reduce(*args))
            elif op == 0x81:  # NEWOBJ
                args = self.pop()
                cls = self.pop()
                if not isinstance(cls, Handler) or cls.newobj is None or not isinstance(args, tuple):
                    raise ValueError(f"NEWOBJ of {_what(cls)}, which cannot be created here")
                self.stack.append(cls.newobj(*args))
            elif op == 0x62:  # BUILD
                state = self.pop()
                obj = self.pop()
                if isinstance(obj, StateDict):
                    _build_state_dict(obj, state)
                elif self.build is None or not self.build(obj, state):
                    raise ValueError(f"BUILD of {_what(obj)}, which takes no state here")
                self.stack.append(obj)
            elif op == 0x51:  # BINPERSID
                pid = self.pop()
                if self.persistent_load is None:
                    raise ValueError("a persistent id, which this file cannot hold")
                self.stack.append(self.persistent_load(pid))
            elif op == 0x30:  # POP
                self.pop()
            elif op == 0x31:  # POP_MARK
                self.pop_mark()
            elif op == 0x32:  # DUP
                if not stack:
                    raise ValueError("stack underflow")
                stack.append(stack[-1])
            else:
                raise ValueError(f"unsupported pickle opcode 0x{op:02x} at byte {self.pos - 1:,}")


def _short(text: str) -> str:
    return safe_text(text, 80)


def _what(obj: Any) -> str:
    return repr(obj) if isinstance(obj, Handler) else f"a {type(obj).__name__}"


def _hashable(item: Any) -> Any:
    hash(item)  # plain data only: tuples of numbers/strings hash without running file code
    return item


def _append(target: Any, items: list[Any]) -> None:
    if not isinstance(target, list):
        raise ValueError(f"APPEND to {_what(target)}")
    target.extend(items)


def _setitems(target: Any, items: list[Any]) -> None:
    if not isinstance(target, dict) or len(items) % 2:
        raise ValueError(f"SETITEM on {_what(target)}")
    for i in range(0, len(items), 2):
        target[_hashable(items[i])] = items[i + 1]


def _build_state_dict(obj: StateDict, state: Any) -> None:
    if state is None:
        return
    if isinstance(state, tuple) and len(state) == 2 and state[1] is None:  # (dict state, slots)
        state = state[0]
    if not isinstance(state, dict) or not set(state) <= {"_metadata"}:
        raise ValueError("an OrderedDict with attributes other than _metadata")
    if "_metadata" in state:
        obj._metadata = state["_metadata"]
