"""A folder written by ``torch.distributed.checkpoint`` (DCP) as a source, read without DCP.

DCP writes a ``.metadata`` pickle (every entry's global shape, dtype and where its chunks
live) and ``*.distcp`` files holding each chunk as a ``torch.save`` zip at a byte range.
``.metadata`` goes through the restricted unpickler with the exact classes DCP writes there
(its metadata dataclasses, ``torch.Size``, dtypes, paths), each turned into a plain record,
never into the real class; chunk file names (``relative_path``) are resolved inside the
folder (``files.Root``), byte ranges checked against the file, each chunk parsed by the
torch-file reader, and the chunks must exactly tile the tensor before it is allocated.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..core.limits import (
    MAX_CHUNKS_PER_TENSOR,
    MAX_PICKLE_BYTES,
    MAX_TENSOR_ELEMENTS,
    MAX_TENSORS,
    check_tensor_name,
    shown,
)
from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError, UnsafeCheckpointError
from .files import BytesHandle, FileHandle, Root
from .torch_file import read_torch
from .torch_handlers import _DATA
from .torch_records import Record
from .unpickle import Handler, unpickle

__all__ = ["METADATA_FILE", "read_dcp"]

METADATA_FILE = ".metadata"
_M = "torch.distributed.checkpoint.metadata"
_OLD = "torch.distributed._shard.sharded_tensor.metadata"


class _Obj:
    """A DCP metadata object as plain fields (BUILD state)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.state: Any = None


def _new(kind: str) -> Handler:
    return Handler(kind, newobj=lambda *args: _Obj(kind), reduce=lambda *args: _Obj(kind))


def _build(obj: Any, state: Any) -> bool:
    if not isinstance(obj, _Obj) or obj.state is not None:
        return False
    if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict) and state[0] is None:
        state = state[1]  # (None, slots)
    obj.state = state
    return True


def _path(*parts: Any) -> str:
    if not all(isinstance(p, str) for p in parts):
        raise ValueError("a path of something other than strings")
    return "/".join(parts)


def _table() -> dict[tuple[str, str], Any]:
    table = {k: v for k, v in _DATA.items() if k[0] in ("torch", "collections", "torch.serialization")}
    for module in (_M, _OLD):
        for kind in (
            "Metadata",
            "TensorStorageMetadata",
            "BytesStorageMetadata",
            "ChunkStorageMetadata",
            "TensorProperties",
            "MetadataIndex",
            "StorageMeta",
        ):
            table[(module, kind)] = _new(kind)
        for enum in ("_MEM_FORMAT_ENCODING", "MEM_FORMAT_ENCODING"):
            table[(module, enum)] = Handler(enum, reduce=lambda v: v if type(v) is int else _bad("enum"))
    table[("torch.distributed.checkpoint.filesystem", "_StorageInfo")] = _new("_StorageInfo")
    for name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"):
        table[("pathlib", name)] = Handler(name, reduce=_path)
    return table


def _bad(what: str) -> Any:
    raise ValueError(f"malformed {what}")


_TABLE = _table()


def _field(obj: Any, kind: str, name: str, index: int | None = None) -> Any:
    if not isinstance(obj, _Obj) or obj.kind != kind:
        raise ValueError(f"expected {kind}")
    state = obj.state
    if isinstance(state, dict):
        return state.get(name)
    if isinstance(state, tuple) and index is not None and index < len(state):
        return state[index]
    raise ValueError(f"{kind} without {name}")


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list) or len(value) > 64:
        raise ValueError(f"{what} is not a shape")
    if not all(type(v) is int and 0 <= v < 2**62 for v in value):
        raise ValueError(f"{what} is not a shape")
    return tuple(value)


def _metadata(root: Root, trust: bool) -> tuple[Any, str]:
    where = f"{shown(root.folder)}/{METADATA_FILE}"
    handle = root.open(METADATA_FILE, shown(root.folder))
    if handle.size > MAX_PICKLE_BYTES:
        raise CheckpointError(f"{where}: {handle.size:,} bytes, over the limit of {MAX_PICKLE_BYTES:,}")
    data = handle.pread(0, handle.size)
    try:
        return unpickle(data, where, _TABLE, build=_build), where
    except UnsafeCheckpointError as exc:
        if not trust:
            raise
        # trusted, but DCP writes only the classes above: anything else is not DCP metadata
        raise CheckpointError(f"{where}: not DCP metadata ({str(exc).split('the file ', 1)[-1][:120]})") from None


class _Read:
    """A chunk whose values are already in memory (one element), read like a Record."""

    def __init__(self, tensor: torch.Tensor):
        self.tensor, self.shape, self.dtype = tensor, tuple(tensor.shape), tensor.dtype

    def values(self) -> torch.Tensor:
        return self.tensor


class _Chunks:
    """The chunks of one tensor: where each lives, checked to tile the global shape."""

    def __init__(self, root: Root, where: str, fqn: str, shape: tuple[int, ...], dtype: torch.dtype, chunks: list):
        self.root, self.where, self.fqn, self.shape, self.dtype, self.chunks = root, where, fqn, shape, dtype, chunks

    def load(self) -> torch.Tensor:
        name = f"{self.where}: tensor {shown(self.fqn)!r}"
        pieces = []
        total = 0
        handles: dict[str, FileHandle] = {}
        for offsets, sizes, path, begin, length in self.chunks:
            if len(offsets) != len(self.shape) or len(sizes) != len(self.shape):
                raise CheckpointError(f"{name}: a chunk of another rank")
            if any(o + s > n for o, s, n in zip(offsets, sizes, self.shape)):
                raise CheckpointError(f"{name}: a chunk lies outside the tensor")
            handle = handles.get(path) or handles.setdefault(path, self.root.open(path, name))
            if begin + length > handle.size:
                raise CheckpointError(f"{name}: chunk bytes {begin:,}+{length:,} lie outside {shown(path)}")
            obj, ctx = read_torch(
                BytesHandle(handle.pread(begin, length), handle.path, f"{name}: chunk in {shown(path)}")
            )
            entry = ctx.records.get(id(obj)) if isinstance(obj, torch.Tensor) else None
            if entry is None and isinstance(obj, torch.Tensor) and not obj.is_meta and obj.numel() == 1:
                record: Any = _Read(obj)  # a one-element chunk, already read by the torch-file reader
            elif entry is None or not isinstance(entry[1], Record):
                raise CheckpointError(f"{name}: a chunk that is not one stored tensor")
            else:
                record = entry[1]
            if record.shape != tuple(sizes) or record.dtype != self.dtype:
                raise CheckpointError(f"{name}: a chunk's shape or dtype differs from the metadata")
            pieces.append((offsets, sizes, record))
            total += math.prod(sizes)
        if total != math.prod(self.shape):
            raise CheckpointError(f"{name}: the chunks do not cover the tensor")
        out = torch.empty(self.shape, dtype=self.dtype)  # proven: the file holds this many elements
        seen = torch.zeros(self.shape, dtype=torch.bool)
        for offsets, sizes, record in pieces:
            index = tuple(slice(o, o + s) for o, s in zip(offsets, sizes))
            if bool(seen[index].any()):
                raise CheckpointError(f"{name}: chunks overlap")
            seen[index] = True
            out[index] = record.values()
        return out


def read_dcp(root: Root, trust: bool = False) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The tensors of a DCP folder (values loaded on demand) and what else it holds."""
    metadata, where = _metadata(root, trust)
    try:
        entries = _field(metadata, "Metadata", "state_dict_metadata")
        storage = _field(metadata, "Metadata", "storage_data") or {}
        if not isinstance(entries, dict) or not isinstance(storage, dict):
            raise ValueError("no state_dict_metadata")
        if len(entries) > MAX_TENSORS:
            raise ValueError(f"{len(entries):,} entries, over the limit of {MAX_TENSORS:,}")
        located: dict[tuple[str, tuple[int, ...]], tuple[str, int, int]] = {}
        for index, info in storage.items():
            fqn = _field(index, "MetadataIndex", "fqn")
            offset = _ints(_field(index, "MetadataIndex", "offset") or (), "offset")
            path = _field(info, "_StorageInfo", "relative_path")
            begin, length = _field(info, "_StorageInfo", "offset"), _field(info, "_StorageInfo", "length")
            if _field(info, "_StorageInfo", "transform_descriptors"):
                continue  # compressed chunks: listed, not read
            if not isinstance(fqn, str) or type(begin) is not int or type(length) is not int or begin < 0 or length < 0:
                raise ValueError("malformed storage entry")
            root.resolve(path, where)  # the name rules and the folder: refused here, before any read
            located[(fqn, offset)] = (path, begin, length)
        stored, other = [], []
        for fqn, md in entries.items():
            check_tensor_name(fqn, where)
            if not isinstance(md, _Obj) or md.kind != "TensorStorageMetadata":
                other.append(fqn)  # pickled objects (step counters, configs): not read
                continue
            shape = _ints(_field(md, "TensorStorageMetadata", "size"), "size")
            if math.prod(shape) > MAX_TENSOR_ELEMENTS:
                raise ValueError(f"entry {shown(fqn)!r} claims {math.prod(shape):.3g} elements, over 2**50")
            props = _field(md, "TensorStorageMetadata", "properties")
            dtype = _field(props, "TensorProperties", "dtype", 0)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"entry {shown(fqn)!r} has no dtype")
            chunks = _field(md, "TensorStorageMetadata", "chunks")
            if not isinstance(chunks, list) or len(chunks) > MAX_CHUNKS_PER_TENSOR:
                raise ValueError(f"entry {shown(fqn)!r}: chunks missing or over {MAX_CHUNKS_PER_TENSOR:,}")
            plan = []
            for chunk in chunks:
                offsets = _ints(_field(chunk, "ChunkStorageMetadata", "offsets"), "offsets")
                sizes = _ints(_field(chunk, "ChunkStorageMetadata", "sizes"), "sizes")
                if (fqn, offsets) not in located:
                    raise ValueError(f"entry {shown(fqn)!r}: a chunk without storage")
                plan.append((offsets, sizes, *located[(fqn, offsets)]))
            stored.append(
                StoredTensor(
                    name=fqn,
                    shape=shape,
                    dtype=dtype_name(dtype),
                    nbytes=math.prod(shape) * dtype.itemsize,
                    storage_key=("dcp", str(root.real), fqn),
                    tensor=_Chunks(root, where, fqn, shape, dtype, plan).load,
                )
            )
    except CheckpointError:
        raise
    except (ValueError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{where}: not DCP metadata ({shown(str(exc), 160)})") from None
    files = sorted(n for n in _names(root) if n.endswith(".distcp"))
    meta: dict[str, Any] = {"format": f"torch.distributed.checkpoint ({len(files)} .distcp files)"}
    if other:
        shown_other = [shown(o, 80) for o in other[:20]]
        meta["non-tensor entries"] = ", ".join(shown_other) + (f" (+{len(other) - 20} more)" if len(other) > 20 else "")
    if not stored:
        raise CheckpointError(f"{shown(root.folder)}: the DCP checkpoint holds no tensors")
    return stored, meta


def _names(root: Root) -> list[str]:
    import os

    try:
        return os.listdir(root.real)
    except OSError:
        return []
