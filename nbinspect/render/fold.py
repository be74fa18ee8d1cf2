"""Folding repeated blocks in the text tree, as the widget folds them: a run of at least two
consecutive numbered siblings (``blocks.0``, ``blocks.1``, ... or ``experts.0``, ...) of
equal structure shows as one row, ``0–11 ×12``, followed by the first member's subtree."""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from .format import is_missing

__all__ = ["Fold", "fold_repeats"]

_SIGNATURE_COLUMNS = ("type", "own_params", "trainable_params", "param_bytes", "buffer_bytes")


class Fold(NamedTuple):
    label: str  # "0–11 ×12"
    members: int


def _children(layers: pd.DataFrame) -> list[list[int]]:
    index = {name: i for i, name in enumerate(layers["name"])}
    children: list[list[int]] = [[] for _ in range(len(layers))]
    for i, parent in enumerate(layers["parent"]):
        if not is_missing(parent):
            children[index[parent]].append(i)
    return children


def fold_repeats(layers: pd.DataFrame) -> tuple[dict[int, Fold], set[int]]:
    """(first member's row -> Fold, rows hidden because another member stands for them)."""
    children = _children(layers)
    keys = [name.rpartition(".")[2] for name in layers["name"]]
    values = list(zip(*(layers[c].tolist() for c in _SIGNATURE_COLUMNS)))
    ids: dict[tuple, int] = {}
    signature = [0] * len(layers)
    for i in range(len(layers) - 1, -1, -1):  # children come after their parent in pre-order
        parts = tuple(("#" if keys[c].isdigit() else keys[c], signature[c]) for c in children[i])
        signature[i] = ids.setdefault((values[i], parts), len(ids))
    folds: dict[int, Fold] = {}
    hidden: set[int] = set()
    for kids in children:
        a = 0
        while a < len(kids):
            b = a + 1
            if keys[kids[a]].isdigit():
                while (
                    b < len(kids)
                    and signature[kids[b]] == signature[kids[a]]
                    and keys[kids[b]] == str(int(keys[kids[b - 1]]) + 1)
                ):
                    b += 1
            if b - a >= 2:
                folds[kids[a]] = Fold(f"{keys[kids[a]]}–{keys[kids[b - 1]]} ×{b - a}", b - a)
                for member in kids[a + 1 : b]:
                    hidden.update(_subtree(member, children))
            a = b
    return folds, hidden


def _subtree(row: int, children: list[list[int]]) -> list[int]:
    out, stack = [], [row]
    while stack:
        i = stack.pop()
        out.append(i)
        stack.extend(children[i])
    return out
