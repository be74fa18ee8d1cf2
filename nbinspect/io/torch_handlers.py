"""The handlers a torch pickle's globals map to, so that no code from the file ever runs.

``data.pkl`` goes through the one restricted unpickler (``unpickle.py``) with the exact
globals below, each mapped to data or to a handler that checks its arguments: a tensor
becomes a meta tensor (shape, strides, dtype, no memory) plus a :class:`Record` of where its
bytes are in the file, proven to lie inside its storage. Legacy tensor constructors
(``torch.FloatTensor(4096)``, uninitialised memory), wrapper subclasses and anything else
are refused (see docs/security.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..core.limits import MAX_DIMS, MAX_TENSOR_ELEMENTS
from .files import FileHandle
from .torch_records import NoValues, Record, Storage
from .unpickle import Handler, StateDict

__all__ = ["TorchFile", "tensor_table"]

_MAX_NUMEL = MAX_TENSOR_ELEMENTS


# --- checks --------------------------------------------------------------------------------


def _int(x: Any, what: str) -> int:
    if type(x) is not int or not 0 <= x < 2**63:
        raise ValueError(f"{what} {x!r:.40} is not a non-negative 64-bit integer")
    return x


def _dims(size: Any, what: str = "size") -> tuple[int, ...]:
    if not isinstance(size, tuple | list) or len(size) > MAX_DIMS:
        raise ValueError(f"{what} is not a tuple of at most {MAX_DIMS} integers")
    return tuple(_int(d, what) for d in size)


def _shape_stride(size: Any, stride: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape, strides = _dims(size), _dims(stride, "stride")
    if len(shape) != len(strides):
        raise ValueError("size and stride differ in length")
    if math.prod(shape) > _MAX_NUMEL:
        raise ValueError(f"a shape of {math.prod(shape):.3g} elements, over the limit of 2**50")
    return shape, strides


def _plain(state: Any, depth: int = 0) -> bool:
    if depth > 16:
        return False
    if isinstance(state, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in state.items())
    if isinstance(state, list | tuple):
        return all(_plain(v, depth + 1) for v in state)
    return state is None or isinstance(state, bool | int | float | str | bytes)


class TorchFile:
    """The handlers of one file, and the records of the tensors its pickle built."""

    def __init__(self, handle: FileHandle, storages: dict[str, tuple[int, int]], where: str):
        self.handle = handle
        self.where = where
        self.storages = storages  # key -> (offset in file, nbytes)
        self.records: dict[int, tuple[torch.Tensor, Record | NoValues]] = {}
        self.opened: dict[str, Storage] = {}

    # persistent ids: ('storage', storage type, key, location, numel[, view metadata])
    def persistent_load(self, pid: Any) -> Storage:
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise ValueError("a persistent id that is not a storage")
        kind, key, location, numel = pid[1:5]
        if len(pid) == 6 and pid[5] is not None:
            raise ValueError("a legacy storage view, not supported")
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not isinstance(location, str):
            raise ValueError("a malformed storage id")
        numel = _int(numel, "storage size")
        if key not in self.storages:
            raise ValueError(f"storage {key[:30]!r} is not in the file")
        offset, nbytes = self.storages[key]
        if numel * kind.dtype.itemsize != nbytes and not (kind.dtype == torch.uint8 and numel == nbytes):
            raise ValueError(f"storage {key[:30]!r} claims {numel:,} elements, the file holds {nbytes:,} bytes")
        found = self.opened.get(key)
        if found is None:
            found = self.opened[key] = Storage(self.handle, key, offset, nbytes, kind.dtype)
        return found

    def _tensor(self, storage: Any, offset: Any, size: Any, stride: Any, dtype: torch.dtype | None = None) -> Any:
        if not isinstance(storage, Storage):
            raise ValueError("a tensor without a storage")
        dtype = dtype or storage.dtype
        if not isinstance(dtype, torch.dtype):
            raise ValueError("a tensor without a dtype")
        quantized = dtype in _QUANTIZED
        if quantized and _QUANTIZED[dtype] is None:
            raise ValueError(f"{dtype} tensors are not supported")
        dtype = _QUANTIZED.get(dtype) or dtype  # quantized: the integers, scales come from _rebuild_qtensor
        shape, strides = _shape_stride(size, stride)
        record = Record(storage, _int(offset, "storage offset"), shape, strides, dtype)
        if (record.offset + record.extent()) * dtype.itemsize > storage.nbytes and record.extent() > 0:
            raise ValueError(
                f"a tensor {list(shape)} at offset {record.offset:,} reaches past its storage "
                f"of {storage.nbytes:,} bytes"
            )
        if math.prod(shape) == 1 and not quantized:  # a scalar (a step counter): read now, 1 element
            return record.values()
        return self._register(torch.empty_strided(shape, strides, dtype=dtype, device="meta"), record)

    def _register(self, tensor: torch.Tensor, record: Record | NoValues) -> torch.Tensor:
        self.records[id(tensor)] = (tensor, record)
        return tensor

    def rebuild_v2(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None):
        _no_hooks(hooks)
        return self._tensor(storage, offset, size, stride)

    def rebuild_v3(self, storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
        _no_hooks(hooks)
        if not isinstance(dtype, torch.dtype):
            raise ValueError("a tensor without a dtype")
        return self._tensor(storage, offset, size, stride, dtype)

    def rebuild_legacy(self, storage, offset, size, stride):
        return self._tensor(storage, offset, size, stride)

    def parameter(self, data, requires_grad=True, hooks=None, state=None):
        _no_hooks(hooks)
        if not isinstance(data, torch.Tensor) or (data.is_meta and id(data) not in self.records):
            raise ValueError("a Parameter of something that is not a tensor")  # tensors come only from handlers
        if state is not None and not _plain(state):
            raise ValueError("a Parameter with state that is not plain data")
        return data

    def meta(self, dtype, size, stride, requires_grad=False):
        if not isinstance(dtype, torch.dtype):
            raise ValueError("a meta tensor without a dtype")
        shape, strides = _shape_stride(size, stride)
        return self._register(torch.empty_strided(shape, strides, dtype=dtype, device="meta"), NoValues("meta"))

    def no_values(self, kind: str, size: Any, dtype: Any) -> torch.Tensor:
        shape, _ = _shape_stride(size, [0] * len(size) if isinstance(size, tuple | list) else size)
        dtype = dtype if isinstance(dtype, torch.dtype) else torch.float32
        return self._register(torch.empty(shape, dtype=dtype, device="meta"), NoValues(kind))

    def sparse(self, layout, data):
        """A sparse COO tensor: its indices and values are read now (they are in the file, so
        bounded by it) and checked by torch's invariants; other sparse layouts are listed."""
        if not isinstance(data, tuple) or len(data) < 3:
            raise ValueError("a sparse tensor without indices, values and size")
        indices, values, size = data[0], data[1], data[2]
        dtype = values.dtype if isinstance(values, torch.Tensor) else None
        if layout != "torch.sparse_coo":
            return self.no_values(f"sparse ({layout})", size, dtype)
        shape, _ = _shape_stride(size, [0] * len(size) if isinstance(size, tuple | list) else size)
        i, v = self._read(indices), self._read(values)
        if i.dtype != torch.int64 or i.dim() != 2 or i.shape[0] != len(shape) or v.shape[0] != i.shape[1]:
            raise ValueError("a sparse tensor whose indices do not match its values and size")
        try:
            return torch.sparse_coo_tensor(i, v, shape, check_invariants=True)
        except RuntimeError as exc:
            raise ValueError(f"a sparse tensor torch refuses ({str(exc).splitlines()[0][:120]})") from None

    def _read(self, tensor: Any) -> torch.Tensor:
        if isinstance(tensor, torch.Tensor) and not tensor.is_meta:
            return tensor  # one element, already read
        return self.values_of(tensor).contiguous()

    def nested(self, buffer, sizes, strides, offsets):
        dtype = buffer.dtype if isinstance(buffer, torch.Tensor) else None
        n = _dims(sizes.shape if isinstance(sizes, torch.Tensor) else (), "sizes")
        return self.no_values("nested", (n[0],) if n else (0,), dtype)

    def qtensor(self, storage, offset, size, stride, qparams, requires_grad=False, hooks=None):
        """A quantized tensor: read now (its scales and zero points are part of the tensor)."""
        _no_hooks(hooks)
        base = self._tensor(storage, offset, size, stride)
        if not isinstance(qparams, tuple) or not qparams or not isinstance(qparams[0], _QScheme):
            raise ValueError("malformed quantizer parameters")
        values = self.values_of(base)
        scheme = qparams[0].name
        if scheme in ("per_tensor_affine", "per_tensor_symmetric") and len(qparams) == 3:
            scale, zero = qparams[1], qparams[2]
            if not isinstance(scale, float) or type(zero) is not int:
                raise ValueError("malformed quantizer parameters")
            q = torch._make_per_tensor_quantized_tensor(values, scale, zero)
        elif (
            scheme in ("per_channel_affine", "per_channel_symmetric", "per_channel_affine_float_qparams")
            and len(qparams) == 4
        ):
            scales, zeros, axis = self.values_of(qparams[1]), self.values_of(qparams[2]), _int(qparams[3], "axis")
            if axis >= max(values.dim(), 1) or scales.numel() != values.shape[axis] or zeros.numel() != scales.numel():
                raise ValueError("per-channel scales do not match the tensor")
            q = torch._make_per_channel_quantized_tensor(values, scales, zeros, axis)
        else:
            raise ValueError(f"quantization scheme {scheme!r} not supported")
        return q

    def values_of(self, tensor: Any) -> torch.Tensor:
        entry = self.records.get(id(tensor)) if isinstance(tensor, torch.Tensor) else None
        if entry is None or not isinstance(entry[1], Record):
            raise ValueError("expected a stored tensor")
        return entry[1].values()

    def from_type(self, func, new_type, args, state):
        if not isinstance(func, Handler) or func.reduce is None or not isinstance(args, tuple):
            raise ValueError("_rebuild_from_type_v2 of something that is not a tensor rebuild")
        if new_type not in (_TENSOR, _PARAMETER):
            raise ValueError("a tensor subclass, which would need its code (pass trust=True)")
        if state is not None and not _plain(state):
            raise ValueError("tensor attributes that are not plain data")
        return func.reduce(*args)

    def device_from_cpu(self, data, dtype, device, requires_grad=False):
        if not isinstance(data, torch.Tensor) or (data.is_meta and id(data) not in self.records):
            raise ValueError("a device tensor without CPU data")
        return data


_QUANTIZED: dict[torch.dtype, torch.dtype | None] = {
    torch.qint8: torch.int8,
    torch.quint8: torch.uint8,
    torch.qint32: torch.int32,
    torch.quint4x2: None,
    torch.quint2x4: None,
}


class _StorageType:
    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype


class _QScheme:
    def __init__(self, name: str):
        self.name = name


class _Marker:
    def __init__(self, name: str):
        self.name = name


_TENSOR, _PARAMETER = _Marker("torch.Tensor"), _Marker("torch.nn.parameter.Parameter")


def _no_hooks(hooks: Any) -> None:
    if hooks is not None and not (isinstance(hooks, dict) and not hooks):
        raise ValueError("backward hooks in a file, which would be code")


def _bytearray(data: Any = b"") -> bytearray:
    if not isinstance(data, bytes):  # bytearray(10**9) would allocate from a claim
        raise ValueError("bytearray of something other than bytes")
    return bytearray(data)


def _encode(text: Any, encoding: Any = "latin1") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ValueError("_codecs.encode other than a latin1 string")
    return text.encode("latin-1")


def _set(items: Any = ()) -> set:
    if not isinstance(items, list | tuple):
        raise ValueError("set of something other than a list")
    return {i for i in items if hash(i) is not None}


def _complex(real: Any = 0.0, imag: Any = 0.0) -> complex:
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (real, imag)):
        raise ValueError("complex of something other than two numbers")
    return complex(real, imag)


def _size(dims: Any = ()) -> tuple[int, ...]:
    return _dims(dims)


def _device(kind: Any, index: Any = None) -> str:
    if not isinstance(kind, str) or len(kind) > 64 or not (index is None or type(index) is int):
        raise ValueError("a malformed device")
    return kind if index is None else f"{kind}:{index}"


def _layout(name: Any) -> str:
    if not isinstance(name, str) or len(name) > 64:
        raise ValueError("a malformed layout")
    return name


def _ordered_dict(items: Any = None) -> StateDict:
    out = StateDict()
    if items is not None:
        if not isinstance(items, list):
            raise ValueError("OrderedDict of something other than a list of pairs")
        for pair in items:
            if not (isinstance(pair, tuple | list) and len(pair) == 2):
                raise ValueError("OrderedDict of something other than a list of pairs")
            out[pair[0]] = pair[1]
    return out


_STORAGE_DTYPES = {
    "Float": torch.float32, "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16,
    "Long": torch.int64, "Int": torch.int32, "Short": torch.int16, "Char": torch.int8, "Byte": torch.uint8,
    "Bool": torch.bool, "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128,
    "QInt8": torch.qint8, "QUInt8": torch.quint8, "QInt32": torch.qint32, "QUInt4x2": torch.quint4x2,
    "QUInt2x4": torch.quint2x4,
}  # fmt: skip
_QSCHEMES = (
    "per_tensor_affine",
    "per_tensor_symmetric",
    "per_channel_affine",
    "per_channel_symmetric",
    "per_channel_affine_float_qparams",
)


def _data_table() -> dict[tuple[str, str], Any]:
    """The globals that are data, the same for every file: dtypes, storage types, qschemes,
    and the plain-data callables."""
    table: dict[tuple[str, str], Any] = {}
    for name in dir(torch):
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            table[("torch", name)] = value
    for name, dtype in _STORAGE_DTYPES.items():
        table[("torch", f"{name}Storage")] = _StorageType(dtype)
        table[("torch.cuda", f"{name}Storage")] = _StorageType(dtype)
    table[("torch", "UntypedStorage")] = _StorageType(torch.uint8)
    table[("torch.storage", "UntypedStorage")] = _StorageType(torch.uint8)
    for scheme in _QSCHEMES:
        table[("torch", scheme)] = _QScheme(scheme)
    table[("torch", "Tensor")] = _TENSOR
    table[("torch._tensor", "Tensor")] = _TENSOR
    table.update(
        {
            ("collections", "OrderedDict"): Handler("OrderedDict", reduce=_ordered_dict, newobj=_ordered_dict),
            ("builtins", "set"): Handler("set", reduce=_set),
            ("builtins", "complex"): Handler("complex", reduce=_complex),
            ("builtins", "bytearray"): Handler("bytearray", reduce=_bytearray),
            ("_codecs", "encode"): Handler("_codecs.encode", reduce=_encode),
            ("torch", "Size"): Handler("torch.Size", reduce=_size),
            ("torch", "device"): Handler("torch.device", reduce=_device),
            ("torch.serialization", "_get_layout"): Handler("_get_layout", reduce=_layout),
        }
    )
    return table


_DATA = _data_table()


def tensor_table(ctx: TorchFile) -> dict[tuple[str, str], Any]:
    """The exact globals a torch file may name, bound to `ctx` (see docs/security.md)."""
    u = "torch._utils"
    table = dict(_DATA)
    table.update(
        {
            (u, "_rebuild_tensor_v2"): Handler("_rebuild_tensor_v2", reduce=ctx.rebuild_v2),
            (u, "_rebuild_tensor_v3"): Handler("_rebuild_tensor_v3", reduce=ctx.rebuild_v3),
            (u, "_rebuild_tensor"): Handler("_rebuild_tensor", reduce=ctx.rebuild_legacy),
            (u, "_rebuild_parameter"): Handler("_rebuild_parameter", reduce=ctx.parameter),
            (u, "_rebuild_parameter_with_state"): Handler("_rebuild_parameter_with_state", reduce=ctx.parameter),
            (u, "_rebuild_qtensor"): Handler("_rebuild_qtensor", reduce=ctx.qtensor),
            (u, "_rebuild_meta_tensor_no_storage"): Handler("_rebuild_meta_tensor_no_storage", reduce=ctx.meta),
            (u, "_rebuild_sparse_tensor"): Handler("_rebuild_sparse_tensor", reduce=ctx.sparse),
            (u, "_rebuild_nested_tensor"): Handler("_rebuild_nested_tensor", reduce=ctx.nested),
            (u, "_rebuild_device_tensor_from_cpu_tensor"): Handler("_rebuild_device", reduce=ctx.device_from_cpu),
            ("torch._tensor", "_rebuild_from_type_v2"): Handler("_rebuild_from_type_v2", reduce=ctx.from_type),
            ("torch.nn.parameter", "Parameter"): Handler("Parameter", newobj=ctx.parameter, reduce=ctx.parameter),
        }
    )
    return table
