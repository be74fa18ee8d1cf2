"""Building a model from a factory and its keyword arguments, on the meta device or for real.

On meta (:func:`empty_weights`) every parameter is created without memory, while buffers
stay real: non-persistent buffers computed at construction (rotary frequencies, position
ids) keep their values, and they are small. That is what ``accelerate.init_empty_weights``
does with ``include_buffers=False``; a ``torch.device("meta")`` block would make them meta too.

A config from a file chooses the sizes, so :func:`build_on_meta` first builds entirely on
meta (nothing computed, nothing allocated) to learn how large the buffers are, and computes
them for real only within ``MAX_BUILT_BUFFER_BYTES``; every build counts the modules it
creates against ``MAX_BUILT_MODULES``.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from ...core.limits import MAX_BUILT_BUFFER_BYTES, MAX_BUILT_MODULES

__all__ = ["BuildTooLarge", "build_on_meta", "call_factory", "empty_weights", "factory_name", "rejected_keys"]

_UNEXPECTED = re.compile(r"got an unexpected keyword argument '(\w+)'")


class BuildTooLarge(ValueError):
    """A model build created more modules than ``MAX_BUILT_MODULES``."""


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """Parameters registered inside the block move to the meta device as they are registered
    (before any initialisation runs on them), so nothing of their size is ever written; a
    build creating more than ``MAX_BUILT_MODULES`` modules stops (BuildTooLarge)."""
    register = nn.Module.register_parameter
    module_init = nn.Module.__init__
    created = 0

    def counted_init(module: nn.Module, *args: Any, **kwargs: Any) -> None:
        nonlocal created
        created += 1
        if created > MAX_BUILT_MODULES:
            raise BuildTooLarge(f"the model has more than {MAX_BUILT_MODULES:,} modules, over nbinspect's limit")
        module_init(module, *args, **kwargs)

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            meta = param.to("meta")
            module._parameters[name] = type(param)(meta, requires_grad=param.requires_grad)

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign,assignment]  # patched for the block only
    nn.Module.__init__ = counted_init  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]  # the originals
        nn.Module.__init__ = module_init  # type: ignore[method-assign]


class _ComputeBudget(TorchDispatchMode):
    """Charges every tensor operation of a build that writes real memory (an out-of-place
    result, sized on meta before it runs; an in-place write) against `limit` bytes, and stops
    the build before the operation that would pass it. ``empty`` is free: it reserves address
    space, and a parameter moves to meta before anything writes it."""

    def __init__(self, limit: int):
        super().__init__()
        self.left = limit

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = _tensors((args, kwargs))
        # free: a result asked for on meta or computed from meta tensors, and `empty`
        if _device(kwargs) == "meta" or (inputs and all(t.is_meta for t in inputs)) or func in _FREE:
            return func(*args, **kwargs)
        writes = [a for a in _mutated(func, args, kwargs) if not a.is_meta]
        if writes:
            cost = sum(t.numel() * t.element_size() for t in writes)
        else:
            shapes = func(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))
            cost = sum(t.numel() * t.element_size() for t in _tensors(shapes))
        self.left -= cost
        if self.left < 0:
            raise _OverBudget
        return func(*args, **kwargs)


class _OverBudget(BaseException):
    """Not an Exception: a constructor's `except Exception` fallback must not swallow it."""


_FREE = {torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default}


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _device(kwargs: Mapping[str, Any]) -> str:
    device = kwargs.get("device")
    return "meta" if device is not None and torch.device(device).type == "meta" else "real"


def _to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x if x.is_meta else x.to("meta")
    return torch.device("meta") if isinstance(x, torch.device) else x


def _mutated(func: Any, args: Any, kwargs: Mapping[str, Any]) -> list[torch.Tensor]:
    """The tensors `func` writes in place (its schema's mutable arguments)."""
    out = []
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(arg.name)
            out += _tensors(value)
    return out


def build_on_meta(build: Callable[[], nn.Module]) -> tuple[nn.Module, str | None]:
    """(``build()`` with its parameters on meta, a note or None). The buffers it computes
    (rotary and sinusoid tables, masks) are computed for real within
    ``MAX_BUILT_BUFFER_BYTES`` of work; a config asking for more is built again wholly on
    meta (buffers too, no values) and the note says so."""
    try:
        with empty_weights(), _ComputeBudget(MAX_BUILT_BUFFER_BYTES):
            return build(), None
    except _OverBudget:
        pass
    with torch.device("meta"), empty_weights():
        model = build()
    note = (
        f"its buffers are left on meta (no values): computing them takes more than the "
        f"{MAX_BUILT_BUFFER_BYTES / 2**20:,.0f} MiB nbinspect spends on a model built from a config"
    )
    return model, note


def factory_name(build: Callable[..., Any]) -> str:
    return getattr(build, "__qualname__", None) or getattr(build, "__name__", None) or repr(build)


def rejected_keys(build: Callable[..., Any], kwargs: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(keys `build` does not accept, required arguments the keys leave out), read from its
    signature; both empty when the signature cannot be read or takes ``**kwargs``."""
    try:
        signature = inspect.signature(build)
    except (TypeError, ValueError):
        return [], []
    params = signature.parameters.values()
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [] if any(p.kind == p.VAR_KEYWORD for p in params) else [k for k in kwargs if k not in named]
    required = [
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty and p.name not in kwargs
    ]
    return unknown, required


def call_factory(
    build: Callable[..., Any], kwargs: Mapping[str, Any], *, meta: bool = False, where: str = "config"
) -> nn.Module:
    """``build(**kwargs)``, checked: keys it does not take and required arguments left out are
    named before anything runs; `meta` builds with :func:`empty_weights`. `where` names the
    config in messages."""
    name = factory_name(build)
    unknown, required = rejected_keys(build, kwargs)
    if unknown:
        raise ValueError(f"{where}: {name} does not take {', '.join(map(repr, unknown))}")
    if required:
        raise ValueError(f"{where}: {name} needs {', '.join(map(repr, required))}, which the config does not give")
    note = None
    try:
        if meta:
            model, note = build_on_meta(lambda: build(**kwargs))
        else:
            model = build(**kwargs)
    except Exception as exc:  # user code: say which factory failed, with what
        rejected = _UNEXPECTED.search(str(exc)) if isinstance(exc, TypeError) else None
        if rejected and rejected.group(1) in kwargs:  # a factory passing **kwargs on to a class that refuses one
            raise ValueError(f"{where}: {name} does not take {rejected.group(1)!r} ({exc})") from exc
        raise ValueError(f"model {name!r}({dict(kwargs)}) failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise ValueError(f"model {name!r} returned a {type(model).__name__}, not a torch.nn.Module")
    if note:
        warnings.warn(f"{where}: {name}: {note}", stacklevel=2)
    return model
