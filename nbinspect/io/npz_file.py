"""``.npz`` files (``numpy.savez`` and ``mlx.core.savez``) as sources, without pickle.

An npz is a zip of ``.npy`` members. Each member's header is parsed with numpy's own
literal parser (no code runs); object dtypes, which only pickle can hold, are refused.
Members stored uncompressed (``savez``, ``mx.savez``) are memory-mapped copy-on-write in
place, so listing and streaming stay cheap; compressed members (``savez_compressed``) are
read into memory when their values are asked for. MLX writes bfloat16 as the 2-byte void
type ``|V2``: read as bfloat16. Every problem is a :class:`CheckpointError` naming the file
and the member.
"""

from __future__ import annotations

import math
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError

__all__ = ["is_npz", "read_npz"]

_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # zip local file header, 30 bytes
_MAX_HEADER = 1 << 20
Order = Literal["C", "F"]


def is_npz(path: Path) -> bool:
    """A zip whose members are all ``.npy`` arrays (a torch.save zip holds ``data.pkl``)."""
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return False
    return bool(names) and all(n.endswith(".npy") for n in names)


def _npy_header(fp: Any, where: str) -> tuple[np.dtype, tuple[int, ...], bool, int, bool]:
    """(dtype, shape, is MLX bfloat16, header length, fortran order) of the .npy stream `fp`."""
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp, max_header_size=_MAX_HEADER)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=_MAX_HEADER)
        else:
            raise ValueError(f"unknown .npy format version {version}")
    except (ValueError, SyntaxError, OSError, EOFError) as exc:
        raise CheckpointError(f"{where}: corrupt .npy header ({exc})") from None
    if dtype.hasobject:
        raise CheckpointError(f"{where}: holds Python objects (dtype {dtype}), which need pickle: refused")
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.fields is None:
        dtype = np.dtype("<u2")  # MLX's bfloat16, reinterpreted below
        bf16 = True
    elif dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        raise CheckpointError(f"{where}: dtype {dtype} is not a tensor element type")
    else:
        bf16 = False
    return dtype, tuple(int(d) for d in shape), bf16, fp.tell(), bool(fortran)


def _to_torch(array: np.ndarray, bf16: bool) -> torch.Tensor:
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    t = torch.from_numpy(array)
    return t.view(torch.bfloat16) if bf16 else t


def _mapped(
    path: Path, start: int, dtype: np.dtype, shape: tuple[int, ...], order: Order, bf16: bool
) -> Callable[[], torch.Tensor]:
    """A loader for a stored member: a copy-on-write memory map of its bytes in the file."""

    def load() -> torch.Tensor:
        if math.prod(shape) == 0:
            return _to_torch(np.empty(shape, dtype, order=order), bf16)
        return _to_torch(np.memmap(path, dtype, mode="c", offset=start, shape=shape, order=order), bf16)

    return load


def _inflated(
    path: Path,
    info: zipfile.ZipInfo,
    header_len: int,
    dtype: np.dtype,
    shape: tuple[int, ...],
    order: Order,
    bf16: bool,
) -> Callable[[], torch.Tensor]:
    """A loader for a compressed member: decompressed into memory when asked for."""

    def load() -> torch.Tensor:
        with zipfile.ZipFile(path) as again, again.open(info) as member:
            member.read(header_len)
            data = member.read()
        return _to_torch(np.frombuffer(data, dtype).reshape(shape, order=order).copy(order="K"), bf16)

    return load


def read_npz(path: Path) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The arrays of an npz file (values lazy), in file order."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(f"{path}: not a readable npz file ({exc})") from None
    stored = []
    with zf, open(path, "rb") as raw:
        for info in zf.infolist():
            name = info.filename.removesuffix(".npy")
            where = f"{path}: array {name!r}"
            try:
                with zf.open(info) as member:
                    dtype, shape, bf16, header_len, fortran = _npy_header(member, where)
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise CheckpointError(f"{where}: corrupt member ({exc})") from None
            nbytes = math.prod(shape) * dtype.itemsize
            if info.file_size != header_len + nbytes:
                raise CheckpointError(
                    f"{where}: truncated or corrupt: {info.file_size:,} bytes hold no {list(shape)} {dtype} array"
                )
            order: Order = "F" if fortran else "C"
            if info.compress_type == zipfile.ZIP_STORED:
                raw.seek(info.header_offset)
                head = raw.read(_LOCAL_HEADER.size)
                if len(head) < _LOCAL_HEADER.size:
                    raise CheckpointError(f"{where}: truncated zip header")
                fields = _LOCAL_HEADER.unpack(head)
                start = info.header_offset + _LOCAL_HEADER.size + fields[-2] + fields[-1] + header_len
                if start + nbytes > path.stat().st_size:
                    raise CheckpointError(f"{where}: truncated: the file ends inside the array")
                load = _mapped(path, start, dtype, shape, order, bf16)
            else:
                load = _inflated(path, info, header_len, dtype, shape, order, bf16)
            torch_dtype = torch.bfloat16 if bf16 else torch.from_numpy(np.empty(0, dtype.newbyteorder("="))).dtype
            stored.append(
                StoredTensor(
                    name=name,
                    shape=shape,
                    dtype=dtype_name(torch_dtype),
                    nbytes=nbytes,
                    storage_key=("file", str(path), name),
                    tensor=load,
                )
            )
    return stored, {}
