"""``.safetensors`` files.

The header (8-byte length, then JSON: name -> dtype, shape, byte range) is all a listing
needs, so names, shapes and sizes of a file of any size come without reading its data. The
header is parsed within the limits of ``io/text.py`` (digits, depth, duplicate names); values
are read with ``pread`` one tensor at a time when asked for (``files.FileHandle``).
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import torch

from ..core.limits import MAX_DIMS, MAX_HEADER_BYTES, MAX_TENSORS, check_tensor_name, shown
from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError, first_line
from .files import FileHandle, value_buffer
from .mapping import Window, window
from .text import parse_json

__all__ = ["DTYPES", "FileTensor", "read_safetensors"]

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U64": torch.uint64, "U32": torch.uint32, "U16": torch.uint16, "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip


class FileTensor:
    """The loader of one tensor's values in a file, read with ``pread`` when asked for (a
    file truncated by another process is a one-line error, never SIGBUS). Called, it reads
    the whole tensor; :meth:`read_into` reads part of its bytes into a buffer, so a
    streaming reader (the statistics) can go through it a piece at a time without holding
    it all, or :meth:`span` gives a kernel the place to read from itself, through
    :meth:`window` (a guarded mapping) or ``pread``."""

    __slots__ = ("dtype", "handle", "nbytes", "offset", "shape")

    def __init__(self, handle: FileHandle, offset: int, nbytes: int, shape: tuple[int, ...], dtype: torch.dtype):
        self.handle = handle
        self.offset = offset  # of the first byte in the file
        self.nbytes = nbytes
        self.shape = shape
        self.dtype = dtype

    def __call__(self) -> torch.Tensor:
        if not self.nbytes:
            return torch.empty(self.shape, dtype=self.dtype)
        raw = value_buffer(self.nbytes)
        self.handle.readinto(self.offset, raw.numpy().data)
        return raw.view(self.dtype).view(self.shape)

    def read_into(self, start: int, buffer: Any) -> None:
        """Fill `buffer` (a writable buffer of bytes) with the tensor's bytes from `start` on."""
        n = memoryview(buffer).nbytes
        if start < 0 or start + n > self.nbytes:
            raise CheckpointError(f"{self.handle.where}: bytes {start:,}+{n:,} lie outside the tensor")
        self.handle.readinto(self.offset + start, memoryview(buffer))

    def span(self, nbytes: int) -> tuple[int, int]:
        """(file descriptor, offset of the first byte) for a reader that calls ``pread`` itself
        (the statistics kernel) over `nbytes` from there, which must lie inside the tensor; it
        repeats a read that stops early with :meth:`read_into` (which says why) and calls
        :meth:`verify` after."""
        if not 0 <= nbytes <= self.nbytes:
            raise CheckpointError(f"{self.handle.where}: {nbytes:,} bytes lie outside the tensor")
        self.handle.check()
        return self.handle.fd, self.offset

    def verify(self) -> None:
        """Raise a one-line error if the file changed since it was opened."""
        self.handle.check()

    def window(self) -> Window | None:
        """A guarded read-only mapping of the file (:mod:`.mapping`) for a reader that goes
        through the bytes :meth:`span` gave it, or None where mappings are not guarded."""
        return window(self.handle.fd, self.handle.where, self.handle.check)

    @property
    def where(self) -> str:
        return self.handle.where

    def rows(self, i0: int, i1: int) -> torch.Tensor:
        """Rows [i0, i1) along the first axis: only their bytes are read."""
        row = math.prod(self.shape[1:]) * self.dtype.itemsize
        part = FileTensor(self.handle, self.offset + i0 * row, (i1 - i0) * row, (i1 - i0, *self.shape[1:]), self.dtype)
        return part()


def _header(handle: FileHandle) -> tuple[dict[str, Any], int, int]:
    """(header dict, data start offset, data length)."""
    where = handle.where
    size = handle.size
    if size == 0:
        raise CheckpointError(f"{where}: empty file")
    if size < 8:
        raise CheckpointError(f"{where}: not a safetensors file (only {size} bytes)")
    (length,) = struct.unpack("<Q", handle.pread(0, 8))
    if length > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{where}: safetensors header of {length:,} bytes is over the limit of {MAX_HEADER_BYTES:,}"
        )
    if length > size - 8:
        raise CheckpointError(f"{where}: truncated safetensors file (header of {length:,} bytes, file {size:,})")
    header = parse_json(handle.pread(8, length), where, "safetensors header")
    if not isinstance(header, dict):
        raise CheckpointError(f"{where}: corrupt safetensors header (not a JSON object)")
    count = len(header) - ("__metadata__" in header)
    if count > MAX_TENSORS:
        raise CheckpointError(f"{where}: header lists {count:,} tensors, over the limit of {MAX_TENSORS:,}")
    return header, 8 + length, size - 8 - length


def _dims(shape: Any) -> tuple[int, ...]:
    # bool is an int in Python, and a float like 2.0 would pass int(): neither is a dimension
    if (
        not isinstance(shape, list)
        or len(shape) > MAX_DIMS
        or not all(type(d) is int and 0 <= d < 2**63 for d in shape)
    ):
        raise ValueError(f"shape {shape!r} is not a list of non-negative integers")
    return tuple(shape)


def _entry(path: Path, name: str, info: Any, data_len: int) -> tuple[torch.dtype, tuple[int, ...], int, int]:
    def bad(what: str) -> CheckpointError:  # built only on failure: a header may list a million entries
        return CheckpointError(f"{shown(path)}: tensor {shown(name)!r}: {what}")

    check_tensor_name(name, shown(path))

    try:
        if not isinstance(info, dict):
            raise ValueError("not a JSON object")
        dtype = DTYPES[info["dtype"]]
        shape = _dims(info["shape"])
        offsets = info["data_offsets"]
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(x) is int for x in offsets)):
            raise ValueError(f"data_offsets {offsets!r} are not two integers")
        begin, end = offsets
    except (KeyError, TypeError, ValueError) as exc:
        raise bad(f"bad header entry ({type(exc).__name__}: {first_line(exc)})") from None
    if end - begin != math.prod(shape) * dtype.itemsize or begin < 0:
        raise bad(f"byte range {begin}..{end} does not hold {list(shape)} {shown(str(info['dtype']), 20)}")
    if begin % dtype.itemsize:
        raise bad(f"data offset {begin} is not aligned to its {dtype.itemsize}-byte elements")
    if end > data_len:
        raise CheckpointError(
            f"{shown(path)}: truncated: tensor {shown(name)!r} ends at byte {end:,} of the data, "
            f"file holds {data_len:,}"
        )
    return dtype, shape, begin, end


def _check_no_overlap(path: Path, ranges: list[tuple[int, int, str]]) -> None:
    """Tensors own disjoint byte ranges (the format has no sharing; the safetensors library
    refuses overlaps too): two names over the same bytes would be a lie about the data."""
    last_end, last_name = 0, ""
    for begin, end, name in sorted(r for r in ranges if r[1] > r[0]):
        if begin < last_end:
            raise CheckpointError(
                f"{shown(path)}: tensor {shown(name)!r} (bytes {begin}..{end}) overlaps tensor {shown(last_name)!r}; "
                "a safetensors file gives each tensor its own bytes"
            )
        last_end, last_name = end, name


def _metadata(path: Path, metadata: Any) -> dict[str, str]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{shown(path)}: __metadata__ must map names to strings, got a {type(metadata).__name__}")
    bad = next((k for k, v in metadata.items() if not isinstance(v, str)), None)
    if bad is not None:
        kind = type(metadata[bad]).__name__
        raise CheckpointError(f"{shown(path)}: __metadata__ entry {shown(bad)!r} is a {kind}, not a string")
    return metadata


def read_safetensors(handle: FileHandle) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The tensors of a safetensors file (values lazy) and its ``__metadata__``."""
    path = handle.path
    header, data_start, data_len = _header(handle)
    metadata = _metadata(path, header.pop("__metadata__", None))
    stored = []
    ranges = []
    file_key = str(path)
    for name, info in header.items():
        dtype, shape, begin, end = _entry(path, name, info, data_len)
        loader = FileTensor(handle, data_start + begin, end - begin, shape, dtype)
        ranges.append((begin, end, name))
        stored.append(
            StoredTensor(
                name=name,
                shape=shape,
                dtype=dtype_name(dtype),
                nbytes=end - begin,
                storage_key=("file", file_key, begin) if end > begin else ("file", file_key, name),
                tensor=loader,
                rows=loader.rows if shape else None,
            )
        )
    _check_no_overlap(path, ranges)
    return stored, dict(metadata)
