"""Opening untrusted files: one root, names checked, symlinks confined, reads by ``pread``.

Every file nbinspect reads on behalf of a checkpoint goes through here.

- The **root** is what the user named (a folder, or the folder of a file). Names read from
  files (shard names in an index, DCP ``relative_path``, ``config.json``, folder listings)
  are checked before any system call (a non-empty string, no NUL or control characters,
  relative, no ``..``, no backslash, at most 255 bytes a component and
  ``MAX_PATH_BYTES`` in all) and resolved once: the real path must lie inside the root, or,
  for a Hugging Face hub-cache snapshot (``models--org--name/snapshots/REV``), inside that
  repository folder, where ``blobs/`` lives. The file is then opened with ``O_NOFOLLOW``
  and its ``(st_dev, st_ino)`` compared with the resolved path's, so a component swapped for
  a symlink in between is refused.
- Only regular files are opened (FIFOs, devices, sockets are refused; ``O_NONBLOCK`` so
  even the open cannot block).
- A :class:`FileHandle` keeps the descriptor for the source's life and reads with
  ``os.pread``: a file truncated by another process is a short read and a one-line error,
  never SIGBUS. The statistics kernel reads a tensor's byte range with libc's ``pread`` on
  the same descriptor, or (``fused.MAPPED``, the default on Linux) through a guarded mapping
  (``mapping.py``: a bus error there is covered and becomes the same one-line error). The file's
  identity (device, inode, size, mtime) is checked around every read of values (around
  each tensor the kernel reads).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..core.limits import MAX_PATH_BYTES, shown
from ..errors import CheckpointError

__all__ = ["FileHandle", "Root", "check_name", "value_buffer"]

_OWN_MAPPING = 1 << 20


def value_buffer(nbytes: int) -> Any:
    """A writable uint8 tensor of `nbytes` to read values into. From 1 MiB up it is its own
    anonymous mapping (not a file: nothing can shrink under it), given back to the OS when
    the tensor dies; from the heap, glibc would keep freed gigabytes of a streamed checkpoint."""
    import mmap

    import torch

    if nbytes < _OWN_MAPPING:
        return torch.empty(nbytes, dtype=torch.uint8)
    return torch.frombuffer(mmap.mmap(-1, nbytes), dtype=torch.uint8)


_HUB_SNAPSHOT = re.compile(r"^(?:models|datasets|spaces)--[^/]+$")
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _regular(path: str | os.PathLike, where: str) -> None:
    """Refuse what is not a regular file before opening it (stat does not block)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == 40:
            raise CheckpointError(f"{where}: symlink loop") from None
        raise CheckpointError(f"{where}: cannot open ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise CheckpointError(f"{where}: is {_kind(mode)}, not a checkpoint file")


def check_name(name: object, what: str) -> str:
    """`name` (read from a file) if it is a safe relative file name, else a one-line error."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{what}: file name {shown(repr(name))} is not a file name")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise CheckpointError(f"{what}: file name {shown(name, 60)!r} is longer than {MAX_PATH_BYTES} bytes; refused")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name) or "\\" in name:
        raise CheckpointError(f"{what}: file name {shown(name)!r} holds a control character or backslash; refused")
    parts = name.split("/")
    if name.startswith("/") or any(p in ("..", "") for p in parts) or os.path.isabs(name):
        raise CheckpointError(f"{what}: file name {shown(name)!r} lies outside the folder; refused")
    if any(len(p.encode("utf-8", "surrogateescape")) > 255 for p in parts):
        raise CheckpointError(f"{what}: file name {shown(name, 60)!r} has a component over 255 bytes; refused")
    return name


class FileHandle:
    """An open regular file read with ``pread``; its identity is re-checked on demand."""

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path
        self.where = shown(path)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise CheckpointError(f"{self.where}: is {_kind(st.st_mode)}, not a checkpoint file")
        self.identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        self.size = st.st_size

    @classmethod
    def open(cls, path: str | os.PathLike) -> FileHandle:
        """Open a path the user named (its symlinks are the user's choice)."""
        path = Path(path)
        _regular(path, shown(path))
        try:
            fd = os.open(path, _FLAGS)
        except OSError as exc:
            if exc.errno == 40:  # ELOOP
                raise CheckpointError(f"{shown(path)}: symlink loop") from None
            raise CheckpointError(f"{shown(path)}: cannot open ({exc.strerror})") from None
        return cls(fd, path)

    def check(self) -> None:
        """Refuse to go on if the file changed since it was opened (a trainer rewriting it)."""
        try:
            st = os.fstat(self.fd)
        except OSError as exc:
            raise CheckpointError(f"{self.where}: cannot read ({exc.strerror})") from None
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if now != self.identity:
            raise CheckpointError(
                f"{self.where}: changed while it was read ({self.size:,} -> {st.st_size:,} bytes); reopen it"
            )

    def pread(self, offset: int, n: int) -> bytes:
        """Exactly `n` bytes at `offset`, which must lie inside the file as opened."""
        if offset < 0 or n < 0 or offset + n > self.size:
            raise CheckpointError(f"{self.where}: a range {offset:,}+{n:,} lies outside the file ({self.size:,} bytes)")
        chunks, got = [], 0
        while got < n:
            try:
                part = os.pread(self.fd, min(n - got, 1 << 26), offset + got)
            except OSError as exc:
                raise CheckpointError(f"{self.where}: cannot read ({exc.strerror})") from None
            if not part:
                self.check()
                raise CheckpointError(f"{self.where}: changed while it was read (ends before byte {offset + n:,})")
            chunks.append(part)
            got += len(part)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def readinto(self, offset: int, buffer: memoryview) -> None:
        """Fill `buffer` from `offset` (checked), re-checking the file's identity after."""
        n = buffer.nbytes
        if offset < 0 or offset + n > self.size:
            raise CheckpointError(f"{self.where}: a range {offset:,}+{n:,} lies outside the file ({self.size:,} bytes)")
        self.check()
        got = 0
        while got < n:
            try:
                k = os.preadv(self.fd, [buffer[got : got + (1 << 28)]], offset + got)
            except OSError as exc:
                raise CheckpointError(f"{self.where}: cannot read ({exc.strerror})") from None
            if k <= 0:
                self.check()
                raise CheckpointError(f"{self.where}: changed while it was read (ends before byte {offset + n:,})")
            got += k
        self.check()

    def fileobj(self):  # a binary file object over the same descriptor (for zipfile)
        return open(self.fd, "rb", closefd=False)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


class Root:
    """The folder names read from files are resolved against (see the module docstring)."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        try:
            self.real = os.path.realpath(self.folder, strict=True)
        except OSError as exc:
            raise CheckpointError(f"{shown(self.folder)}: cannot open ({exc.strerror or 'symlink loop'})") from None
        self.confine = self.real
        parts = Path(self.real).parts
        # <cache>/models--org--name/snapshots/<rev>: files are symlinks into ../../blobs/
        if len(parts) >= 3 and parts[-2] == "snapshots" and _HUB_SNAPSHOT.match(parts[-3]):
            self.confine = str(Path(self.real).parent.parent)

    @classmethod
    def of(cls, path: str | os.PathLike) -> Root:
        """The root of a path the user named: the folder itself, or the folder of a file."""
        path = Path(path)
        return cls(path if path.is_dir() else (path.parent if str(path.parent) else Path(".")))

    def resolve(self, name: object, what: str) -> Path:
        """The real path of `name` inside the root, checked (not opened)."""
        name = check_name(name, what)
        full = os.path.join(self.real, name)
        try:
            real = os.path.realpath(full, strict=True)
        except OSError as exc:
            if exc.errno == 40 or "loop" in str(exc).lower():
                raise CheckpointError(f"{what}: {shown(name)!r} is a symlink loop") from None
            raise CheckpointError(f"{what}: {shown(name)!r} cannot be opened ({exc.strerror})") from None
        except RuntimeError:  # some Pythons report a loop this way
            raise CheckpointError(f"{what}: {shown(name)!r} is a symlink loop") from None
        if os.path.commonpath([real, self.confine]) != self.confine:
            raise CheckpointError(f"{what}: {shown(name)!r} lies outside the folder {shown(self.folder)}; refused")
        return Path(real)

    def exists(self, name: str) -> bool:
        try:
            return os.path.lexists(os.path.join(self.real, check_name(name, "")))
        except CheckpointError:
            return False

    def open(self, name: object, what: str) -> FileHandle:
        """Open `name` (read from a file or a listing) confined to the root."""
        real = self.resolve(name, what)
        _regular(real, f"{what}: {shown(str(name))}")
        try:
            expected = os.stat(real)
            fd = os.open(real, _FLAGS | getattr(os, "O_NOFOLLOW", 0))
        except OSError as exc:
            raise CheckpointError(f"{what}: {shown(str(name))!r} cannot be opened ({exc.strerror})") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (expected.st_dev, expected.st_ino):
            os.close(fd)
            raise CheckpointError(f"{what}: {shown(str(name))!r} changed while it was opened; refused")
        return FileHandle(fd, self.folder / str(name))


class BytesHandle(FileHandle):
    """A byte range already read (a DCP chunk, which is itself a torch.save zip), read like a file."""

    def __init__(self, data: bytes, path: Path, where: str):  # no descriptor
        self.fd = -1
        self.data = data
        self.path = path
        self.where = where
        self.size = len(data)
        self.identity = (0, 0, len(data), 0)

    def check(self) -> None:
        return None

    def pread(self, offset: int, n: int) -> bytes:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise CheckpointError(f"{self.where}: a range {offset:,}+{n:,} lies outside the data ({self.size:,} bytes)")
        return self.data[offset : offset + n]

    def readinto(self, offset: int, buffer: memoryview) -> None:
        buffer[:] = self.pread(offset, buffer.nbytes)

    def fileobj(self):
        import io

        return io.BytesIO(self.data)

    def close(self) -> None:
        return None
