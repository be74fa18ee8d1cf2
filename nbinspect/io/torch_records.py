"""Where a torch file's tensors lie: the records the pickle handlers build and values are read from.

A :class:`Record` is a view (offset, shape, strides) of a :class:`Storage`, an exact byte
range of the file the handlers (``torch_handlers.py``) proved the view stays inside; its
values are read with ``pread`` into fresh memory, one tensor at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .files import FileHandle, value_buffer

__all__ = ["NoValues", "Record", "Storage"]


@dataclass(frozen=True)
class Storage:
    """A storage's bytes in the file: ``[offset, offset + nbytes)`` of `handle`."""

    handle: FileHandle
    key: str
    offset: int
    nbytes: int
    dtype: torch.dtype


@dataclass(frozen=True)
class Record:
    """Where a tensor's elements are: a view (offset, strides in elements) of a storage."""

    storage: Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    def extent(self) -> int:
        """Elements of the storage from `offset` the view can reach."""
        if math.prod(self.shape) == 0:
            return 0
        return 1 + sum((n - 1) * s for n, s in zip(self.shape, self.stride))

    def values(self) -> torch.Tensor:
        """The tensor, read with pread into fresh memory (never more than the storage holds)."""
        n = self.extent()
        if n == 0:
            return torch.empty(self.shape, dtype=self.dtype)
        item = self.dtype.itemsize
        raw = value_buffer(n * item)
        self.storage.handle.readinto(self.storage.offset + self.offset * item, raw.numpy().data)
        return raw.view(self.dtype).as_strided(self.shape, self.stride)

    def rows(self, i0: int, i1: int) -> torch.Tensor:
        """The slice [i0:i1] along the first axis, reading only the bytes it reaches."""
        part = Record(
            self.storage, self.offset + i0 * self.stride[0], (i1 - i0, *self.shape[1:]), self.stride, self.dtype
        )
        return part.values()


@dataclass(frozen=True)
class NoValues:
    """A tensor nbinspect lists but does not read (meta, sparse, nested): `kind` says which."""

    kind: str
