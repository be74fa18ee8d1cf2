"""Which repeated blocks fold, decided once for the text tree and the widget: a run of at
least two consecutive numbered siblings (``blocks.0``, ``blocks.1``, ... or ``experts.0``,
...) of equal structure shows as one row, ``0–11 ×12``, followed by the first member's
subtree. Equal structure: the same module types and child names all the way down, and the
same tensors (name, shape, dtype, trainable) in each module."""

from __future__ import annotations

from itertools import compress, count, islice, repeat
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
    """Per module row: its own tensors as (key, shape, dtype, trainable), in order (`index`:
    module path -> row)."""
    own: list[list[tuple]] = [[] for _ in range(len(layers))]
    if params is None or params.empty:
        return [()] * len(layers)
    columns = (params[c].tolist() for c in ("name", "module", "shape", "dtype", "requires_grad"))
    for name, module, shape, dtype, grad in zip(*columns):
        at = index.get(module)
        if at is not None:
            key = name[len(module) + 1 :] if module else name
            if type(shape) is not tuple:  # a tuple as the frame holds it (most): no test for missing
                shape = None if is_missing(shape) else tuple(shape)
            own[at].append((key, shape, dtype, bool(grad)))
    return [tuple(t) for t in own]


def tree_of(parent: np.ndarray) -> tuple[list[list[int]], np.ndarray]:
    """Per row (`parent`: each row's parent row, -1 for none) its children in order (one
    shared empty list for the many without) and its position among its parent's children:
    by numpy's stable sort, Python only for the rows with children."""
    order = np.flatnonzero(parent >= 0)
    order = order[np.argsort(parent[order], kind="stable")]
    starts = np.searchsorted(parent[order], np.arange(len(parent) + 1))
    position = np.zeros(len(parent), dtype=np.int64)
    position[order] = np.arange(len(order)) - starts[parent[order]]
    bounds, rows = starts.tolist(), order.tolist()
    none: list[int] = []
    children = [none] * len(parent)
    for p in np.flatnonzero(np.diff(starts)).tolist():
        children[p] = rows[bounds[p] : bounds[p + 1]]
    return children, position


def _children(layers: pd.DataFrame, index: dict[str, int]) -> list[list[int]]:
    parents = layers["parent"].tolist()
    parent = np.fromiter(map(index.get, parents, repeat(-1)), dtype=np.int64, count=len(parents))
    for i in np.flatnonzero(parent < 0).tolist():  # only the root's is missing (the few checked here)
        if not is_missing(parents[i]):
            raise KeyError(parents[i])
    return tree_of(parent)[0]


def fold_repeats(layers: pd.DataFrame, params: pd.DataFrame | None = None) -> Folds:
    """The folds of the module tree in `layers` (its tensors from `params`)."""
    names = layers["name"].tolist()  # lists: a Series iterates slowly
    index = {name: i for i, name in enumerate(names)}
    children = _children(layers, index)
    keys = [name.rpartition(".")[2] for name in names]
    values = list(zip(layers["type"].tolist(), _own_tensors(layers, params, index)))
    ids: dict[tuple, int] = {}
    fresh = count()  # a new id for each new key
    # every row as a leaf first (most are: no parts to build), in C; then the parents again,
    # from the last (children come after their parent in pre-order)
    signature = list(map(ids.setdefault, zip(values, repeat(())), fresh))
    stop = list(range(1, len(layers) + 1))  # one past each row's subtree (rows are in pre-order)
    for i in compress(range(len(layers) - 1, -1, -1), reversed(children)):
        kids = children[i]
        parts = tuple(("#" if keys[c].isdigit() else keys[c], signature[c]) for c in kids)
        signature[i] = ids.setdefault((values[i], parts), next(fresh))
        stop[i] = max(stop[i], stop[kids[-1]])
    folds: dict[int, Fold] = {}
    hidden: set[int] = set()
    for kids in children:
        a = 0
        while a < len(kids):
            b = a + 1
            if keys[kids[a]].isdigit():
                same, number = signature[kids[a]], int(keys[kids[a]])
                for c in islice(kids, b, None):
                    number += 1  # the number this member has
                    if signature[c] != same or keys[c] != str(number):
                        break
                    b += 1
            if b - a >= 2:
                label = f"{keys[kids[a]]}–{keys[kids[b - 1]]} ×{b - a}"
                folds[kids[a]] = Fold(label, b - a, tuple(kids[a:b]), stop[kids[b - 1]])
                if children[kids[a]]:
                    for member in kids[a + 1 : b]:
                        hidden.update(_subtree(member, children))
                else:  # a run of leaves (equal signatures: all leaves or none): the members themselves
                    hidden.update(kids[a + 1 : b])
            a = b
    return Folds(folds, hidden)


def _subtree(row: int, children: list[list[int]]) -> list[int]:
    out, stack = [], [row]
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(children[i])
    return out
