"""The user's approvals of project trust lists, kept where the project cannot write them.

A ``[tool.nbinspect] trust`` list in a ``pyproject.toml`` is the word of whoever wrote that
file, and a cloned or downloaded folder ships its own. As ``direnv allow`` and VS Code's
workspace trust, the list counts only once the user approved it (``nbinspect trust``): the
approval, in ``$XDG_CONFIG_HOME/nbinspect/trusted.json`` (default ``~/.config``), records the
pyproject's resolved path and a sha256 of its list, so an edited list needs a new approval.
The file is written atomically, readable by the user alone, and read defensively: a file too
large or malformed approves nothing, with a one-line warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from ..core.output import write_output
from ..errors import CheckpointError, first_line
from .files import FileHandle
from .text import parse_json, read_text

__all__ = ["approvals", "approvals_path", "is_approved", "list_digest", "record", "remove"]

MAX_APPROVALS_BYTES = 1 << 20
_VERSION = 1


def approvals_path() -> Path:
    """``$XDG_CONFIG_HOME/nbinspect/trusted.json`` (a relative XDG_CONFIG_HOME is ignored, as the spec says)."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "nbinspect" / "trusted.json"


def list_digest(entries: Sequence[str]) -> str:
    """The sha256 of a trust list as written (order and spelling count)."""
    return hashlib.sha256(json.dumps(list(entries)).encode("utf-8")).hexdigest()


def _approval(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("sha256"), str)
        and isinstance(value.get("trust"), list)
        and all(isinstance(v, str) for v in value["trust"])
    )


def approvals() -> dict[str, dict]:
    """Pyproject path -> {"sha256": digest of its list, "trust": the list approved}; {} when
    there is no file or it cannot be read (then one warning line says why)."""
    path = approvals_path()
    if not path.exists():
        return {}
    try:
        handle = FileHandle.open(path)
        try:
            doc = parse_json(read_text(handle, MAX_APPROVALS_BYTES, "approvals file"), str(path))
        finally:
            handle.close()
    except (CheckpointError, OSError) as exc:
        doc = exc
    approved = doc.get("approved") if isinstance(doc, dict) else None
    if not isinstance(approved, dict) or not all(_approval(v) for v in approved.values()):
        why = first_line(doc) if isinstance(doc, BaseException) else "not an nbinspect approvals file"
        warnings.warn(f"{path}: {why}; no project trust list is approved", stacklevel=2)
        return {}
    return approved


def is_approved(pyproject: Path, entries: Sequence[str]) -> bool:
    found = approvals().get(str(pyproject))
    return found is not None and found["sha256"] == list_digest(entries)


def _save(approved: dict[str, dict]) -> None:
    path = approvals_path()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps({"version": _VERSION, "approved": approved}, indent=2, sort_keys=True) + "\n"
    write_output(path, text, mode=0o600)


def record(pyproject: Path, entries: Sequence[str]) -> None:
    """Approve `entries`, the trust list of `pyproject` (a resolved path), as they are now."""
    _save({**approvals(), str(pyproject): {"sha256": list_digest(entries), "trust": list(entries)}})


def remove(pyproject: Path) -> bool:
    """Withdraw the approval of `pyproject`'s list; whether there was one."""
    approved = approvals()
    if approved.pop(str(pyproject), None) is None:
        return False
    _save(approved)
    return True
