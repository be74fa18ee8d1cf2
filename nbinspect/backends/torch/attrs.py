"""Layer hyperparameters of torch modules, read without calling into the model.

torch.nn classes declare their hyperparameters in ``__constants__`` (Linear's in/out
features, Conv's kernel/stride/padding/groups, norms' eps/momentum, Dropout's p, RNNs'
sizes, ...). A few facts live elsewhere (whether a bias exists, attention heads, container
length) and are added per type. Modules from outside torch.nn fall back to their simple
public attributes, or to their ``extra_repr`` text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ...core.attrs import plain, public_attrs
from ...dtypes import dtype_name


def _plain(value: Any) -> Any:
    """A JSON-friendly version of a hyperparameter value, or None if it is not one; torch
    dtypes by name (the only torch-specific value)."""
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    return plain(value)


def _constant_names(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for base in reversed(cls.__mro__):
        for name in getattr(base, "__constants__", ()):
            if name not in names:
                names.append(name)
    return tuple(names)


# what most hyperparameters are, kept as they are without two calls per value
_SCALAR_TYPES = frozenset({bool, int, float, str, type(None)})


# looked up once: every module of every model is read
_CONV = nn.modules.conv._ConvNd
_HAS_BIAS = (nn.Linear, nn.Bilinear, _CONV)
_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict)


def _add_conv(module: nn.Module, attrs: dict[str, Any]) -> None:
    attrs["bias"] = module._parameters.get("bias") is not None
    if not module.transposed:  # output_padding means nothing to a forward convolution
        attrs.pop("output_padding", None)


def _add_bias(module: nn.Module, attrs: dict[str, Any]) -> None:
    attrs["bias"] = module._parameters.get("bias") is not None  # not a helper call: every Linear


def _add_attention(module: nn.Module, attrs: dict[str, Any]) -> None:
    extras = {
        "embed_dim": module.embed_dim,
        "num_heads": module.num_heads,
        "head_dim": module.head_dim,
        "dropout": module.dropout,
        "kdim": module.kdim,
        "vdim": module.vdim,
        "bias": module.in_proj_bias is not None,
        "add_bias_kv": module.bias_k is not None,
    }
    for name, value in extras.items():
        if value is None:
            attrs.pop(name, None)
        else:
            attrs[name] = value


def _add_length(module: nn.Module, attrs: dict[str, Any]) -> None:
    attrs["length"] = len(module)  # type: ignore[arg-type]  # called for the containers only, which have a length


_Extras = Callable[[nn.Module, dict[str, Any]], None]


def _extras(cls: type) -> _Extras | None:
    """What modules of `cls` add to their constants (the facts that live elsewhere)."""
    if issubclass(cls, _CONV):
        return _add_conv
    if issubclass(cls, _HAS_BIAS):
        return _add_bias
    if issubclass(cls, nn.MultiheadAttention):
        return _add_attention
    if issubclass(cls, _CONTAINERS):
        return _add_length
    return None


# type -> (constant names, extras): the class tests run once per type, not once per module
_PLANS: dict[type, tuple[tuple[str, ...], _Extras | None]] = {}


def _generic(module: nn.Module) -> dict[str, Any]:
    """Simple public attributes of a module from outside torch.nn, else its extra_repr."""
    out = public_attrs(module, _plain)
    if not out:
        try:
            text = module.extra_repr()
        except Exception:  # user code: a broken extra_repr must not break inspection
            text = ""
        if text:
            out["extra_repr"] = text
    return out


def layer_attrs(module: nn.Module) -> dict[str, Any]:
    cls = type(module)
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = (_constant_names(cls), _extras(cls))
    names, extras = plan
    # Read the instance dict only: getattr could run a property of user code. A plain loop:
    # for a module's few constants, a comprehension or map/zip in C cost more (their frame,
    # iterators and tuples).
    own = module.__dict__
    attrs = {}
    try:  # every constant set (almost every module)
        for name in names:
            value = own[name]
            attrs[name] = value if type(value) in _SCALAR_TYPES else _plain(value)
    except KeyError:
        attrs = {name: v if type(v := own[name]) in _SCALAR_TYPES else _plain(v) for name in names if name in own}
    if extras is _add_bias:  # inline: every Linear
        attrs["bias"] = module._parameters.get("bias") is not None
    elif extras is not None:
        extras(module, attrs)
    return attrs or _generic(module)
