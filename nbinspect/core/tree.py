"""A source from named tensors alone: the module tree is rebuilt from the dotted names.

Without the model object, module types are unknown and attrs empty; names, shapes, dtypes
and values are exact. Parameters and buffers are told apart the only way the names allow:
integer/bool tensors and BatchNorm's running statistics are buffers, everything else is
counted as a parameter.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..schema import BUFFER, PARAMETER, UNKNOWN_TYPE
from .source import ModelSource, ModuleEntry, TensorEntry, parent_path, preorder

__all__ = ["PACKED_KEY", "UNKNOWN_TYPE", "StoredTensor", "build_source", "module_paths", "natural_key"]

_BUFFER_NAMES = frozenset({"running_mean", "running_var", "num_batches_tracked"})
_FLOATING = ("float", "bfloat", "complex")
# a quantized weight is a parameter, frozen, as a live quantized module's packed one
_QUANTIZED = ("qint", "quint")
# A quantized Linear keeps its weight and bias in a LinearPackedParams child at this name,
# which saves them as one tuple under the same name again; its own `scale` and `zero_point`
# are quantization settings, saved as tensors. A file source reads the pair as that
# child's `weight` and `bias`, frozen, as the live module shows them.
PACKED_KEY = "_packed_params"
_QUANTIZATION_SETTINGS = frozenset({"scale", "zero_point"})


@dataclass(frozen=True, slots=True)
class StoredTensor:
    """One tensor as a file or a state_dict holds it."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the 'torch.' prefix
    nbytes: int
    storage_key: Hashable
    tensor: Any = field(repr=False)  # a tensor, or a zero-argument loader for one
    release_hook: Callable[[], None] | None = field(default=None, repr=False)
    numel: int | None = None  # elements stored, when not the shape's product (a broadcast view)
    kind: str | None = None  # PARAMETER or BUFFER when the file says (its optimizer state); else guessed by name
    rows: Callable[[int, int], Any] | None = field(default=None, repr=False)  # see TensorEntry.rows


def natural_key(name: str) -> tuple:
    """Sort key that puts 'layers.2' before 'layers.10'."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"\.", name))


def _kind(t: StoredTensor, quantized_modules: set[str]) -> str:
    module, _, local = t.name.rpartition(".")
    if local in _BUFFER_NAMES or not t.dtype.startswith((*_FLOATING, *_QUANTIZED)):
        return BUFFER
    if local in _QUANTIZATION_SETTINGS and module in quantized_modules:
        return BUFFER
    return PARAMETER


def module_paths(names: Iterable[str]) -> list[str]:
    """Every module path the tensor names imply, in pre-order by first appearance."""
    return preorder(parent_path(name) or "" for name in names)


def build_source(
    name: str,
    stored: Iterable[StoredTensor],
    *,
    metadata: Mapping[str, Any] | None = None,
    sort: bool = False,
    framework: str = "torch",
) -> ModelSource:
    """A ModelSource from stored tensors. `sort` orders names naturally (for files whose
    order is not the model's, like safetensors); otherwise the given order is kept."""
    stored = sorted(stored, key=lambda t: natural_key(t.name)) if sort else list(stored)
    paths = module_paths(t.name for t in stored)
    has_children = {parent_path(p) for p in paths if p}
    quantized = {parent_path(p) or "" for p in paths if p.rpartition(".")[2] == PACKED_KEY}
    modules = tuple(
        ModuleEntry(name=p, type=UNKNOWN_TYPE, is_leaf=p not in has_children, training=None, attrs={}) for p in paths
    )
    tensors = tuple(
        TensorEntry(
            name=t.name,
            module=parent_path(t.name) or "",
            kind=(kind := t.kind or _kind(t, quantized)),
            shape=t.shape,
            dtype=t.dtype,
            device="cpu",
            numel=math.prod(t.shape) if t.numel is None else t.numel,
            nbytes=t.nbytes,
            requires_grad=kind == PARAMETER
            and not t.dtype.startswith(_QUANTIZED)
            and (parent_path(t.name) or "").rpartition(".")[2] != PACKED_KEY,
            storage_key=t.storage_key,
            tensor=t.tensor,
            release_hook=t.release_hook,
            rows=t.rows,
        )
        for t in stored
    )
    return ModelSource(name=name, framework=framework, modules=modules, tensors=tensors, metadata=dict(metadata or {}))
