"""A live torch.nn.Module as a source. Reads names, shapes and flags; changes nothing."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Hashable, Sequence
from itertools import repeat
from operator import add, and_, attrgetter, is_, is_not, itemgetter, mul
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from ...core.limits import MAX_MODULE_PATHS
from ...core.source import Columns, ModelSource, ModuleEntry, TensorEntry
from ...dtypes import dtype_name
from ...schema import BUFFER, PARAMETER
from .attrs import layer_attrs

_DEVICE_NAMES: dict[torch.device, str] = {}


def _device_name(device: torch.device) -> str:
    name = _DEVICE_NAMES.get(device)
    if name is None:
        name = _DEVICE_NAMES[device] = str(device)
    return name


def _canonical_dims(tensor: torch.Tensor) -> tuple[tuple[int, int], ...]:
    """(size, stride) pairs that describe the set of elements a strided view covers,
    independent of how the view orders them: size-1 and broadcast (stride-0) dimensions
    dropped, the rest sorted by stride and merged where they are contiguous together."""
    dims = sorted(((n, st) for n, st in zip(tensor.shape, tensor.stride()) if n > 1 and st), key=lambda d: -d[1])
    merged: list[tuple[int, int]] = []
    for n, st in dims:
        if merged and merged[-1][1] == n * st:
            merged[-1] = (merged[-1][0] * n, st)
        else:
            merged.append((n, st))
    return tuple(merged)


def storage_key(tensor: torch.Tensor) -> Hashable:
    """Equal for two tensors that cover exactly the same elements in memory (tied weights).

    The same Parameter at two paths, or two views of the same elements (also transposed),
    get one key: the address of the first element, the dtype and the exact set of element
    offsets the view covers (a contiguous view: its element count). Two views that start at
    the same address but cover different elements get different keys. Tensors without real
    memory (meta, fake, empty, sparse) fall back to object identity: their addresses are
    all 0 or undefined and would wrongly look shared.
    """
    try:
        if tensor.layout != torch.strided or tensor.numel() == 0:
            return ("id", id(tensor))
        ptr = tensor.data_ptr()  # 0 on the meta device
        if not ptr:
            return ("id", id(tensor))
        if tensor.is_contiguous():
            return ("mem", ptr, tensor.numel(), tensor.dtype)
        dims = _canonical_dims(tensor)
        if len(dims) == 1 and dims[0][1] == 1:  # e.g. a transposed contiguous weight
            return ("mem", ptr, dims[0][0], tensor.dtype)
        return ("mem", ptr, dims, tensor.dtype)
    except Exception:  # fake/functional tensors and exotic subclasses have no storage
        return ("id", id(tensor))


def stored_numel(tensor: torch.Tensor) -> int:
    """Elements `tensor` really holds: a broadcast view (``expand``, stride 0) repeats its
    stored elements, and counts them once."""
    if tensor.layout != torch.strided or 0 not in tensor.stride():
        return tensor.numel()
    return math.prod(n for n, st in zip(tensor.shape, tensor.stride()) if st)


def compact(tensor: torch.Tensor) -> torch.Tensor:
    """The stored elements of a broadcast view (its stride-0 dimensions cut to size 1);
    other tensors as they are. Statistics of the two are the same, except for counts."""
    if tensor.layout != torch.strided or 0 not in tensor.stride():
        return tensor
    return tensor[tuple(slice(0, 1) if st == 0 else slice(None) for st in tensor.stride())]


LAZY = nn.parameter.UninitializedTensorMixin  # type: ignore[attr-defined]  # not in the stubs


# dtype -> (name, bytes an element): both fixed by the dtype, read from the first tensor of each
_DTYPES: dict[torch.dtype, tuple[str, int]] = {}


def _dtype_of(dtype: torch.dtype, tensor: torch.Tensor) -> tuple[str, int]:
    """The name and element size of `dtype`, the dtype of `tensor`."""
    known = _DTYPES.get(dtype)
    if known is None:
        known = _DTYPES[dtype] = (dtype_name(dtype), tensor.element_size())
    return known


def _tensor_row(
    name: str, module: str, kind: str, tensor: torch.Tensor, requires_grad: bool, spans: list[int]
) -> tuple:
    """The fields of `tensor`'s entry, in TensorEntry's order up to the tensor; a contiguous
    tensor with memory adds its byte span [start, end) to `spans` (see ``ModelSource.derived``).
    Each read of a tensor's attribute costs ~0.5k instructions: only those needed are read."""
    key: Hashable
    dtype = tensor.dtype
    device = "cpu" if tensor.is_cpu else _device_name(tensor.device)
    # lazy: no shape yet (nor an element size to ask for). The types' test first: isinstance
    # of a tensor that is not one looks up the tensor's __class__ (as costly as isinstance)
    kind_of = type(tensor)
    if kind_of is not _PARAMETER and kind_of is not _TENSOR and isinstance(tensor, LAZY):
        return name, module, kind, None, dtype_name(dtype), device, 0, 0, requires_grad, ("id", id(tensor)), tensor
    known = _dtype_of(dtype, tensor)
    # the element count from the shape: a call into torch less per tensor
    shape = tuple(tensor.shape)
    numel = math.prod(shape)
    nbytes = numel * known[1]
    key = None
    # storage_key of a contiguous tensor with memory (almost every one), from what is read.
    # No layout read: a tensor that is not strided is not contiguous (sparse COO), cannot say
    # (sparse compressed) or has no data pointer (mkldnn); storage_key decides those
    try:
        if numel and tensor.is_contiguous() and (ptr := tensor.data_ptr()):
            key = ("mem", ptr, numel, dtype)
            spans += (ptr, ptr + nbytes)
    except Exception:  # fake/functional tensors have no data pointer, sparse ones no contiguity
        pass
    if key is None:
        key = storage_key(tensor)
    return name, module, kind, shape, known[0], device, numel, nbytes, requires_grad, key, tensor


def _tensor_entry(
    name: str, module: str, kind: str, tensor: torch.Tensor, requires_grad: bool, spans: list[int]
) -> TensorEntry:
    return TensorEntry(*_tensor_row(name, module, kind, tensor, requires_grad, spans))


_PARAMETER, _TENSOR = nn.Parameter, torch.Tensor


def _packed(module: nn.Module, prefix: str, path: str) -> list[tuple]:
    """The weight and bias a quantized module keeps packed in a C++ object instead of
    parameters (``torch.ao`` Linear, Conv): counted as frozen parameters."""
    if not isinstance(module.__dict__.get("_packed_params"), torch.ScriptObject):
        return []
    try:
        weight, bias = module._weight_bias()  # type: ignore[operator]  # a method of torch.ao's packed modules
    except Exception:  # an unknown packing: nothing we can read
        return []
    out = []
    for local, t in (("weight", weight), ("bias", bias)):
        if isinstance(t, torch.Tensor):
            row = _tensor_row(prefix + local, path, PARAMETER, t, False, [])
            out.append((*row[:7], row[7] + quantization_bytes(t), *row[8:]))
    return out


def quantization_bytes(t: torch.Tensor) -> int:
    """Bytes a quantized tensor stores besides its elements: per-channel scales and zero
    points (a per-tensor scale is a number, not counted); 0 for other tensors."""
    if not t.is_quantized or t.qscheme() not in (torch.per_channel_affine, torch.per_channel_symmetric):
        return 0
    scales = t.q_per_channel_scales()
    return scales.numel() * (scales.element_size() + t.q_per_channel_zero_points().element_size())


def quantization(module: nn.Module) -> str | None:
    """How a quantized module stores its packed weight, e.g. 'qint8 per_tensor_affine (packed)'."""
    if not isinstance(module.__dict__.get("_packed_params"), torch.ScriptObject):
        return None
    try:
        weight = module._weight_bias()[0]  # type: ignore[operator]  # a method of torch.ao's packed modules
        return f"{dtype_name(weight.dtype)} {str(weight.qscheme()).removeprefix('torch.')} (packed)"
    except Exception:
        return "packed (unreadable)"


@dataclasses.dataclass
class ModelWalk:
    """What a trace needs of the model's tree (``trace.run_trace``), gathered by
    :func:`from_module`'s walk, so that ``nbinspect.trace`` walks the model once."""

    named_modules: list[tuple[str, nn.Module]]  # each module once, at its first path, pre-order
    tensors: list[torch.Tensor]  # their parameters and buffers (a tied one at each module holding it)
    paths: dict[int, str]  # id -> first path of each of those tensors


class _WalkOnRead:
    """from_module's ModelWalk, made from its columns when first read: a trace that follows
    reads it (the same work, then), ``inspect`` alone never does."""

    def __init__(self, *columns: Any) -> None:
        self._columns = columns

    @functools.cached_property
    def _walk(self) -> ModelWalk:
        return _model_walk(*self._columns)

    @property
    def named_modules(self) -> list[tuple[str, nn.Module]]:
        return self._walk.named_modules

    @property
    def tensors(self) -> list[torch.Tensor]:
        return self._walk.tensors

    @property
    def paths(self) -> dict[int, str]:
        return self._walk.paths


def from_module(model: nn.Module, name: str | None = None) -> ModelSource:
    """`model` as a source: every module path in pre-order (a module registered at two paths
    shows at both, so the tree is the tree the user wrote; alias_of says it is the same object)
    and every parameter and buffer path. The walk gathers each module's fields as a tuple and
    its tensors in lists; the tensors' fields are then read column by column (see
    :func:`_tensor_columns`). The source gets the columns: the structure frames read those,
    and entries are made only for what reads them (see ``core.source.Columns``)."""
    modules: list[tuple] = []  # ModuleEntry's fields but alias_of (see _WALKED)
    objects: list[nn.Module] = []  # the module of each path
    names: list[str] = []  # each parameter's and buffer's path, its module's path and tensor
    owners: list[str] = []
    held: list[torch.Tensor | None] = []
    buffers_at: list[tuple[int, int]] = []  # (first row, count) of each module's buffers
    packed: list[tuple[int, list[tuple]]] = []  # (where, rows) of packed weights
    # pre-order without recursion: (path, parent path, module, {id: path} of the ancestors)
    stack: list[tuple[str, str | None, nn.Module, dict[int, str]]] = [("", None, model, {})]
    while stack:
        path, parent, module, above = stack.pop()
        children = module._modules
        if children:
            _push(stack, path, module, above)
            if len(modules) + len(stack) >= MAX_MODULE_PATHS:  # paths found: these, this one, those to visit
                raise ValueError(
                    f"{type(model).__name__} has more than {MAX_MODULE_PATHS:,} module paths (shared modules)"
                )
        attrs = layer_attrs(module)
        # quantization() only where packed parameters may be: its call costs 5x this test
        scheme = quantization(module) if "_packed_params" in module.__dict__ else None
        if scheme is not None:
            attrs = {**attrs, "quantization": scheme}
        modules.append((path, type(module).__name__, not children, module.training, attrs, parent))
        objects.append(module)
        # each table extends the lists in C (None values are dropped after the walk); the two
        # written out, not a loop over them: fewer Python steps per module
        params, buffers = module._parameters, module._buffers
        if params:
            held += params.values()
            names += map(f"{path}.".__add__, params) if path else params
            owners += repeat(path, len(params))
        if buffers:
            buffers_at.append((len(held), len(buffers)))
            held += buffers.values()
            names += map(f"{path}.".__add__, buffers) if path else buffers
            owners += repeat(path, len(buffers))
        if scheme is not None:
            packed.append((len(held), _packed(module, f"{path}." if path else "", path)))
    kinds = [PARAMETER] * len(held)
    for start, count in buffers_at:
        kinds[start : start + count] = repeat(BUFFER, count)
    plain = not packed and all(map(is_not, held, repeat(None)))  # no packed weights, no tensor set to None
    found = _tensor_columns(names, owners, kinds, cast(list[torch.Tensor], held), bool(buffers_at)) if plain else None
    skip: set[int] = set()  # rows of packed weights: no tensor of the module's own
    if found is not None:
        tensor_columns, spans = found
    else:  # tensor by tensor, the packed weights' rows after their module's tensors
        rows: list[tuple] = []
        flat: list[int] = []
        for i in range(len(held) + 1):
            while packed and packed[0][0] == i:
                more = packed.pop(0)[1]
                skip.update(range(len(rows), len(rows) + len(more)))
                rows += more
            if i < len(held) and (t := held[i]) is not None:
                grad = kinds[i] == PARAMETER and t.requires_grad
                rows.append(_tensor_row(names[i], owners[i], kinds[i], t, grad, flat))
        tensor_columns = _columns(rows, _TENSOR_FIELDS)
        spans = (flat[0::2], flat[1::2]) if len(flat) == 2 * len(rows) else None
    module_columns = _module_columns(modules, objects)
    source = ModelSource(
        name=name or type(model).__name__,
        framework="torch",
        modules=Columns(ModuleEntry, module_columns),
        tensors=Columns(TensorEntry, tensor_columns),
        model=model,
        walk=_WalkOnRead(objects, module_columns, tensor_columns, skip),
    )
    if spans is not None:
        source.derived["spans"] = spans
    return source


# what the columns read of each tensor, by C calls (no Python line per tensor)
_READ_DTYPE, _READ_SHAPE, _READ_IS_CPU, _READ_GRAD = (
    attrgetter(name) for name in ("dtype", "shape", "is_cpu", "requires_grad")
)
_PLAIN_TYPES = frozenset({nn.Parameter, torch.Tensor})


def _tensor_columns(
    names: list[str], owners: list[str], kinds: list[str], tensors: list[torch.Tensor], buffers: bool
) -> tuple[dict[str, Sequence[Any]], tuple[list[int], list[int]] | None] | None:
    """The tensors' columns (TensorEntry's fields up to the tensor) and byte spans (their
    starts and ends; None unless every tensor has one), each field read for every tensor by
    one C loop: what `_tensor_row` gives each tensor, at half its cost. `buffers`: whether
    any kind is a buffer (a buffer's requires_grad is False). None where a tensor needs more
    care (a subclass, lazy, fake; an error while reading): `_tensor_row` then reads each tensor."""
    if not _PLAIN_TYPES.issuperset(map(type, tensors)):
        return None
    try:
        dtypes = list(map(_READ_DTYPE, tensors))
        shapes = list(map(tuple, map(_READ_SHAPE, tensors)))
        grads = list(map(_READ_GRAD, tensors))
        ptrs = list(map(torch.Tensor.data_ptr, tensors))
        contiguous = list(map(torch.Tensor.is_contiguous, tensors))
        devices: list[str] = (
            ["cpu"] * len(tensors)
            if all(map(_READ_IS_CPU, tensors))  # stops at the first tensor elsewhere
            else ["cpu" if t.is_cpu else _device_name(t.device) for t in tensors]
        )
    except Exception:  # e.g. a tensor without storage (sparse compressed, mkldnn)
        return None
    numels = list(map(math.prod, shapes))
    if dtypes.count(dtypes[0] if dtypes else None) == len(dtypes):  # one dtype (most models)
        name, size = _dtype_of(dtypes[0], tensors[0]) if tensors else ("", 0)
        dtype_names, nbytes = [name] * len(dtypes), list(map(size.__mul__, numels))
    else:
        for dtype in set(dtypes).difference(_DTYPES):
            _dtype_of(dtype, tensors[dtypes.index(dtype)])
        known = list(map(_DTYPES.__getitem__, dtypes))
        dtype_names, nbytes = list(map(itemgetter(0), known)), list(map(mul, numels, map(itemgetter(1), known)))
    spans = None
    if all(contiguous) and all(numels) and all(ptrs):  # every one contiguous with memory (almost every model)
        keys: list[Hashable] = list(zip(repeat("mem"), ptrs, numels, dtypes))
        spans = ptrs, list(map(add, ptrs, nbytes))
    else:  # as _tensor_row keys them; the spans prove nothing without every tensor's
        keys = [
            ("mem", ptr, n, dtype) if n and c and ptr else storage_key(t)
            for ptr, n, dtype, c, t in zip(ptrs, numels, dtypes, contiguous, tensors)
        ]
    columns: dict[str, Sequence[Any]] = {
        "name": names,
        "module": owners,
        "kind": kinds,
        "shape": shapes,
        "dtype": dtype_names,
        "device": devices,
        "numel": numels,
        "nbytes": nbytes,
        # a buffer's: False
        "requires_grad": list(map(and_, grads, map(is_, kinds, repeat(PARAMETER)))) if buffers else grads,
        "storage_key": keys,
        "tensor": tensors,
    }
    return columns, spans


_MODULE_FIELDS = tuple(f.name for f in dataclasses.fields(ModuleEntry))
_WALKED = tuple(name for name in _MODULE_FIELDS if name != "alias_of")  # what the walk's tuples hold
_ENTRY_FIELDS = [f.name for f in dataclasses.fields(TensorEntry)]
_TENSOR_FIELDS = tuple(_ENTRY_FIELDS[: _ENTRY_FIELDS.index("tensor") + 1])  # what a row holds


def _module_columns(modules: list[tuple], objects: list[nn.Module]) -> dict[str, Sequence[Any]]:
    """The walk's module tuples as ModuleEntry's columns, with alias_of: the first path of a
    module met before at another path (a dict of ids; most models have none)."""
    walked = _columns(modules, _WALKED)
    paths = walked["name"]
    first = dict(zip(map(id, reversed(objects)), reversed(paths)))  # reversed: the first path stays
    if len(first) == len(objects):
        aliases: Sequence[str | None] = (None,) * len(objects)
    else:
        aliases = tuple(None if at == path else at for at, path in zip(map(first.__getitem__, map(id, objects)), paths))
    return {name: aliases if name == "alias_of" else walked[name] for name in _MODULE_FIELDS}


def _columns(rows: list[tuple], fields: tuple[str, ...]) -> dict[str, Sequence[Any]]:
    """The rows' columns by field name, transposed in C."""
    return dict(zip(fields, zip(*rows))) if rows else dict.fromkeys(fields, ())


def _push(stack: list, path: str, module: nn.Module, above: dict[int, str]) -> None:
    """The children of `module` onto the walk's stack, the first on top. A module that contains
    itself, directly or through others, would make the tree infinite: refused, naming both paths."""
    above = {**above, id(module): path}
    children = []
    for local, child in module._modules.items():
        if child is None:
            continue
        child_path = f"{path}.{local}" if path else local
        if id(child) in above:
            where = f"{above[id(child)]!r}" if above[id(child)] else "the root module"
            raise ValueError(f"module cycle: {child_path!r} is {where} again (a module that contains itself)")
        children.append((child_path, path, child, above))
    stack.extend(reversed(children))


def _model_walk(
    objects: list[nn.Module], modules: dict[str, Sequence[Any]], tensors: dict[str, Sequence[Any]], packed: set[int]
) -> ModelWalk:
    """The trace's view of the walk, from its columns: each module at its first path, their
    parameters and buffers (not the `packed` rows), and each tensor's first path."""
    names, held, paths = modules["name"], tensors["tensor"], tensors["name"]
    if packed or any(map(is_not, modules["alias_of"], repeat(None))):  # a module at two paths: its first only
        first = {name for name, alias in zip(names, modules["alias_of"]) if alias is None}
        named = [(name, m) for name, m in zip(names, objects) if name in first]
        own = [i for i, owner in enumerate(tensors["module"]) if owner in first and i not in packed]
        held, paths = [held[i] for i in own], [paths[i] for i in own]
    else:
        named, held = list(zip(names, objects)), list(held)
    # reversed: a tensor held at several paths keeps its first
    return ModelWalk(named, held, dict(zip(map(id, reversed(held)), reversed(paths))))


def read_region(entry: TensorEntry, index: tuple[slice | int, ...]) -> np.ndarray:
    """The values of `entry` at `index` as float64 (complex: magnitudes). File tensors are
    memory-mapped views: only the pages of the region are read."""
    if entry.device == "meta":
        raise ValueError(f"{entry.name} is on the meta device: it has no values")
    try:
        with torch.no_grad():
            region = entry.values()[index]
            if region.is_quantized:
                region = region.dequantize()
            if region.is_complex():
                region = region.abs()
            return region.to("cpu", torch.float64).numpy()
    finally:
        entry.release()
