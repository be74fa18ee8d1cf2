"""``torch.save`` files (.pt, .pth, .bin, .ckpt): loaded safely and memory-mapped.

``weights_only=True`` lets the unpickler build tensors and plain containers only, so nothing
in the file runs; a pickle that needs more is refused with an error naming what it wanted,
unless the caller trusts the file. Zip-format files are memory-mapped (``mmap=True``): only
the pages a loop touches are read, and ``drop_tensor_pages`` gives them back.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError, UnsafeCheckpointError, first_line

__all__ = ["ZIP_MAGIC", "load_torch_file"]

ZIP_MAGIC = b"PK\x03\x04"


def _refusal(path: Path, exc: Exception) -> UnsafeCheckpointError:
    found = re.search(r"GLOBAL (\S+)", str(exc))
    what = f"needs {found.group(1)}" if found else "needs objects outside torch's safe list"
    return UnsafeCheckpointError(
        f"{path}: refused to unpickle: the file {what}, and loading it would run code from the file. "
        "Nothing was run. If you trust this file, pass trust=True (--trust on the command line)"
    )


def load_torch_file(path: Path, *, trust: bool = False) -> tuple[Any, bool]:
    """(the unpickled object, whether its tensors are memory-mapped)."""
    with open(path, "rb") as f:
        mapped = f.read(4) == ZIP_MAGIC  # the legacy (pre-1.6) format cannot be mapped
    try:
        return torch.load(path, map_location="cpu", weights_only=not trust, mmap=mapped), mapped
    except pickle.UnpicklingError as exc:
        # The weights-only unpickler also fails on a corrupt byte stream ("Unsupported
        # operand"): that is damage, not a request for code.
        if not trust and "Weights only load failed" in str(exc) and "Unsupported operand" not in str(exc):
            raise _refusal(path, exc) from None
        detail = "invalid pickle opcode" if "Unsupported operand" in str(exc) else first_line(exc)
        raise CheckpointError(f"{path}: corrupt torch checkpoint ({detail})") from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, AttributeError, ImportError) as exc:
        raise CheckpointError(f"{path}: cannot read as a torch checkpoint ({first_line(exc)})") from None
