"""The ``model_info.json`` layout other tools read: one document per model, built from the frames.

Top level: ``model_name``, ``framework``, ``model_type``, ``parameters``,
``trainable_parameters``, ``input_info``, ``output_info`` and ``layers`` (every module in
pre-order; the root only when it owns tensors itself, e.g. a ViT's ``cls_token``: then a
first record named ``""``). A layer's ``parameters`` are its own (a tied tensor counted at
its first owner), so the records sum to the model's count; a container (a module with
children, e.g. ``Sequential``) also carries ``subtree_parameters``. ``trainable`` says
whether any parameter of the subtree trains. A record lists the shapes and dtypes of its
own parameters, its own buffers separately (``buffer_shapes``/``buffer_dtypes``, only when
it has some: running statistics are not parameters), and its hyperparameters flattened in.
Dtypes are written in the framework's own names (``"torch.float32"``; the backend's
``dtype_prefix`` for others). A vLLM engine adds ``components`` (``name``, ``type``,
``description``, ``process``) and ``engine``; its ``input_info``/``output_info`` types are
``text_or_sampling_params`` and ``generated_text``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ..schema import BUFFER, ENGINE_TOTALS, PARAMETER
from .format import is_missing
from .json_export import jsonable, tensors_by_module

__all__ = ["model_info_dict"]

# The hyperparameters the format lists for these types, in its order; other types carry
# every attribute nbinspect read (sources/torch_attrs.py).
_CONV = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "bias")
_NORM = ("num_features", "eps", "momentum", "affine", "track_running_stats")
_FIELDS: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    **dict.fromkeys(("Conv1d", "Conv2d", "Conv3d"), _CONV),
    **dict.fromkeys(("BatchNorm1d", "BatchNorm2d", "BatchNorm3d"), _NORM),
    **dict.fromkeys(("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"), ("p", "inplace")),
}
_RESERVED = {"layer_index", "name", "type", "parameters", "trainable", "parameter_shapes", "parameter_dtypes"}


def _dtype_label(prefix: str, name: Any) -> Any:
    """A dtype in the framework's own spelling (`prefix`: the backend's ``dtype_prefix``):
    ``torch.float32``, ``mlx.core.float32``."""
    return None if is_missing(name) else f"{prefix}{name}"


def _attributes(type_name: str, attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    attrs = dict(attrs or {})
    if "input_dims" in attrs and "in_features" not in attrs:  # MLX's Linear: the format's names
        attrs["in_features"] = attrs.pop("input_dims")
        attrs["out_features"] = attrs.pop("output_dims", None)
    if type_name == "Sequential":
        return {"num_layers": attrs.get("length")}
    fields = _FIELDS.get(type_name)
    if fields is not None:
        return {k: attrs[k] for k in fields if k in attrs}
    return {k: v for k, v in attrs.items() if k not in _RESERVED}


def _layer(index: int, row: Mapping[str, Any], tensors: list[dict], prefix: str) -> dict[str, Any]:
    params = [t for t in tensors if t["kind"] == PARAMETER]
    buffers = [t for t in tensors if t["kind"] == BUFFER]
    record = {
        "layer_index": index,
        "name": row["name"],
        "type": row["type"],
        "parameters": int(row["own_params"]),
        "trainable": bool(row["trainable_params"] > 0),
        "parameter_shapes": [t["shape"] for t in params],
        "parameter_dtypes": [_dtype_label(prefix, t["dtype"]) for t in params],
    }
    if not row["is_leaf"]:
        record["subtree_parameters"] = int(row["params"])
    if buffers:
        record["buffer_shapes"] = [t["shape"] for t in buffers]
        record["buffer_dtypes"] = [_dtype_label(prefix, t["dtype"]) for t in buffers]
    return {**record, **_attributes(row["type"], row["attrs"])}


def _tensor_info(records: Any, prefix: str) -> dict[str, Any]:
    """``shape``/``dtype`` of the first tensor a traced pass took or returned (null until traced)."""
    first = next((r for r in records or () if "shape" in r), None)
    if first is None:
        return {"shape": None, "dtype": None}
    return {"shape": list(first["shape"]), "dtype": _dtype_label(prefix, first["dtype"])}


_TEXT_TYPES = {"input": "text_or_sampling_params", "output": "generated_text"}  # the format's names
_COMPONENT_KEYS = {"component": "name", "detail": "description"}


def _text_info(records: Any, kind: str) -> dict[str, Any]:
    """An engine's sample generation: the prompt, or the generated text, with token counts."""
    record = next(iter(records or ()), None) or {}
    out: dict[str, Any] = {"type": _TEXT_TYPES[kind], f"sample_{kind}": record.get("value")}
    if kind == "output":
        out["num_outputs"] = len(records or ())
    return out | {k: v for k, v in record.items() if k not in ("path", "type", "value")}


def model_info_dict(
    name: str,
    framework: str,
    totals: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    io: Mapping[str, Any],
    dtype_prefix: str = "torch.",
) -> dict:
    """The ``model_info.json`` document of one inspection, from its ``layers`` and ``params``
    frames (and a vLLM engine's ``components``); dtypes spelled with `dtype_prefix`."""
    layers, components = frames["layers"], frames.get("components")
    engine = components is not None  # a serving engine (vLLM)
    root_type = layers["type"].iloc[0] if len(layers) else None
    tensors = tensors_by_module(frames["params"])
    rows = [row for row in layers.to_dict("records") if row["name"] and is_missing(row["alias_of"])]
    document: dict[str, Any] = {
        "model_name": name,
        "framework": framework,
        "model_type": totals.get("architecture", root_type) if engine else root_type,
        "parameters": totals["total_params"],
        "trainable_parameters": totals["trainable_params"],
        "input_info": _text_info(io.get("input"), "input") if engine else _tensor_info(io.get("input"), dtype_prefix),
        "output_info": (
            _text_info(io.get("output"), "output") if engine else _tensor_info(io.get("output"), dtype_prefix)
        ),
    }
    if engine:
        document["engine"] = {k: totals.get(k) for k in ENGINE_TOTALS}
        document["components"] = [
            {_COMPONENT_KEYS.get(k, k): v for k, v in c.items()}
            for c in ([] if components is None else components.to_dict("records"))
        ]
    root = [row for row in layers.to_dict("records")[:1] if not row["name"] and tensors.get("")]
    document["layers"] = [
        _layer(i, row, tensors.get(row["name"], []), dtype_prefix) for i, row in enumerate([*root, *rows])
    ]
    return jsonable(document)
