"""``torch.save`` files (.pt, .pth, .bin, .ckpt): loaded safely and memory-mapped.

``weights_only=True`` lets the unpickler build tensors and plain containers only, so nothing
in the file runs; a pickle that needs more is refused with an error naming what it wanted,
unless the caller trusts the file. Zip-format files are memory-mapped (``mmap=True``): only
the pages a loop touches are read, and ``drop_tensor_pages`` gives them back.
"""

from __future__ import annotations

import pickle
import pickletools
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from ..core.limits import shown
from ..errors import CheckpointError, UnsafeCheckpointError, first_line

__all__ = ["ZIP_MAGIC", "load_torch_file"]

ZIP_MAGIC = b"PK\x03\x04"


def _refusal(path: Path, what: str) -> UnsafeCheckpointError:
    return UnsafeCheckpointError(
        f"{shown(path)}: refused to unpickle: the file {what}, and loading it would run code from the file. "
        "Nothing was run. If you trust this file, pass trust=True (--trust on the command line)"
    )


def _imports(path: Path) -> str | None:
    """The first ``module.name`` a plain pickle imports when loaded, read from its opcodes
    without running anything (pickletools only decodes); None if it imports nothing."""
    strings: list[str] = []
    try:
        with open(path, "rb") as f:
            for op, arg, _ in pickletools.genops(f):
                if op.name == "GLOBAL":
                    return str(arg).replace(" ", ".")
                if op.name == "STACK_GLOBAL" and len(strings) >= 2:
                    return f"{strings[-2]}.{strings[-1]}"
                if isinstance(arg, str):
                    strings.append(arg)
    except Exception:  # damaged or truncated: whatever was found so far is the answer
        return None
    return None


def load_torch_file(path: Path, *, trust: bool = False) -> tuple[Any, bool]:
    """(the unpickled object, whether its tensors are memory-mapped)."""
    with open(path, "rb") as f:
        mapped = f.read(4) == ZIP_MAGIC  # the legacy (pre-1.6) format cannot be mapped
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the outcome is what counts
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=not trust, mmap=mapped), mapped
    except pickle.UnpicklingError as exc:
        # The weights-only unpickler also fails on a corrupt byte stream ("Unsupported
        # operand"): that is damage, not a request for code.
        if not trust and "Weights only load failed" in str(exc) and "Unsupported operand" not in str(exc):
            found = re.search(r"GLOBAL (\S+)", str(exc))
            raise _refusal(
                path, f"needs {found.group(1)}" if found else "needs objects outside torch's safe list"
            ) from None
        wanted = None if mapped or trust else _imports(path)  # a plain pickle the weights-only reader cannot parse
        if wanted is not None and not wanted.startswith(("torch.", "collections.OrderedDict")):
            raise _refusal(path, f"is a plain pickle that imports {wanted}") from None
        detail = "invalid pickle opcode" if "Unsupported operand" in str(exc) else first_line(exc)
        raise CheckpointError(f"{shown(path)}: corrupt torch checkpoint ({detail})") from None
    except RecursionError:
        raise CheckpointError(f"{shown(path)}: cannot read as a torch checkpoint (nested too deeply)") from None
    except (RuntimeError, EOFError, ValueError, OSError, KeyError, AttributeError, ImportError) as exc:
        raise CheckpointError(f"{shown(path)}: cannot read as a torch checkpoint ({first_line(exc)})") from None
