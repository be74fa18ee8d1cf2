"""Giving the pages of a memory-mapped tensor back to the OS once a loop is done with it.

Reading a memory-mapped file faults its pages in, and they stay resident until the kernel
needs the memory: streaming a 5 GB checkpoint would still grow to 5 GB. ``MADV_DONTNEED``
on a private, unmodified file mapping drops them now; reading again refetches from the file,
so the tensor stays valid. Only whole pages inside the range are dropped, never a neighbour's.
"""

from __future__ import annotations

import ctypes
import mmap

import torch

__all__ = ["drop_tensor_pages", "page_span"]

_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)
_libc = ctypes.CDLL(None, use_errno=True) if _MADV_DONTNEED is not None else None


def page_span(begin: int, end: int) -> tuple[int, int] | None:
    """(start, length) of the whole pages inside [begin, end), or None if there are none."""
    start = -(-begin // mmap.PAGESIZE) * mmap.PAGESIZE
    stop = end // mmap.PAGESIZE * mmap.PAGESIZE
    return (start, stop - start) if stop > start else None


def drop_tensor_pages(tensor: torch.Tensor) -> None:
    """Drop the resident pages of `tensor`'s storage, which must live in a private file
    mapping nothing has written to (``torch.load(mmap=True)``)."""
    if _libc is None:
        return
    storage = tensor.untyped_storage()
    span = page_span(storage.data_ptr(), storage.data_ptr() + storage.nbytes())
    if span is not None:
        _libc.madvise(ctypes.c_void_p(span[0]), ctypes.c_size_t(span[1]), _MADV_DONTNEED)
