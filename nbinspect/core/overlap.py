"""Partially overlapping views: tensors whose element sets share some elements but are not
the same set (a tie). Counts must take each distinct element once.

A live tensor's storage key (``torch_module.storage_key``) already describes the exact
element set it covers: the first element's address, the element type and either an element
count (contiguous) or the (size, stride) pairs of the view. The byte span of each set is
read from the key; only keys whose spans meet another key's span are looked at further, so a
model without such views pays one sort of its distinct storages.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable, Iterable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import torch

# Strided views in one overlap group are compared element by element (their offsets listed
# with torch) up to this many elements in all; past it they are counted per view, with a note.
MAX_EXACT_ELEMENTS = 1 << 24
# The params frame names, for each view, the earlier views it shares elements with, compared
# pair by pair in groups up to this size; a larger group says how many elements were repeated.
MAX_PAIRWISE = 64

_Dims = tuple[tuple[int, int], ...]


def _layout(key: Hashable) -> tuple[int, int | _Dims, int] | None:
    """(address, element count or (size, stride) pairs, element size) of a live view's key;
    None for keys that are not memory addresses (files, meta tensors, packed weights)."""
    if not (isinstance(key, tuple) and len(key) == 4 and key[0] == "mem" and isinstance(key[3], torch.dtype)):
        return None
    return key[1], key[2], key[3].itemsize


def _extent(shape: int | _Dims) -> int:
    """Elements from the first to one past the last element the view covers."""
    return shape if isinstance(shape, int) else sum((n - 1) * st for n, st in shape) + 1


def _elements(shape: int | _Dims) -> int:
    if isinstance(shape, int):
        return shape
    count = 1
    for n, _ in shape:
        count *= n
    return count


def groups(keys: Iterable[Hashable]) -> dict[Hashable, int]:
    """Key -> group number for the keys whose byte spans meet another key's span; keys that
    meet no other (the normal case: every key) are left out."""
    # this runs for every distinct storage of every model: columns by comprehension, and
    # numpy answers the usual question (does any span meet another?) before any loop
    found = [key for key in keys if type(key) is tuple and len(key) == 4 and key[0] == "mem"]
    if len(found) < 2:
        return {}
    # an element's size read once per dtype, not once per key (an attribute of torch's dtype is slow)
    sizes = {dtype: dtype.itemsize for dtype in set(map(_DTYPE, found))}
    spans = _contiguous_spans(found, sizes)
    if spans is not None:
        if not _meet(*spans):
            return {}
        los, his = spans[0].tolist(), spans[1].tolist()
    else:
        los = [key[1] for key in found]
        his = [key[1] + (key[2] if type(key[2]) is int else _extent(key[2])) * sizes[key[3]] for key in found]
        if not _any_meet(los, his):
            return {}
    order = sorted(range(len(los)), key=los.__getitem__)
    runs = []  # [start, stop) in `order` of spans that meet one another
    start, end = 0, -1
    for j, i in enumerate(order):
        if los[i] >= end:
            if j - start > 1:
                runs.append((start, j))
            start = j
        if his[i] > end:
            end = his[i]
    if len(order) - start > 1:
        runs.append((start, len(order)))
    return {found[i]: group for group, (a, b) in enumerate(runs) for i in order[a:b]}


_ADDRESS, _COUNT, _DTYPE = itemgetter(1), itemgetter(2), itemgetter(3)


def _contiguous_spans(found: list[tuple], sizes: dict[Any, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """[start, end) byte spans of contiguous views' keys (address, element count: most
    models' every key) in int64, the key parts taken in C; None when a view is strided
    (its count is (size, stride) pairs) or a number is not one of this machine's."""
    n = len(found)
    try:
        lo = np.fromiter(map(_ADDRESS, found), dtype=np.int64, count=n)
        count = np.fromiter(map(_COUNT, found), dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):  # (size, stride) pairs, or past int64
        return None
    size = np.fromiter(map(sizes.__getitem__, map(_DTYPE, found)), dtype=np.int64, count=n)
    if (count >> 56).any() or (lo >> 60).any():  # no view of memory is this large: the exact path, no int64 overflow
        return None
    return lo, lo + count * size


def _any_meet(los: list[int], his: list[int]) -> bool:
    """Whether any span [lo, hi) meets another (lists of Python ints)."""
    if len(los) < 2:
        return False
    try:
        # addresses and ends are ints: packed without numpy's type discovery
        lo, hi = (np.fromiter(v, dtype=np.int64, count=len(v)) for v in (los, his))
    except OverflowError:  # not addresses of this machine: the caller's exact loop decides
        return True
    return _meet(lo, hi)


def _meet(lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether any span [lo, hi) meets another: sorted by start, one starts before the
    furthest end of those before it."""
    order = np.argsort(lo, kind="stable")
    return bool((lo[order][1:] < np.maximum.accumulate(hi[order])[:-1]).any())


def apart(starts: list[int], ends: list[int]) -> bool:
    """Whether byte spans [start, end) (Python ints) all lie apart: none meets another, so no
    two views share an element (nor tie: equal spans meet)."""
    return not _any_meet(starts, ends)


def _new_in_intervals(intervals: Sequence[tuple[int, int]]) -> list[int]:
    """For intervals [lo, hi) in order: how many of each one's points no earlier one covers.
    The covered points are kept as disjoint sorted intervals; each new one merges with those
    it meets (found by bisection), so many views of one block stay fast."""
    starts: list[int] = []
    ends: list[int] = []
    out = []
    for lo, hi in intervals:
        a, b = bisect.bisect_right(ends, lo), bisect.bisect_left(starts, hi)
        out.append(hi - lo - sum(min(hi, ends[k]) - max(lo, starts[k]) for k in range(a, b)))
        if a < b:
            lo, hi = min(lo, starts[a]), max(hi, ends[b - 1])
        starts[a:b], ends[a:b] = [lo], [hi]
    return out


def _offsets(start: int, shape: int | _Dims) -> torch.Tensor:
    if isinstance(shape, int):
        return torch.arange(start, start + shape)
    offsets = torch.tensor([start])
    for n, st in shape:
        offsets = (offsets[:, None] + torch.arange(n) * st).reshape(-1)
    return offsets


def _new_in_sets(sets: Sequence[tuple[int, int | _Dims]]) -> list[int]:
    """For element sets (start, shape) in order: how many of each one's elements no earlier
    one holds, by listing the offsets and keeping each offset's first holder."""
    order = len(sets)
    offsets = torch.cat([_offsets(start, shape) * order + i for i, (start, shape) in enumerate(sets)])
    ranked = offsets.sort().values
    first = torch.ones(len(ranked), dtype=torch.bool)
    first[1:] = ranked[1:] // order != ranked[:-1] // order
    return torch.bincount(ranked[first] % order, minlength=order).tolist()


def repeated(keys: Sequence[Hashable]) -> tuple[list[int], str | None]:
    """For the keys of one overlap group, in counting order: how many elements of each an
    earlier key already covers (subtract them to count each element once), and a note when
    the group could not be counted exactly (then nothing is subtracted)."""
    layouts = [_layout(k) for k in keys]
    if any(layout is None for layout in layouts):
        return [0] * len(keys), None
    ptrs = [layout[0] for layout in layouts if layout]
    shapes = [layout[1] for layout in layouts if layout]
    sizes = {layout[2] for layout in layouts if layout}
    base = min(ptrs)
    size = sizes.pop()
    if sizes or any((p - base) % size for p in ptrs):
        return [0] * len(keys), "views of different element sizes or alignments overlap: counted per view"
    starts = [(p - base) // size for p in ptrs]
    intervals = [(s, s + shape) for s, shape in zip(starts, shapes) if isinstance(shape, int)]
    if len(intervals) == len(shapes):  # all contiguous: interval arithmetic, any size
        new = _new_in_intervals(intervals)
    elif sum(_elements(shape) for shape in shapes) <= MAX_EXACT_ELEMENTS:
        new = _new_in_sets(list(zip(starts, shapes)))
    else:
        return [0] * len(keys), f"strided views over {MAX_EXACT_ELEMENTS:,} elements overlap: counted per view"
    return [_elements(shape) - n for shape, n in zip(shapes, new)], None
