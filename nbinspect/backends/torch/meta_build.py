"""Building a model from a factory and its keyword arguments, on the meta device or for real.

On meta (:func:`empty_weights`) every parameter is created without memory, while buffers
stay real: non-persistent buffers computed at construction (rotary frequencies, position
ids) keep their values, and they are small. That is what ``accelerate.init_empty_weights``
does with ``include_buffers=False``; a ``torch.device("meta")`` block would make them meta too.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from torch import nn

__all__ = ["call_factory", "empty_weights", "factory_name", "rejected_keys"]

_UNEXPECTED = re.compile(r"got an unexpected keyword argument '(\w+)'")


@contextlib.contextmanager
def empty_weights() -> Iterator[None]:
    """Parameters registered inside the block move to the meta device as they are registered
    (before any initialisation runs on them), so nothing of their size is ever written."""
    register = nn.Module.register_parameter

    def on_meta(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            meta = param.to("meta")
            module._parameters[name] = type(param)(meta, requires_grad=param.requires_grad)

    nn.Module.register_parameter = on_meta  # type: ignore[method-assign,assignment]  # patched for the block only
    try:
        yield
    finally:
        nn.Module.register_parameter = register  # type: ignore[method-assign]  # the original


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
    try:
        with empty_weights() if meta else contextlib.nullcontext():
            model = build(**kwargs)
    except Exception as exc:  # user code: say which factory failed, with what
        rejected = _UNEXPECTED.search(str(exc)) if isinstance(exc, TypeError) else None
        if rejected and rejected.group(1) in kwargs:  # a factory passing **kwargs on to a class that refuses one
            raise ValueError(f"{where}: {name} does not take {rejected.group(1)!r} ({exc})") from exc
        raise ValueError(f"model {name!r}({dict(kwargs)}) failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, nn.Module):
        raise ValueError(f"model {name!r} returned a {type(model).__name__}, not a torch.nn.Module")
    return model
