"""Which repeated blocks fold, decided once for the text tree and the widget: a run of at
least two consecutive numbered siblings (``blocks.0``, ``blocks.1``, ... or ``experts.0``,
...) of equal structure shows as one row, ``0–11 ×12``, followed by the first member's
subtree. Equal structure: the same module types and child names all the way down, and the
same tensors (name, shape, dtype, trainable) in each module."""

from __future__ import annotations

from itertools import compress, count, islice, repeat
from typing import NamedTuple

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


def _children(layers: pd.DataFrame, index: dict[str, int]) -> list[list[int]]:
    children: list[list[int]] = [[] for _ in range(len(layers))]
    for i, parent in enumerate(layers["parent"].tolist()):
        at = index.get(parent)
        if at is not None:
            children[at].append(i)
        elif not is_missing(parent):  # only the root's is missing (tested here only, not per row)
            raise KeyError(parent)
    return children


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
