"""Read-only mappings of a file's bytes that a bus error cannot crash (Linux on x86-64 and
arm64; elsewhere :func:`window` gives None and the caller reads with ``pread``).

Reading a mapping instead of a ``pread`` copy saves the copy out of the page cache (about
as much time as the statistics kernel itself). But a mapped file that shrinks under the
reader (another process truncates it) or whose storage fails (EIO on NFS or FUSE) raises
SIGBUS on the access, which would kill the user's Jupyter kernel. So:

- A process-wide SIGBUS handler is installed while nbinspect has a window mapped (when the
  first is made, and again if someone replaced it since) and the previous action is put
  back when the last is closed: at any other time the process's action is the one its
  user and libraries set. The handler is ~55 machine instructions compiled with llvmlite
  (numba's dependency, ~10 ms once per process; the libc addresses are baked in, so it is
  not cached) calling only ``mmap``, ``sigaction`` and ``raise``: no Python, no GIL, no
  allocation.
- Each live mapping is registered in a fixed table (:data:`_table`: start, end, faulted
  per slot) that the handler reads. A fault from the kernel (``BUS_ADRERR``) inside a
  registered mapping gets anonymous zero pages mapped over the rest of that mapping
  (``MAP_FIXED``) and the slot marked faulted; the access is retried and the reader
  finishes on zeros. :meth:`Window.unmap` then raises the one-line ``CheckpointError``
  naming the file: numbers read over a fault are never returned. A slot is filled before
  its window is read and cleared before it is unmapped, by the one thread that reads it
  (the handler runs on the faulting thread), so the table needs no lock in the handler.
- Any other SIGBUS (another address, one sent by ``kill``) is not ours: the handler puts
  the previous action back (Python's ``faulthandler``, or the default core dump) and
  returns, so the fault happens again under it, exactly as without nbinspect (a signal
  sent by ``kill`` is sent again with ``raise``, as no access repeats it).
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import CheckpointError

__all__ = ["Window", "faults", "window"]

SLOTS = 256  # mappings live at once (one per thread reducing a tensor); beyond, callers use pread
_PAGE = mmap.PAGESIZE
_BUS_ADRERR = 2  # si_code of a fault on a mapped address with no backing (past EOF, I/O error)
_SA_SIGINFO, _SA_ONSTACK = 4, 0x08000000
_MAP_FIXED = 0x10  # the same on x86-64 and arm64 (the only machines this is built for)
_SUPPORTED = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")

# slot i: [3i] first byte, [3i + 1] end (0: free), [3i + 2] faulted
_table = (ctypes.c_int64 * (3 * SLOTS))()
_free = list(range(SLOTS))
_lock = threading.Lock()  # guards _free, _live and the installing and removing of the handler
_live = [0]  # windows open: the handler is installed while there is one
_faults = [0]  # faults taken in our mappings in this process (tests read it)


class _Sigaction(ctypes.Structure):
    # glibc's and musl's layout on 64-bit Linux: handler, a 1024-bit mask, flags, restorer
    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_uint64 * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


_previous = _Sigaction()  # what the handler puts back for a fault that is not ours
_state: dict[str, Any] = {}  # "handler": address, "engine": keeps its machine code alive; "failed"


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return libc


def _compile(libc: Any) -> tuple[int, Any]:
    """The handler's machine code: (its address, the engine that owns it)."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    i8p, i32, i64 = ir.IntType(8).as_pointer(), ir.IntType(32), ir.IntType(64)
    module = ir.Module("nbinspect_sigbus")
    handler = ir.Function(module, ir.FunctionType(ir.VoidType(), [i32, i8p, i8p]), "nbinspect_sigbus")
    entry, scan, check, hit, fixed, chain = (
        handler.append_basic_block(name) for name in ("entry", "scan", "check", "hit", "fixed", "chain")
    )
    b = ir.IRBuilder(entry)
    info = handler.args[1]
    # siginfo_t on 64-bit Linux: si_code at byte 8, si_addr at byte 16
    code = b.load(b.bitcast(b.gep(info, [i32(8)]), i32.as_pointer()))
    address = b.load(b.bitcast(b.gep(info, [i32(16)]), i64.as_pointer()))
    table = b.inttoptr(i64(ctypes.addressof(_table)), i64.as_pointer())
    b.cbranch(b.icmp_signed("==", code, i32(_BUS_ADRERR)), scan, chain)

    b = ir.IRBuilder(scan)
    slot = b.phi(i64)
    slot.add_incoming(i64(0), entry)
    first = b.load_atomic(b.gep(table, [b.mul(slot, i64(3))]), "monotonic", 8)
    end = b.load_atomic(b.gep(table, [b.add(b.mul(slot, i64(3)), i64(1))]), "monotonic", 8)
    inside = b.and_(b.icmp_unsigned("<=", first, address), b.icmp_unsigned("<", address, end))
    b.cbranch(inside, hit, check)

    b = ir.IRBuilder(check)
    following = b.add(slot, i64(1))
    slot.add_incoming(following, check)
    b.cbranch(b.icmp_unsigned("<", following, i64(SLOTS)), scan, chain)

    b = ir.IRBuilder(hit)  # zeros over the faulting page and the rest of the mapping (`end` is page-aligned)
    page = b.and_(address, i64(~(_PAGE - 1)))
    mmap_type = ir.FunctionType(i64, [i64, i64, i32, i32, i32, i64])
    zeros = b.call(
        b.inttoptr(i64(ctypes.cast(libc.mmap, ctypes.c_void_p).value), mmap_type.as_pointer()),
        [
            page,
            b.sub(end, page),
            i32(mmap.PROT_READ),
            i32(mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED),
            i32(-1),
            i64(0),
        ],
    )
    b.cbranch(b.icmp_unsigned("==", zeros, page), fixed, chain)  # could not cover it: die as before

    b = ir.IRBuilder(fixed)
    b.store_atomic(i64(1), b.gep(table, [b.add(b.mul(slot, i64(3)), i64(2))]), "monotonic", 8)
    b.ret_void()

    b = ir.IRBuilder(chain)  # not ours: the previous action back, and the fault happens again under it
    sigaction_type = ir.FunctionType(i32, [i32, i64, i64])
    b.call(
        b.inttoptr(i64(ctypes.cast(libc.sigaction, ctypes.c_void_p).value), sigaction_type.as_pointer()),
        [i32(signal.SIGBUS), i64(ctypes.addressof(_previous)), i64(0)],
    )
    with b.if_then(b.icmp_signed("<=", code, i32(0))):  # sent by a process (kill): no access recurs, so send it again
        raise_type = ir.FunctionType(i32, [i32])
        b.call(
            b.inttoptr(i64(ctypes.cast(libc["raise"], ctypes.c_void_p).value), raise_type.as_pointer()),
            [i32(signal.SIGBUS)],
        )
    b.ret_void()

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(opt=1)
    engine = llvm.create_mcjit_compiler(parsed, machine)
    engine.finalize_object()
    return engine.get_function_address("nbinspect_sigbus"), engine


def _current(libc: Any) -> _Sigaction | None:
    current = _Sigaction()
    return current if libc.sigaction(signal.SIGBUS, None, ctypes.byref(current)) == 0 else None


def _installed(libc: Any) -> bool:
    """Install the handler unless it is the current one (someone may have replaced it while a
    window was open: ``faulthandler.enable()``; what they installed becomes the action a
    foreign fault gets, and is put back when the last window closes)."""
    if "handler" not in _state:
        if "failed" in _state:
            return False
        try:
            _state["handler"], _state["engine"] = _compile(libc)
        except Exception:  # no llvmlite, or it cannot build for this machine: pread then
            _state["failed"] = True
            return False
    current = _current(libc)
    if current is None:
        return False
    if current.handler == _state["handler"]:
        return True
    ours = _Sigaction()
    ours.handler = _state["handler"]
    ours.flags = _SA_SIGINFO | _SA_ONSTACK
    ctypes.memmove(ctypes.byref(_previous), ctypes.byref(current), ctypes.sizeof(current))
    return libc.sigaction(signal.SIGBUS, ctypes.byref(ours), None) == 0


class Window:
    """One slot of the table: maps a range of a file, one at a time, for one thread."""

    def __init__(self, libc: Any, slot: int, fd: int, where: str, check: Callable[[], None]):
        self._libc, self._slot, self._fd, self.where, self._check = libc, slot, fd, where, check
        self._mapped: tuple[int, int] | None = None  # (address, length) of the live mapping

    def map(self, offset: int, nbytes: int) -> np.ndarray | None:
        """`nbytes` (> 0) of the file from `offset` as a uint8 array over a read-only mapping
        (not to be written, nor used after :meth:`unmap`), or None if the system refused to
        map it (a file system without mappings, the process's map count): read with pread."""
        self.unmap()
        start = offset - offset % _PAGE
        length = -(-(offset + nbytes - start) // _PAGE) * _PAGE
        address = self._libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, self._fd, start)
        if address in (None, ctypes.c_void_p(-1).value):
            return None
        self._mapped = (address, length)
        row = 3 * self._slot
        _table[row + 2] = 0
        _table[row] = address
        _table[row + 1] = address + length  # last: the slot is live once its end is set
        buffer = (ctypes.c_uint8 * nbytes).from_address(address + offset - start)
        return np.ctypeslib.as_array(buffer)

    def unmap(self) -> None:
        """Unmap the live mapping; raise the one-line error if the handler covered a fault in it."""
        if self._mapped is None:
            return
        address, length = self._mapped
        row = 3 * self._slot
        _table[row + 1] = 0
        _table[row] = 0
        faulted = _table[row + 2]
        self._mapped = None
        self._libc.munmap(address, length)
        if faulted:
            _faults[0] += 1
            self._check()  # the file shrank or was replaced: that error says so
            raise CheckpointError(f"{self.where}: cannot read a tensor (the storage failed under its mapping)")

    def close(self) -> None:
        try:
            self.unmap()
        finally:
            if self._slot >= 0:
                with _lock:
                    _free.append(self._slot)
                    _live[0] -= 1
                    if not _live[0]:
                        _removed(self._libc)
                self._slot = -1


def _removed(libc: Any) -> None:
    """The action from before the handler was installed, back in place, unless someone
    replaced the handler since (theirs stays)."""
    current = _current(libc)
    if current is not None and current.handler == _state.get("handler"):
        libc.sigaction(signal.SIGBUS, ctypes.byref(_previous), None)


def window(fd: int, where: str, check: Callable[[], None]) -> Window | None:
    """A :class:`Window` on the file `fd` (named `where` in errors; `check` raises the error of
    a file that changed since it was opened), or None where mappings are not guarded (not
    Linux on x86-64/arm64, no llvmlite) or every slot is taken: read with ``pread`` then.
    Close it when done."""
    if not _SUPPORTED:
        return None
    libc = _state.get("libc") or _state.setdefault("libc", _libc())
    with _lock:
        if not _free or not _installed(libc):
            return None
        slot = _free.pop()
        _live[0] += 1
    return Window(libc, slot, fd, where, check)


def faults() -> int:
    """Faults in nbinspect's mappings the handler has covered in this process."""
    return _faults[0]
