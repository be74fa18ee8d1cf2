"""Layer hyperparameters as JSON-friendly values: the part :mod:`.torch_attrs` and
:mod:`.mlx_attrs` share (which values count, and a module's simple public attributes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["plain", "public_attrs"]

_SCALARS = (bool, int, float, str, type(None))


def plain(value: Any) -> Any:
    """A scalar as it is, a list or tuple of scalars (torch.Size too) as a tuple, else None."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, _SCALARS) for v in value):
        return tuple(value)
    return None


def public_attrs(module: Any, convert: Callable[[Any], Any] = plain) -> dict[str, Any]:
    """The public attributes of the instance dict that `convert` keeps (not None). Never
    getattr: a property could run user code. ``training`` is a mode flag, not a hyperparameter."""
    out = {}
    for name, value in vars(module).items():
        if name.startswith("_") or name == "training":
            continue
        value = convert(value)
        if value is not None:
            out[name] = value
    return out
