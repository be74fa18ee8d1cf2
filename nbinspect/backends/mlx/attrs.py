"""Layer hyperparameters of MLX modules, read without calling into the model.

MLX layers keep some hyperparameters as plain attributes (norms' ``eps``, RoPE's
``dims``), some only in their weights' shapes (Linear, Conv, Embedding) and the rest only
in ``_extra_repr()`` text (pooling, Dropout). Known layers get the figures a person looks
for under MLX's own names; any other module gets its simple public attributes plus the
``key=value`` items of its ``_extra_repr()``, else that text itself.
"""

from __future__ import annotations

import ast
from typing import Any

from ...core.attrs import plain, public_attrs


def _split_top_level(text: str) -> list[str]:
    """'a=1, k=(3, 3), b' -> ['a=1', 'k=(3, 3)', 'b']: commas inside brackets stay."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _from_repr(module: Any) -> dict[str, Any]:
    try:
        text = module._extra_repr()
    except Exception:  # user code: a broken _extra_repr must not break inspection
        return {}
    out: dict[str, Any] = {}
    for part in _split_top_level(text or ""):
        key, eq, value = part.partition("=")
        if not eq or not key.strip().isidentifier():
            continue
        try:
            out[key.strip()] = plain(ast.literal_eval(value.strip()))
        except (ValueError, SyntaxError):
            out[key.strip()] = value.strip()
    if not out and text:
        out["extra_repr"] = text
    return out


def _shape(module: Any, key: str) -> tuple[int, ...] | None:
    value: Any = module.get(key) if isinstance(module, dict) else None
    return tuple(value.shape) if hasattr(value, "shape") else None


def _known(module: Any, type_name: str) -> dict[str, Any]:
    weight = _shape(module, "weight")
    has_bias = isinstance(module, dict) and "bias" in module
    if type_name == "Linear" and weight:
        return {"input_dims": weight[1], "output_dims": weight[0], "bias": has_bias}
    if type_name.startswith(("Conv", "ConvTranspose")) and weight:  # weight: out, *kernel, in / groups
        groups = int(vars(module).get("groups", 1))
        attrs = {"in_channels": weight[-1] * groups, "out_channels": weight[0], "kernel_size": weight[1:-1]}
        attrs.update(_from_repr(module))
        attrs.update(groups=groups, bias=has_bias)
        return {k: v for k, v in attrs.items() if not isinstance(k, int)}
    if type_name == "Embedding" and weight:
        return {"num_embeddings": weight[0], "dims": weight[1]}
    if type_name.startswith("Dropout") and "_p_1" in vars(module):  # stores 1 - p
        return {"p": round(1.0 - float(module._p_1), 12)}
    if type_name == "MultiHeadAttention":
        q = _shape(module.get("query_proj", {}), "weight") if isinstance(module, dict) else None
        heads = vars(module).get("num_heads")
        if q and isinstance(heads, int) and heads > 0:
            return {"num_heads": heads, "dims": q[1], "head_dim": q[0] // heads}
        return {"num_heads": heads}
    if type_name == "Sequential":
        return {"length": len(module.get("layers", []))}
    return {}


def layer_attrs(module: Any) -> dict[str, Any]:
    """The hyperparameters of one MLX module as a JSON-friendly dict."""
    type_name = type(module).__name__
    attrs = _known(module, type_name)
    if attrs:
        return attrs
    return {**public_attrs(module), **_from_repr(module)}
