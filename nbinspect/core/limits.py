"""The limits a file must stay within, and how paths from the file system are checked and shown.

A crafted file is small but can describe something huge: a header listing millions of
tensors, containers shared so that their expansion doubles at each level, metadata nested
thousands deep. Every reader stops at these documented limits with a one-line
:class:`CheckpointError` (or, for metadata, a summary saying what was cut) instead of
hanging or filling memory. The README lists them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import CheckpointError

__all__ = [
    "MAX_DEPTH",
    "MAX_HEADER_BYTES",
    "MAX_METADATA_ITEMS",
    "MAX_MODULE_PATHS",
    "MAX_TENSORS",
    "inside",
    "regular_file",
    "shown",
]

MAX_HEADER_BYTES = 100 * 2**20  # a safetensors JSON header (the safetensors library's own limit)
MAX_TENSORS = 250_000  # tensors in one source (DeepSeek-V3's checkpoint holds ~92,000; ~4 KB of memory each)
MAX_MODULE_PATHS = 1_000_000  # module paths of a live model (a module shared at n places shows n times)
MAX_DEPTH = 64  # nesting of containers holding weights or metadata
MAX_METADATA_ITEMS = 100_000  # container items walked to describe one metadata entry


def shown(path: str | os.PathLike) -> str:
    """`path` as text that prints anywhere: bytes that are not valid UTF-8 in the name
    (kept by Python as surrogates) are shown as ``\\xNN`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def regular_file(path: Path) -> None:
    """Refuse what is not a regular file (a FIFO, a device, a socket): reading one blocks
    or never ends. ``stat`` does not open the file, so it cannot block."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise CheckpointError(f"{shown(path)}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise CheckpointError(f"{shown(path)}: is {kind}, not a checkpoint file")


def inside(folder: Path, name: object, what: str) -> Path:
    """``folder / name`` for a file name read from an index or a folder listing, refused
    unless it is a string naming a path inside `folder` (no absolute path, no ``..``
    leaving it, no symlink out). `what` (already shown) names the index or folder."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{what}: shard name {name!r} is not a file name")
    path = folder / name
    if Path(name).is_absolute() or not path.resolve().is_relative_to(folder.resolve()):
        raise CheckpointError(f"{what}: {shown(name)!r} lies outside the folder {shown(folder)}; refused")
    return path
