"""``.npz`` files (``numpy.savez`` and ``mlx.core.savez``) as sources, without pickle.

An npz is a zip of ``.npy`` members. Each member's header is decompressed as a stream of
at most ``MAX_NPY_HEADER`` bytes (bzip2 and deflate both stop there: a 1 KB member claiming
a gigabyte costs 64 KiB) and parsed with numpy's literal parser (no code runs); object
dtypes, which only pickle can hold, are refused. Values of stored members (``savez``,
``mx.savez``) are read with ``pread`` when asked for; compressed members
(``savez_compressed``) are decompressed then, as a stream, up to the size their header
states (at most 1 GiB). MLX writes bfloat16 as the 2-byte void
type ``|V2``: read as bfloat16. Every problem is a :class:`CheckpointError` naming the file
and the member.
"""

from __future__ import annotations

import bz2
import io
import math
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import torch

from ..core.limits import MAX_DIMS, MAX_NPY_HEADER, check_tensor_name, shown
from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError, first_line
from .files import FileHandle, value_buffer
from .torch_file import member_data_offset, zip_members

__all__ = ["is_npz", "read_npz"]

Order = Literal["C", "F"]


_MAX_INFLATED = 2**30  # a compressed member's values, decompressed (one at a time)
_MAX_RATIO = 1100  # decompressed / compressed bytes of a member (deflate's own maximum is ~1032)


def is_npz(handle: FileHandle) -> bool:
    """A zip whose members are all ``.npy`` arrays (a torch.save zip holds ``data.pkl``)."""
    try:
        _, infos = zip_members(handle)
    except CheckpointError:
        return False
    return bool(infos) and all(i.filename.endswith(".npy") for i in infos)


def _inflate(handle: FileHandle, info: zipfile.ZipInfo, want: int, where: str) -> bytes | bytearray:
    """The first `want` bytes of a member, decompressed as a stream: nothing beyond `want`
    is ever produced, whatever the member claims (bzip2 and deflate take ``max_length``)."""
    start = member_data_offset(handle, info)
    if info.compress_type == zipfile.ZIP_STORED:
        return handle.pread(start, min(want, info.compress_size))
    if info.compress_type not in (zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2):
        raise CheckpointError(f"{where}: compression method {info.compress_type} is not supported")
    out = bytearray()
    pos, end = start, start + info.compress_size

    def more() -> bytes:
        nonlocal pos
        chunk = handle.pread(pos, min(1 << 20, end - pos)) if pos < end else b""
        pos += len(chunk)
        return chunk

    try:
        if info.compress_type == zipfile.ZIP_BZIP2:
            bz = bz2.BZ2Decompressor()
            while len(out) < want and not bz.eof:
                chunk = b""
                if bz.needs_input:
                    chunk = more()
                    if not chunk:
                        break
                out += bz.decompress(chunk, want - len(out))
        else:
            z = zlib.decompressobj(-15)
            tail = b""
            while len(out) < want and not z.eof:
                chunk = tail or more()
                if not chunk:
                    break
                out += z.decompress(chunk, want - len(out))
                tail = z.unconsumed_tail
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        raise CheckpointError(f"{where}: corrupt compressed member ({first_line(exc)})") from None
    return out  # writable: the values are viewed in place, not copied


def _npy_header(data: bytes | bytearray, where: str) -> tuple[np.dtype, tuple[int, ...], bool, int, bool]:
    """(dtype, shape, is MLX bfloat16, header length, fortran order) of the .npy bytes `data`."""
    fp = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp, max_header_size=MAX_NPY_HEADER)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=MAX_NPY_HEADER)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except Exception as exc:  # ast.literal_eval of a crafted header: ValueError, SyntaxError, MemoryError, ...
        why = "not a literal dict" if "malformed node" in str(exc) else shown(first_line(exc), 120)
        raise CheckpointError(f"{where}: corrupt .npy header ({why})") from None
    if (
        not isinstance(shape, tuple)
        or len(shape) > MAX_DIMS
        or not all(type(d) is int and 0 <= d < 2**63 for d in shape)
    ):
        raise CheckpointError(f"{where}: corrupt .npy header (shape is not a tuple of at most {MAX_DIMS} sizes)")
    if dtype.hasobject:
        raise CheckpointError(f"{where}: holds Python objects (dtype {dtype}), which need pickle: refused")
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.fields is None:
        dtype = np.dtype("<u2")  # MLX's bfloat16, reinterpreted below
        bf16 = True
    elif (
        dtype.kind not in "biufc"
        or dtype.fields is not None
        or dtype.subdtype is not None
        or (dtype.kind == "f" and dtype.itemsize > 8)
        or (dtype.kind == "c" and dtype.itemsize > 16)
    ):
        raise CheckpointError(f"{where}: dtype {shown(str(dtype), 40)} is not a tensor element type nbinspect reads")
    else:
        bf16 = False
    return dtype, tuple(shape), bf16, fp.tell(), bool(fortran)


def _to_torch(array: np.ndarray, bf16: bool) -> torch.Tensor:
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    t = torch.from_numpy(array)
    return t.view(torch.bfloat16) if bf16 else t


def _loader(
    handle: FileHandle,
    info: zipfile.ZipInfo,
    header_len: int,
    dtype: np.dtype,
    shape: tuple[int, ...],
    order: Order,
    bf16: bool,
    where: str,
) -> Callable[[], torch.Tensor]:
    nbytes = math.prod(shape) * dtype.itemsize

    def load() -> torch.Tensor:
        if nbytes == 0:
            return _to_torch(np.empty(shape, dtype, order=order), bf16)
        if info.compress_type == zipfile.ZIP_STORED:
            raw = value_buffer(nbytes).numpy()
            handle.readinto(member_data_offset(handle, info) + header_len, raw.data)
        else:
            data = _inflate(handle, info, header_len + nbytes, where)
            if len(data) != header_len + nbytes:
                raise CheckpointError(f"{where}: truncated compressed member")
            raw = np.frombuffer(data, np.uint8, offset=header_len)
        return _to_torch(raw.view(dtype).reshape(shape, order=order), bf16)

    return load


def _rows_reader(
    handle: FileHandle, info: zipfile.ZipInfo, header_len: int, dtype: np.dtype, shape: tuple[int, ...], bf16: bool
) -> Callable[[int, int], torch.Tensor] | None:
    """Rows [i0, i1) along the first axis of a stored (uncompressed) C-order array, reading
    only their bytes; None for other members (they are read whole)."""
    if info.compress_type != zipfile.ZIP_STORED or not shape:
        return None
    row = math.prod(shape[1:]) * dtype.itemsize

    def rows(i0: int, i1: int) -> torch.Tensor:
        raw = value_buffer((i1 - i0) * row).numpy()
        if raw.size:
            handle.readinto(member_data_offset(handle, info) + header_len + i0 * row, raw.data)
        return _to_torch(raw.view(dtype).reshape((i1 - i0, *shape[1:])), bf16)

    return rows


def read_npz(handle: FileHandle) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The arrays of an npz file (values lazy), in file order."""
    path = handle.path
    _, infos = zip_members(handle)
    stored = []
    for info in infos:
        name = info.filename.removesuffix(".npy")
        where = f"{shown(path)}: array {shown(name)!r}"
        check_tensor_name(name, shown(path))
        head = _inflate(handle, info, MAX_NPY_HEADER, where)
        dtype, shape, bf16, header_len, fortran = _npy_header(head, where)
        nbytes = math.prod(shape) * dtype.itemsize
        if info.file_size != header_len + nbytes:
            raise CheckpointError(
                f"{where}: truncated or corrupt: {info.file_size:,} bytes hold no {list(shape)} {dtype} array"
            )
        if (
            info.compress_type != zipfile.ZIP_STORED
            and info.file_size > _MAX_RATIO * max(info.compress_size, 1) + 2**20
        ):
            raise CheckpointError(
                f"{where}: {info.compress_size:,} compressed bytes claim {info.file_size:,} (over {_MAX_RATIO:,}x: "
                "deflate cannot do that, a decompression bomb can); refused"
            )
        if info.compress_type != zipfile.ZIP_STORED and nbytes > _MAX_INFLATED:
            raise CheckpointError(
                f"{where}: a compressed array of {nbytes:,} bytes, over the limit of {_MAX_INFLATED:,}; "
                "save it uncompressed (numpy.savez)"
            )
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise CheckpointError(f"{where}: corrupt zip member sizes")
        order: Order = "F" if fortran else "C"
        torch_dtype = torch.bfloat16 if bf16 else torch.from_numpy(np.empty(0, dtype.newbyteorder("="))).dtype
        stored.append(
            StoredTensor(
                name=name,
                shape=shape,
                dtype=dtype_name(torch_dtype),
                nbytes=nbytes,
                storage_key=("file", str(path), name),
                tensor=_loader(handle, info, header_len, dtype, shape, order, bf16, where),
                rows=None if fortran else _rows_reader(handle, info, header_len, dtype, shape, bf16),
            )
        )
    return stored, {}
