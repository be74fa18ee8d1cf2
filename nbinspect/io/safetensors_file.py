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

from ..core.limits import MAX_HEADER_BYTES, MAX_TENSORS, shown
from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError, first_line
from .pages import page_span

__all__ = ["DTYPES", "read_safetensors"]

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U64": torch.uint64, "U32": torch.uint32, "U16": torch.uint16, "U8": torch.uint8, "BOOL": torch.bool,
}  # fmt: skip


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
    where = shown(path)
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"{where}: empty file")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{where}: not a safetensors file (only {size} bytes)")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise CheckpointError(
                f"{where}: safetensors header of {length:,} bytes is over the limit of {MAX_HEADER_BYTES:,}"
            )
        if length > size - 8:
            raise CheckpointError(f"{where}: truncated safetensors file (header of {length:,} bytes, file {size:,})")
        raw = f.read(length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{where}: corrupt safetensors header ({exc})") from None
    except RecursionError:  # the C decoder stops at the interpreter's depth limit
        raise CheckpointError(f"{where}: corrupt safetensors header (JSON nested too deeply)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{where}: corrupt safetensors header (not a JSON object)")
    count = len(header) - ("__metadata__" in header)
    if count > MAX_TENSORS:
        raise CheckpointError(f"{where}: header lists {count:,} tensors, over the limit of {MAX_TENSORS:,}")
    return header, 8 + length, size - 8 - length


def _dims(shape: Any) -> tuple[int, ...]:
    # bool is an int in Python, and a float like 2.0 would pass int(): neither is a dimension
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise ValueError(f"shape {shape!r} is not a list of non-negative integers")
    return tuple(shape)


def _entry(path: Path, name: str, info: Any, data_len: int) -> tuple[torch.dtype, tuple[int, ...], int, int]:
    def bad(what: str) -> CheckpointError:  # built only on failure: a header may list a million entries
        return CheckpointError(f"{shown(path)}: tensor {name!r}: {what}")

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
        raise bad(f"byte range {begin}..{end} does not hold {list(shape)} {info['dtype']}")
    if begin % dtype.itemsize:
        raise bad(f"data offset {begin} is not aligned to its {dtype.itemsize}-byte elements")
    if end > data_len:
        raise CheckpointError(
            f"{shown(path)}: truncated: tensor {name!r} ends at byte {end:,} of the data, file holds {data_len:,}"
        )
    return dtype, shape, begin, end


def _check_no_overlap(path: Path, ranges: list[tuple[int, int, str]]) -> None:
    """Tensors own disjoint byte ranges (the format has no sharing; the safetensors library
    refuses overlaps too): two names over the same bytes would be a lie about the data."""
    last_end, last_name = 0, ""
    for begin, end, name in sorted(r for r in ranges if r[1] > r[0]):
        if begin < last_end:
            raise CheckpointError(
                f"{shown(path)}: tensor {name!r} (bytes {begin}..{end}) overlaps tensor {last_name!r}; "
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
        raise CheckpointError(f"{shown(path)}: __metadata__ entry {bad!r} is a {kind}, not a string")
    return metadata


def read_safetensors(path: Path) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The tensors of a safetensors file (values lazy) and its ``__metadata__``."""
    header, data_start, data_len = _header(path)
    metadata = _metadata(path, header.pop("__metadata__", None))
    mapped = _Mapped(path, data_start)
    stored = []
    ranges = []
    file_key = str(path)
    for name, info in header.items():
        dtype, shape, begin, end = _entry(path, name, info, data_len)
        ranges.append((begin, end, name))
        stored.append(
            StoredTensor(
                name=name,
                shape=shape,
                dtype=dtype_name(dtype),
                nbytes=end - begin,
                storage_key=("file", file_key, begin) if end > begin else ("file", file_key, name),
                tensor=partial(mapped.tensor, begin, shape, dtype),
                release_hook=partial(mapped.release, begin, end),
            )
        )
    _check_no_overlap(path, ranges)
    return stored, dict(metadata)
