"""``.safetensors`` files, read through our own memory map.

The header (8-byte length, then JSON: name -> dtype, shape, byte range) is all a listing
needs, so names, shapes and sizes of a file of any size come without reading its data.
Values are zero-copy views of a private mmap, created when asked for, and
``TensorEntry.release()`` drops their pages again (see pages.py).
"""

from __future__ import annotations

import json
import math
import mmap
import struct
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..dtypes import dtype_name
from ..errors import CheckpointError
from .pages import page_span
from .tree import StoredTensor

__all__ = ["DTYPES", "read_safetensors"]

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U64": torch.uint64, "U32": torch.uint32, "U16": torch.uint16, "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip
_MAX_HEADER = 100 * 2**20  # the limit the safetensors library itself enforces


class _Mapped:
    """One file's private memory map, opened on first use and shared by its tensors."""

    def __init__(self, path: Path, data_start: int):
        self.path = path
        self.data_start = data_start
        self._map: mmap.mmap | None = None

    def _mm(self) -> mmap.mmap:
        if self._map is None:
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        return self._map

    def tensor(self, begin: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        count = math.prod(shape)
        if count == 0:
            return torch.empty(shape, dtype=dtype)
        flat = torch.frombuffer(self._mm(), dtype=dtype, count=count, offset=self.data_start + begin)
        return flat.view(shape)

    def release(self, begin: int, end: int) -> None:
        span = page_span(self.data_start + begin, self.data_start + end)
        if self._map is not None and span is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED, *span)


def _header(path: Path) -> tuple[dict[str, Any], int, int]:
    """(header dict, data start offset, data length)."""
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"{path}: empty file")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{path}: not a safetensors file (only {size} bytes)")
        (length,) = struct.unpack("<Q", head)
        if length > min(_MAX_HEADER, size - 8):
            raise CheckpointError(
                f"{path}: not a safetensors file or truncated (header of {length:,} bytes, file {size:,})"
            )
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: corrupt safetensors header ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt safetensors header (not a JSON object)")
    return header, 8 + length, size - 8 - length


def _entry(path: Path, name: str, info: Any, data_len: int) -> tuple[torch.dtype, tuple[int, ...], int, int]:
    try:
        dtype = DTYPES[info["dtype"]]
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: tensor {name!r}: bad header entry {info!r} ({exc!r})") from None
    expected = math.prod(shape) * dtype.itemsize
    if end - begin != expected or begin < 0:
        raise CheckpointError(
            f"{path}: tensor {name!r}: byte range {begin}..{end} does not hold {list(shape)} {info['dtype']}"
        )
    if end > data_len:
        raise CheckpointError(
            f"{path}: truncated: tensor {name!r} ends at byte {end:,} of the data, file holds {data_len:,}"
        )
    return dtype, shape, begin, end


def read_safetensors(path: Path) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The tensors of a safetensors file (values lazy) and its ``__metadata__``."""
    header, data_start, data_len = _header(path)
    metadata = header.pop("__metadata__", None) or {}
    mapped = _Mapped(path, data_start)
    stored = []
    for name, info in header.items():
        dtype, shape, begin, end = _entry(path, name, info, data_len)
        stored.append(
            StoredTensor(
                name=name,
                shape=shape,
                dtype=dtype_name(dtype),
                nbytes=end - begin,
                storage_key=("file", str(path), begin) if end > begin else ("file", str(path), name),
                tensor=partial(mapped.tensor, begin, shape, dtype),
                release_hook=partial(mapped.release, begin, end),
            )
        )
    return stored, dict(metadata)
