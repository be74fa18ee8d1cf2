"""A folder written by ``torch.distributed.checkpoint`` (DCP) as a source.

DCP writes a ``.metadata`` file (every entry's global shape, dtype and where its chunks
live) and one ``*.distcp`` file per writing rank. The tree, shapes and dtypes come from the
metadata alone; values are read one tensor at a time through DCP's own loader
(``dcp.load`` with ``no_dist=True``), which stitches the chunks every rank wrote back into
the global tensor. Nothing else stays in memory.

``.metadata`` is a pickle. It is read with an unpickler that admits only the classes DCP
itself writes there (its metadata dataclasses, ``torch.Size``, dtypes, paths); anything
else is refused unless ``trust=True``.
"""

from __future__ import annotations

import io
import math
import pickle
import warnings
from pathlib import Path
from typing import Any

import torch

from ..core.tree import StoredTensor
from ..dtypes import dtype_name
from ..errors import CheckpointError, UnsafeCheckpointError, first_line

__all__ = ["METADATA_FILE", "is_dcp_folder", "read_dcp"]

METADATA_FILE = ".metadata"
_ALLOWED_MODULES = ("torch.distributed.checkpoint.metadata",)
_ALLOWED = {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
    ("pathlib", "WindowsPath"),
    ("pathlib", "PureWindowsPath"),
    ("collections", "OrderedDict"),
}


class _MetadataUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, path: Path):
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        allowed = (module, name) in _ALLOWED or module in _ALLOWED_MODULES
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            allowed = True
        if not allowed:
            raise UnsafeCheckpointError(
                f"{self.path}: the DCP metadata needs {module}.{name}, which DCP does not write there; "
                "pass trust=True if you trust this folder"
            )
        return super().find_class(module, name)


def is_dcp_folder(path: Path) -> bool:
    return path.is_dir() and (path / METADATA_FILE).is_file()


def _metadata(folder: Path, trust: bool) -> Any:
    path = folder / METADATA_FILE
    data = path.read_bytes()
    try:
        return pickle.loads(data) if trust else _MetadataUnpickler(data, path).load()
    except UnsafeCheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{path}: not DCP metadata ({first_line(exc)})") from None


def _reader(folder: Path, metadata: Any) -> Any:
    from torch.distributed.checkpoint import FileSystemReader

    class Reader(FileSystemReader):
        """DCP's file reader, handed the metadata already read (safely) instead of unpickling it."""

        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            return metadata

    return Reader(str(folder))


def _loader(folder: Path, metadata: Any, fqn: str, shape: tuple[int, ...], dtype: torch.dtype) -> Any:
    def load() -> torch.Tensor:
        import torch.distributed.checkpoint as dcp

        out = {fqn: torch.empty(shape, dtype=dtype)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "assuming the intent is to load in a single process"
            try:
                dcp.load(out, storage_reader=_reader(folder, metadata), no_dist=True)
            except Exception as exc:
                raise CheckpointError(f"{folder}: tensor {fqn!r}: {first_line(exc)}") from None
        return out[fqn]

    return load


def read_dcp(folder: Path, trust: bool = False) -> tuple[list[StoredTensor], dict[str, Any]]:
    """The tensors of a DCP folder (values loaded on demand) and what else it holds."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = _metadata(folder, trust)
    entries = getattr(metadata, "state_dict_metadata", None)
    if not isinstance(entries, dict):
        raise CheckpointError(f"{folder / METADATA_FILE}: not DCP metadata (no state_dict_metadata)")
    stored, other = [], []
    for fqn, md in entries.items():
        if not isinstance(md, TensorStorageMetadata):
            other.append(fqn)  # pickled objects (step counters, configs): not read
            continue
        shape, dtype = tuple(int(d) for d in md.size), md.properties.dtype
        stored.append(
            StoredTensor(
                name=fqn,
                shape=shape,
                dtype=dtype_name(dtype),
                nbytes=math.prod(shape) * dtype.itemsize,
                storage_key=("dcp", str(folder), fqn),
                tensor=_loader(folder, metadata, fqn, shape, dtype),
            )
        )
    files = sorted(p.name for p in folder.glob("*.distcp"))
    meta: dict[str, Any] = {"format": f"torch.distributed.checkpoint ({len(files)} .distcp files)"}
    if other:
        meta["non-tensor entries"] = ", ".join(other[:20]) + (f" (+{len(other) - 20} more)" if len(other) > 20 else "")
    if not stored:
        raise CheckpointError(f"{folder}: the DCP checkpoint holds no tensors")
    return stored, meta
