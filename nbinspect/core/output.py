"""Writing an output file (``--json``, ``--html``, ``to_json(path)``) safely.

``-`` means standard output. Otherwise the text goes to a temporary file in the same folder,
which is flushed and then renamed over the target (``os.replace``, atomic on one file
system): a reader never sees half a file, and an error or Ctrl-C leaves the old file (or
none) and no temporary behind. A target that is one of the inputs being read (the same file,
or a file inside an input folder) is refused before anything is written.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .limits import shown

__all__ = ["check_not_input", "write_output"]


def check_not_input(path: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse `path` if writing it would overwrite an input (ValueError, one line)."""
    if str(path) == "-":
        return
    target = os.path.realpath(path)
    for item in inputs:
        if item is None:
            continue
        real = os.path.realpath(item)
        same = os.path.exists(target) and os.path.exists(real) and os.path.samefile(target, real)
        inside = os.path.isdir(real) and os.path.commonpath([target, real]) == real
        if same or inside:
            raise ValueError(f"{shown(path)}: is an input of this command (or inside one); choose another output file")


def write_output(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    """Write `text` to `path` atomically (``-``: standard output), with permissions `mode`
    (default: as a new file gets under the umask)."""
    if str(path) == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(target))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask() if mode is None else mode)
        os.replace(tmp, target)
    except BaseException:  # an error or Ctrl-C: no partial file, no temporary left
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
