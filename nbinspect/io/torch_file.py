"""``torch.save`` files (.pt, .pth, .bin, .ckpt) read without ``torch.load``: the file layouts.

The zip is read from its central directory (members counted, names and sizes checked,
``data.pkl`` decompressed as a stream with a cap, storages must be stored uncompressed and
hold exactly the bytes their pickle claims); the pre-1.6 legacy layout is read as its
sequence of pickles and storages. The pickles go through the restricted unpickler with the
handlers of ``torch_handlers.py``: tensors become meta tensors plus a :class:`Record`
(``torch_records.py``) of where their bytes are, read later with ``pread`` (``FileHandle``),
one tensor at a time. ``trust=True`` hands the file to ``torch.load`` instead.
"""

from __future__ import annotations

import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

import torch

from ..core.limits import MAX_PICKLE_BYTES, MAX_ZIP_MEMBERS, shown
from ..errors import CheckpointError, UnsafeCheckpointError, first_line
from .files import FileHandle
from .torch_handlers import _DATA, TorchFile, _int, _StorageType, tensor_table
from .torch_records import NoValues, Record
from .unpickle import Handler, unpickle

__all__ = ["ZIP_MAGIC", "NoValues", "Record", "TorchFile", "load_torch_file", "tensor_table", "zip_members"]

ZIP_MAGIC = b"PK\x03\x04"
_LOCAL = struct.Struct("<4sHHHHHIIIHH")


# --- zip -----------------------------------------------------------------------------------


def zip_members(handle: FileHandle) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    """The zip's central directory, checked: member count, names, no duplicates."""
    where = handle.where
    try:
        fp = handle.fileobj()
        end = zipfile._EndRecData(fp)  # type: ignore[attr-defined]  # the end record, read before the directory
        if end is not None and end[zipfile._ECD_ENTRIES_TOTAL] > MAX_ZIP_MEMBERS:  # type: ignore[attr-defined]
            raise CheckpointError(f"{where}: {end[4]:,} zip members, over the limit of {MAX_ZIP_MEMBERS:,}")
        zf = zipfile.ZipFile(fp)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error, NotImplementedError) as exc:
        raise CheckpointError(
            f"{where}: cannot read as a torch checkpoint or npz (not a readable zip: {first_line(exc)})"
        ) from None
    infos = zf.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise CheckpointError(f"{where}: {len(infos):,} zip members, over the limit of {MAX_ZIP_MEMBERS:,}")
    names = set()
    for info in infos:
        if len(info.filename) > 1024 or info.filename in names:
            raise CheckpointError(f"{where}: a zip member name is duplicated or over 1,024 characters")
        names.add(info.filename)
        if info.flag_bits & 0x61:  # encrypted, compressed patched data, strong encryption
            raise CheckpointError(f"{where}: zip member {shown(info.filename)!r} is encrypted or patched; refused")
        if info.header_offset < 0 or info.header_offset + 30 + info.compress_size > handle.size:
            raise CheckpointError(f"{where}: zip member {shown(info.filename)!r} lies outside the file")
    return zf, infos


def member_data_offset(handle: FileHandle, info: zipfile.ZipInfo) -> int:
    """Where a member's (stored) bytes start, from its local header, checked against the file."""
    head = handle.pread(info.header_offset, _LOCAL.size)
    fields = _LOCAL.unpack(head)
    if fields[0] != b"PK\x03\x04":
        raise CheckpointError(f"{handle.where}: zip member {shown(info.filename)!r}: bad local header")
    start = info.header_offset + _LOCAL.size + fields[-2] + fields[-1]
    if start + info.compress_size > handle.size:
        raise CheckpointError(f"{handle.where}: zip member {shown(info.filename)!r} lies outside the file")
    return start


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str, cap: int) -> bytes:
    """A (small) member read whole: deflate or stored only, at most `cap` bytes decompressed."""
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise CheckpointError(
            f"{where}: zip member {shown(info.filename)!r} uses compression {info.compress_type}; refused"
        )
    if info.file_size > cap:
        raise CheckpointError(f"{where}: {shown(info.filename)!r} inflates to {info.file_size:,} bytes, over {cap:,}")
    try:
        with zf.open(info) as member:  # deflate is decompressed with max_length: bounded
            data = member.read(cap + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, struct.error) as exc:
        raise CheckpointError(
            f"{where}: corrupt torch checkpoint (zip member {shown(info.filename)!r}: {first_line(exc)})"
        ) from None
    if len(data) > cap or len(data) != info.file_size:
        raise CheckpointError(f"{where}: corrupt zip member {shown(info.filename)!r} (size differs from its header)")
    return data


def _read_zip(handle: FileHandle, where: str) -> tuple[Any, TorchFile]:
    zf, infos = zip_members(handle)
    pickles = [i for i in infos if i.filename.endswith("data.pkl") and i.filename.count("/") == 1]
    if len(pickles) != 1:
        raise CheckpointError(f"{where}: not a torch.save zip (no single <name>/data.pkl)")
    prefix = pickles[0].filename.removesuffix("data.pkl")
    storages: dict[str, tuple[int, int]] = {}
    for info in infos:
        name = info.filename
        if name == prefix + "byteorder" and read_member(zf, info, where, 16) not in (b"little", b""):
            raise CheckpointError(f"{where}: a big-endian torch file; not supported")
        if not name.startswith(prefix + "data/"):
            continue
        key = name.removeprefix(prefix + "data/")
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise CheckpointError(f"{where}: storage {shown(key)!r} is compressed; torch.save never does that")
        storages[key] = (member_data_offset(handle, info), info.file_size)
    data = read_member(zf, pickles[0], where, MAX_PICKLE_BYTES)
    ctx = TorchFile(handle, storages, where)
    return unpickle(data, where, tensor_table(ctx), ctx.persistent_load), ctx


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def _read_legacy(handle: FileHandle, where: str) -> tuple[Any, TorchFile]:
    """The pre-1.6 format: magic, protocol and system pickles, the object, the storage keys,
    then each storage as an 8-byte element count and its bytes."""
    from .unpickle import unpickle_stream

    window = handle.pread(0, min(handle.size, MAX_PICKLE_BYTES))
    pos = 0
    magic, pos = unpickle_stream(window, pos, where, _DATA)
    if magic != _LEGACY_MAGIC:
        raise CheckpointError(f"{where}: not a torch checkpoint (a plain pickle without torch's magic number)")
    _, pos = unpickle_stream(window, pos, where, _DATA)  # protocol version
    _, pos = unpickle_stream(window, pos, where, _DATA)  # system info
    pending: dict[str, tuple[_StorageType, int]] = {}
    ctx = TorchFile(handle, {}, where)

    def persistent(pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise ValueError("a persistent id that is not a storage")
        if pid[5] is not None:
            raise ValueError("a legacy storage view, not supported")
        key = pid[2]
        if not isinstance(key, str):
            raise ValueError("a malformed storage id")
        pending.setdefault(key, (pid[1], _int(pid[4], "storage size")))
        return _Pending(key)

    table = dict(_DATA)
    placeholders: list[tuple[_Pending, tuple]] = []

    def later(storage, offset, size, stride, *rest):
        if not isinstance(storage, _Pending):
            raise ValueError("a tensor without a storage")
        t = torch.empty(0, device="meta")
        placeholders.append((storage, (t, offset, size, stride)))
        return t

    table[("torch._utils", "_rebuild_tensor_v2")] = Handler("_rebuild_tensor_v2", reduce=later)
    table[("torch._utils", "_rebuild_tensor")] = Handler("_rebuild_tensor", reduce=later)
    table[("torch._utils", "_rebuild_parameter")] = Handler("_rebuild_parameter", reduce=lambda d, *a: d)
    obj, pos = unpickle_stream(window, pos, where, table, persistent)
    keys, pos = unpickle_stream(window, pos, where, _DATA)
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise CheckpointError(f"{where}: corrupt legacy torch file (storage keys)")
    for key in keys:
        if key not in pending:
            raise CheckpointError(f"{where}: corrupt legacy torch file (unknown storage {shown(key)!r})")
        kind, numel = pending[key]
        (count,) = struct.unpack("<q", handle.pread(pos, 8))
        nbytes = count * kind.dtype.itemsize
        if count != numel or pos + 8 + nbytes > handle.size:
            raise CheckpointError(f"{where}: corrupt legacy torch file (storage {shown(key)!r} size)")
        ctx.storages[key] = (pos + 8, nbytes)
        ctx.persistent_load(("storage", kind, key, "cpu", numel))
        pos += 8 + nbytes
    swap: dict[int, torch.Tensor] = {}
    for pend, (t, offset, size, stride) in placeholders:
        if pend.key not in ctx.opened:
            raise CheckpointError(f"{where}: corrupt legacy torch file (storage {shown(pend.key)!r} missing)")
        swap[id(t)] = ctx._tensor(ctx.opened[pend.key], offset, size, stride)
    return _replace(obj, swap), ctx


class _Pending:
    def __init__(self, key: str):
        self.key = key


def _replace(obj: Any, swap: dict[int, torch.Tensor]) -> Any:
    """`obj` with each placeholder tensor swapped for the real record (legacy files)."""
    stack, seen = [obj], set()
    if id(obj) in swap:
        return swap[id(obj)]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            for k, v in item.items():
                if id(v) in swap:
                    item[k] = swap[id(v)]
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(item, list):
            for i, v in enumerate(item):
                if id(v) in swap:
                    item[i] = swap[id(v)]
                elif isinstance(v, dict | list):
                    stack.append(v)
    return obj


def read_torch(handle: FileHandle) -> tuple[Any, TorchFile]:
    """(the unpickled object with meta tensors, the records of its tensors)."""
    head = handle.pread(0, min(4, handle.size))
    if head == ZIP_MAGIC:
        return _read_zip(handle, handle.where)
    return _read_legacy(handle, handle.where)


def load_torch_file(path: Path, *, trust: bool = False) -> tuple[Any, bool]:
    """The whole object of a torch file the caller trusts (``torch.load``, may run its code)."""
    if not trust:
        raise UnsafeCheckpointError(f"{shown(path)}: torch.load is used only for trusted files")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=False), False
    except Exception as exc:
        raise CheckpointError(f"{shown(path)}: cannot read as a torch checkpoint ({first_line(exc)})") from None
