"""What goes into and comes out of a traced forward pass: building inputs from shapes,
and walking nested outputs (tuples, dicts, dataclasses, HF ``ModelOutput``) to their leaves.

Torch tensors by default; the MLX trace passes ``array=mx.array`` (and its dtype namer to
:func:`io_records`): what counts as a tensor and how its dtype is named are all that differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..dtypes import dtype_name

__all__ = ["dtype_name", "io_records", "is_shape", "leaves", "map_inputs", "split_input", "tensors_in"]


def is_shape(obj: Any) -> bool:
    """A non-empty tuple (or torch.Size) of ints is read as the shape of an input tensor."""
    return isinstance(obj, tuple) and len(obj) > 0 and all(type(d) is int for d in obj)


def split_input(input: Any) -> tuple[tuple, dict]:
    """`input=` of inspect()/memory() as (args, kwargs): a dict is keyword arguments, a list
    or a tuple that is not a shape is positional arguments, anything else one argument."""
    if input is None:
        raise ValueError(
            "no input given: pass a tensor, a shape tuple, a tuple of arguments or a dict of keyword arguments"
        )
    if isinstance(input, dict):
        return (), dict(input)
    if isinstance(input, (list, tuple)) and not is_shape(input):
        return tuple(input), {}
    return (input,), {}


def map_inputs(
    obj: Any, on_tensor: Callable[[Any], Any], on_shape: Callable[[tuple], Any], array: type[Any] = torch.Tensor
) -> Any:
    """`obj` with every tensor (instance of `array`) and every shape tuple replaced, containers rebuilt."""
    if isinstance(obj, array):
        return on_tensor(obj)
    if is_shape(obj):
        return on_shape(tuple(obj))
    if isinstance(obj, dict):
        return {k: map_inputs(v, on_tensor, on_shape, array) for k, v in obj.items()}
    if isinstance(obj, list):
        return [map_inputs(v, on_tensor, on_shape, array) for v in obj]
    if isinstance(obj, tuple):
        items = [map_inputs(v, on_tensor, on_shape, array) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    return obj


def leaves(obj: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, value) for every leaf of nested tuples, lists, dicts and dataclasses (a tensor
    or an MLX array is a leaf: neither is one of those containers)."""
    if isinstance(obj, torch.Tensor) or depth > 20:
        yield path, obj
        return
    prefix = f"{path}." if path else ""
    if isinstance(obj, dict):  # includes transformers' ModelOutput (an OrderedDict)
        for key, value in obj.items():
            yield from leaves(value, f"{prefix}{key}", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from leaves(value, f"{prefix}{i}", depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from leaves(getattr(obj, f.name, None), f"{prefix}{f.name}", depth + 1)
    else:
        yield path, obj


def tensors_in(obj: Any, array: type[Any] = torch.Tensor) -> list:
    """The tensors (instances of `array`) inside `obj`, in order. Fast for the common
    single-tensor cases."""
    if isinstance(obj, array):
        return [obj]
    if type(obj) is tuple and len(obj) == 1 and isinstance(obj[0], array):
        return [obj[0]]
    return [v for _, v in leaves(obj) if isinstance(v, array)]


def io_records(
    obj: Any, bare: str, array: type[Any] = torch.Tensor, name_dtype: Callable[[Any], str] = dtype_name
) -> list[dict]:
    """JSON-ready records of the leaves of a model's inputs or outputs; `bare` names a
    leaf that is the whole object (e.g. a single output tensor)."""
    records = []
    for path, value in leaves(obj):
        path = path or bare
        if isinstance(value, array):
            records.append({"path": path, "shape": list(value.shape), "dtype": name_dtype(value.dtype)})
        else:
            records.append({"path": path, "type": type(value).__name__})
    return records
