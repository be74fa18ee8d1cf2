"""Which repeated blocks fold, decided once for the text tree and the widget: a run of at
least two consecutive numbered siblings (``blocks.0``, ``blocks.1``, ... or ``experts.0``,
...) of equal structure shows as one row, ``0–11 ×12``, followed by the first member's
subtree. Equal structure: the same module types and child names all the way down, and the
same tensors (name, shape, dtype, trainable) in each module."""

from __future__ import annotations

import operator
from itertools import compress, count, repeat
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..schema import is_missing

__all__ = ["Fold", "Folds", "fold_repeats"]


class Fold(NamedTuple):
    label: str  # "0–11 ×12"
    members: int
    rows: tuple[int, ...]  # the members' rows in `layers`, first to last
    stop: int  # one past the last row below the last member: rows[0]:stop are the members and all below them


class Folds(NamedTuple):
    first: dict[int, Fold]  # first member's row -> its fold
    hidden: set[int]  # rows another member stands for (the other members and their subtrees)


def _own_tensors(layers: pd.DataFrame, params: pd.DataFrame | None, index: dict[str, int]) -> list[tuple]:
    """Per module row: its own tensors in order, each a small int standing for its (key,
    shape, dtype, trainable) (`index`: module path -> row): a module's tensors are then
    hashed and compared as a tuple of ints, not of nested tuples. Built by maps and numpy,
    without Python code per tensor."""
    n = len(layers)
    if params is None or params.empty:
        return [()] * n
    columns = [params[c].tolist() for c in ("name", "module", "shape", "dtype", "requires_grad")]
    at = np.fromiter(map(index.get, columns[1], repeat(-1)), dtype=np.int64, count=len(params))
    if at[0] < 0 or np.any(np.diff(at) < 0):  # not already by module (most frames are): reordered
        order = np.flatnonzero(at >= 0)
        order = order[np.argsort(at[order], kind="stable")]  # by module, in frame order within one
        columns = [list(map(c.__getitem__, order.tolist())) for c in columns]
        at = at[order]
    names, _, shapes, dtypes, grads = columns
    # each tensor's key: its name after "module." (the root's: its name), one start per module
    lengths = np.fromiter(map(len, layers["name"].tolist()), dtype=np.int64, count=n)
    starts = (lengths + (lengths > 0))[at].tolist()
    keys = map(operator.getitem, names, map(slice, starts, repeat(None)))
    if set(map(type, shapes)) - {tuple}:  # a tuple as the frame holds it (most): no test for missing
        shapes = [s if type(s) is tuple else None if is_missing(s) else tuple(s) for s in shapes]
    interned: dict[tuple, int] = {}
    codes = list(map(interned.setdefault, zip(keys, shapes, dtypes, map(bool, grads)), count()))
    bounds = np.searchsorted(at, np.arange(n + 1)).tolist()
    return list(map(tuple, map(codes.__getitem__, map(slice, bounds[:-1], bounds[1:]))))


def _parents(layers: pd.DataFrame, index: dict[str, int]) -> np.ndarray:
    """Per row: its parent's row, -1 for the root (whose parent alone is missing)."""
    parents = layers["parent"].tolist()
    at = np.fromiter(map(index.get, parents, repeat(-1)), dtype=np.int64, count=len(parents))
    for i in np.flatnonzero(at < 0).tolist():
        if not is_missing(parents[i]):
            raise KeyError(parents[i])
    return at


def fold_repeats(layers: pd.DataFrame, params: pd.DataFrame | None = None) -> Folds:
    """The folds of the module tree in `layers` (its tensors from `params`)."""
    names = layers["name"].tolist()  # lists: a Series iterates slowly
    n = len(names)
    index = dict(zip(names, range(n)))
    parent = _parents(layers, index)
    # rows by parent, in row order within one: each parent's children side by side
    order = np.flatnonzero(parent >= 0)
    order = order[np.argsort(parent[order], kind="stable")]
    by_parent = parent[order]
    bounds = np.searchsorted(by_parent, np.arange(n + 1)).tolist()
    rows = order.tolist()
    children: dict[int, list[int]] = {
        p: rows[bounds[p] : bounds[p + 1]] for p in np.flatnonzero(np.diff(bounds)).tolist()
    }
    keys = list(map(operator.itemgetter(2), map(str.rpartition, names, repeat("."))))
    digit = np.array(list(map(str.isdigit, keys)), dtype=bool)
    part = np.array(keys, dtype=object)
    part[digit] = "#"  # numbers stand for any number
    part = part.tolist()
    types = layers["type"].tolist()
    own = _own_tensors(layers, params, index)
    # a leaf's signature: its type and tensors; a parent's also its children's parts and
    # signatures (tuples of four: never equal to a leaf's of two)
    ids: dict[tuple, int] = {}
    fresh = count()
    signature = list(map(ids.setdefault, zip(types, own), fresh))
    stop = list(range(1, n + 1))  # one past each row's subtree (rows are in pre-order)
    for i in sorted(children, reverse=True):  # children come after their parent in pre-order
        kids = children[i]
        key = (types[i], own[i], tuple(map(part.__getitem__, kids)), tuple(map(signature.__getitem__, kids)))
        signature[i] = ids.setdefault(key, next(fresh))
        stop[i] = max(stop[i], stop[kids[-1]])
    # a sibling continues the run of the one before it: the same signature and the next number
    # written as str writes it (texts of small numbers looked up, others converted)
    numbered = np.flatnonzero(digit & (parent >= 0)).tolist()
    value: np.ndarray = np.full(n, -2, dtype=np.int64)  # a number's value; -2: no number (-1 follows none)
    canonical = np.zeros(n, dtype=bool)
    if numbered:
        table = _numbers(n)
        found = list(map(table.get, map(keys.__getitem__, numbered), repeat(-1)))
        value[numbered] = found
        canonical[numbered] = np.array(found) >= 0
        for i in compress(numbered, map((-1).__eq__, found)):  # "01", "²", or beyond the table
            number = int(keys[i])
            if number >= 2**62 and value.dtype != object:
                value = value.astype(object)  # Python ints, compared exactly
            value[i], canonical[i] = number, str(number) == keys[i]
    sig = np.array(signature, dtype=np.int64)[order]
    value, canonical = value[order], canonical[order]
    goes_on = (by_parent[1:] == by_parent[:-1]) & (sig[1:] == sig[:-1]) & canonical[1:] & (value[1:] == value[:-1] + 1)
    edges = np.flatnonzero(np.diff(np.concatenate(([False], goes_on, [False])).astype(np.int8)))
    folds: dict[int, Fold] = {}
    hidden: set[int] = set()
    for a, b in zip(edges[0::2].tolist(), edges[1::2].tolist()):  # goes_on[a:b]: rows[a..b] are a run
        members = rows[a : b + 1]
        first, last = members[0], members[-1]
        folds[first] = Fold(f"{keys[first]}–{keys[last]} ×{len(members)}", len(members), tuple(members), stop[last])
        if first in children:
            for member in members[1:]:
                hidden.update(_subtree(member, children))
        else:  # a run of leaves (equal signatures: all leaves or none): the members themselves
            hidden.update(members[1:])
    return Folds(folds, hidden)


_NUMBERS: dict[str, int] = {}  # "0": 0, "1": 1, ...: made once per process, grown as needed


def _numbers(n: int) -> dict[str, int]:
    """The texts of the numbers below `n` at least, as str writes them, to their values."""
    if len(_NUMBERS) < n:
        _NUMBERS.update(zip(map(str, range(len(_NUMBERS), n)), range(len(_NUMBERS), n)))
    return _NUMBERS


def _subtree(row: int, children: dict[int, list[int]]) -> list[int]:
    out, stack = [], [row]
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(children.get(i, ()))
    return out
