"""Errors a source raises for a bad checkpoint: one line naming the file (and tensor)."""

from __future__ import annotations

__all__ = ["CheckpointError", "UnsafeCheckpointError", "first_line"]


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: missing, empty, truncated, corrupt or of an
    unknown format. The message names the file, and the tensor where one is known."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name if it has none), for
    one-line errors that wrap a library's multi-line ones."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class UnsafeCheckpointError(CheckpointError):
    """A pickle that would run code outside torch's safe list to load. Nothing from it has
    run; pass ``trust=True`` (``--trust`` on the command line) if you trust the file."""
