"""A live ``mlx.nn.Module`` as a source. Reads names, shapes and flags; changes nothing.

MLX modules are dicts whose values are arrays, submodules, or lists and dicts of them.
Paths are the dotted names ``mlx.utils.tree_flatten`` gives (``layers.0.weight``); a plain
list or dict of modules shows as a node of type ``list`` / ``dict`` (as torch's ModuleList).
MLX has no buffers: every array in ``parameters()`` is a parameter, trainable when
``trainable_parameters()`` holds it (``freeze()`` and BatchNorm's running statistics make
them frozen). An array held at two paths (a tied weight) is one storage: keyed by the array
object itself, counted once. Values are zero-copy torch views of the arrays' memory
(bfloat16 too), so the statistics and comparison engines read them in place.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import torch

from ...core.source import ModelSource, ModuleEntry, TensorEntry
from ...schema import BUFFER, PARAMETER
from .attrs import layer_attrs

__all__ = ["flat_arrays", "from_mlx_module", "is_mlx_module", "mlx_dtype_name", "module_objects", "to_torch"]


def is_mlx_module(obj: Any) -> bool:
    """True for an ``mlx.nn.Module``; never imports mlx (a model can only exist if it is loaded)."""
    nn = sys.modules.get("mlx.nn")
    return nn is not None and isinstance(obj, nn.Module)


def mlx_dtype_name(dtype: Any) -> str:
    """'mlx.core.bfloat16' -> 'bfloat16': the names torch uses too."""
    return str(dtype).rpartition(".")[2]


def to_torch(array: Any) -> torch.Tensor:
    """A zero-copy CPU torch view of an MLX array (evaluated first: MLX is lazy)."""
    import mlx.core as mx

    mx.eval(array)
    dtype = getattr(torch, mlx_dtype_name(array.dtype))
    if array.size == 0:
        return torch.empty(tuple(array.shape), dtype=dtype)
    with warnings.catch_warnings():  # MLX buffers are read-only to Python; nothing here writes
        warnings.simplefilter("ignore", UserWarning)
        flat = torch.frombuffer(memoryview(array), dtype=dtype)
    return flat.view(tuple(array.shape))


def _walk(value: Any, path: str, owner: str, out: list) -> None:
    """(kind, path, owner module path, value) in pre-order: modules and their containers,
    then arrays, the way ``tree_flatten`` names them."""
    import mlx.core as mx
    import mlx.nn as nn

    if isinstance(value, mx.array):
        out.append(("array", path, owner, value))
    elif isinstance(value, nn.Module):
        out.append(("module", path, owner, value))
        for key, child in value.items():
            if not key.startswith("_"):  # MLX keeps private state (pooling's _kernel_size) out of parameters
                _walk(child, f"{path}.{key}" if path else str(key), path, out)
    elif isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        found: list = []
        for key, child in items:
            _walk(child, f"{path}.{key}", path, found)
        if any(kind == "module" for kind, *_ in found):  # a container of modules is a node of the tree
            out.append(("container", path, owner, value))
            found = [(k, p, path if o == owner else o, v) for k, p, o, v in found]
        out.extend(found)


def quantization(module: Any) -> str | None:
    """'affine 4-bit, group 64' for a quantized layer (QuantizedLinear, QuantizedEmbedding:
    packed uint32 weights with per-group scales), else None."""
    bits, group = getattr(module, "bits", None), getattr(module, "group_size", None)
    if not (isinstance(bits, int) and isinstance(group, int) and "scales" in module):
        return None
    return f"{getattr(module, 'mode', 'affine')} {bits}-bit, group {group}"


def _dequantized(module: Any) -> torch.Tensor:
    import mlx.core as mx

    mode = str(getattr(module, "mode", "affine"))
    weight, scales, biases = module["weight"], module["scales"], module.get("biases")
    if mode == "affine":
        return to_torch(mx.dequantize(weight, scales, biases, module.group_size, module.bits))
    return to_torch(mx.dequantize(weight, scales, biases, module.group_size, module.bits, mode=mode))


def _entry(path: str, owner: str, value: Any, trainable: set[int], module: Any) -> TensorEntry:
    """One array; in a quantized layer the packed weight is its logical matrix (shape and count
    of the weights it stands for, the packed bytes) and the per-group scales/biases are
    settings (buffers), as torch's quantized Linear reads."""
    shape, numel, kind, values = tuple(value.shape), int(value.size), PARAMETER, lambda a=value: to_torch(a)
    local = path.rpartition(".")[2]
    if module is not None and quantization(module):
        if local == "weight":
            shape = (*shape[:-1], shape[-1] * 32 // module.bits)
            numel, values = math.prod(shape), lambda m=module: _dequantized(m)
        elif local in ("scales", "biases"):
            kind = BUFFER
    return TensorEntry(
        name=path,
        module=owner,
        kind=kind,
        shape=shape,
        dtype=mlx_dtype_name(value.dtype),
        device="cpu",  # MLX arrays live in unified memory
        numel=numel,
        nbytes=int(value.nbytes),
        requires_grad=kind == PARAMETER and id(value) in trainable,
        storage_key=("mlx", id(value)),
        tensor=values,
    )


def from_mlx_module(model: Any, name: str | None = None) -> ModelSource:
    walked: list = []
    _walk(model, "", "", walked)
    trainable = {id(a) for a in flat_arrays(model.trainable_parameters())}
    modules: list[ModuleEntry] = []
    tensors: list[TensorEntry] = []
    first_path: dict[int, str] = {}
    node_paths = [p for kind, p, _, _ in walked if kind != "array"]
    has_children = {p.rpartition(".")[0] for p in node_paths if p}
    by_path = {p: v for kind, p, _, v in walked if kind == "module"}
    for kind, path, owner, value in walked:
        if kind == "array":
            tensors.append(_entry(path, owner, value, trainable, by_path.get(owner)))
            continue
        alias_of = first_path.setdefault(id(value), path)
        is_module = kind == "module"
        modules.append(
            ModuleEntry(
                name=path,
                type=type(value).__name__,
                is_leaf=path not in has_children,
                training=bool(value.training) if is_module else None,
                attrs=layer_attrs(value) if is_module else {"length": len(value)},
                alias_of=None if alias_of == path else alias_of,
            )
        )
    return ModelSource(
        name=name or type(model).__name__,
        framework="mlx",
        modules=tuple(modules),
        tensors=tuple(tensors),
        model=model,
    )


def flat_arrays(tree: Any) -> list:
    """The arrays of a parameter tree, in ``tree_flatten`` order (tied arrays at each path)."""
    from mlx.utils import tree_flatten

    return [item[1] for item in tree_flatten(tree)]


def module_objects(model: Any) -> list[tuple[str, Any]]:
    """(first path, module) for each distinct module object of `model`, pre-order."""
    walked: list = []
    _walk(model, "", "", walked)
    first: dict[int, tuple[str, Any]] = {}
    for kind, path, _, value in walked:
        if kind == "module":
            first.setdefault(id(value), (path, value))
    return list(first.values())
