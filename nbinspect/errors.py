"""nbinspect's errors, in one place: each is one line that names what was wrong and where
(the file and tensor of a bad checkpoint, the module of a failing forward pass)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "DTYPE_HINT",
    "CheckpointError",
    "EngineError",
    "TraceError",
    "UnsafeCheckpointError",
    "UnsupportedTensorError",
    "first_line",
    "first_line_for",
]

# How a trace error tells a Python caller to build token ids from a shape; the magic and the
# command line put their own option in its place (first_line_for).
DTYPE_HINT = "pass input_dtype=torch.long"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read: missing, empty, truncated, corrupt or of an
    unknown format. The message names the file, and the tensor where one is known."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name if it has none), for
    one-line errors that wrap a library's multi-line ones."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def first_line_for(exc: BaseException, dtype_option: str) -> str:
    """:func:`first_line` for a command rather than a Python caller: the dtype hint names the
    command's own option, `dtype_option` (``--input-dtype`` in the command line and the magic)."""
    return first_line(exc).replace(DTYPE_HINT, f"add {dtype_option} int64")


class EngineError(RuntimeError):
    """A vLLM engine nbinspect cannot read (workers out of reach, internals moved, a model
    wrapped in an unknown way): one line saying what was found and what is missing. The
    engine is left as it was and keeps generating."""


class UnsafeCheckpointError(CheckpointError):
    """A pickle that would run code outside torch's safe list to load. Nothing from it has
    run; pass ``trust=True`` (``--trust`` on the command line) if you trust the file."""


class UnsupportedTensorError(CheckpointError):
    """A tensor a file holds but nbinspect does not read the values of (sparse, nested,
    meta): listed with its shape, named in statistics and compare instead of crashing."""


class TraceError(RuntimeError):
    """The traced forward pass raised. ``result`` holds the calls recorded up to the failure
    (a ``TraceResult``); :func:`nbinspect.trace` adds ``partial``, the partial Inspection."""

    def __init__(self, message: str, result: Any):
        super().__init__(message)
        self.result = result
        self.partial: Any = None
