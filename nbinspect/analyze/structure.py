"""Structure analyzers: what a model is made of, without running it.

Every function takes a model (or anything :func:`nbinspect.backends.as_source` accepts) and
returns a fresh DataFrame or dict. Shared storage (tied weights, a module registered at two
paths) is counted once wherever a total is given; the per-path view is kept alongside.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from itertools import repeat
from operator import eq, is_
from typing import Any

import numpy as np
import pandas as pd

from ..backends import ModelSource, TensorEntry, as_source, on_receiving_rank
from ..schema import BY_TYPE, LAYERS, PARAMETER, PARAMS

__all__ = ["by_type", "layers", "params", "totals"]


@on_receiving_rank(0)
def params(model: Any) -> pd.DataFrame:
    """One row per parameter and buffer path (schema.PARAMS), with `tied_to` for shared storage."""
    source = as_source(model)
    tied, overlaps = source.tied(), source.overlaps()
    columns = tensor_columns(source)
    names = columns["name"]
    # no tie or overlap (most models): the columns left missing, not looked up path by path
    given = dict(columns)
    if tied:
        given["tied_to"] = list(map(tied.get, names))
    if overlaps:
        given["overlaps"] = list(map(overlaps.get, names))
    return PARAMS.from_columns(given, len(names))


def tensor_columns(source: ModelSource) -> dict[str, Any]:
    """The tensors' fields as the params frame's columns (the counts int64 arrays), made once
    per source: the params frame, the modules' own counts and the expert test use them."""
    memo = source.derived
    if "structure.columns" not in memo:
        given = source.tensor_columns
        columns = {name: given[name] for name in ("name", "module", "kind", "shape", "dtype", "device")}
        memo["structure.columns"] = {
            **columns,
            "numel": _int64(given["numel"]),
            "bytes": _int64(given["nbytes"]),
            "requires_grad": given["requires_grad"],
        }
    return memo["structure.columns"]


def _int64(counts: Sequence[int]) -> np.ndarray:
    """Counts (ints by construction: element and byte counts, depths) packed without
    numpy's type discovery (0.22 against 0.37 k instructions a value)."""
    return np.fromiter(counts, dtype=np.int64, count=len(counts))


def _counted(t: TensorEntry, repeated: dict[Any, int]) -> tuple[int, int]:
    """(elements, bytes) of `t` less those an earlier, partially overlapping view holds."""
    n = repeated.get(t.storage_key, 0)
    if not n:
        return t.numel, t.nbytes
    return t.numel - n, t.nbytes - n * (t.nbytes // t.numel)


# what _unique_sums adds up, in the order of `_own`'s per-module counts
_SUMS = ("params", "trainable_params", "param_bytes", "buffer_bytes", "buffer_numel")


def _unique_sums(entries: dict[Any, TensorEntry], repeated: dict[Any, int]) -> dict[str, int]:
    # sums in locals, not in the dict: this runs over every distinct storage of the model
    params = trainable = param_bytes = buffer_bytes = buffer_numel = 0
    for t in entries.values():
        numel, nbytes = _counted(t, repeated) if repeated else (t.numel, t.nbytes)
        if t.kind == PARAMETER:
            params += numel
            param_bytes += nbytes
            if t.requires_grad:
                trainable += numel
        else:
            buffer_bytes += nbytes
            buffer_numel += numel
    return dict(zip(_SUMS, (params, trainable, param_bytes, buffer_bytes, buffer_numel)))


@on_receiving_rank(0)
def layers(model: Any) -> pd.DataFrame:
    """One row per module path in pre-order (schema.LAYERS). Subtree counts are unique."""
    source = as_source(model)
    modules = source.module_columns
    names = modules["name"]
    n = len(names)
    index = _index(source)
    parents = _parents(source, names, list(modules["parent"]))
    ups = np.fromiter(map(index.get, parents[1:], repeat(n)), dtype=np.int64, count=n - 1)  # parents' rows (n: none)
    # the root first and every parent before its children (every live model): depths and
    # counts follow the parents' rows
    ordered = parents[0] is None and bool((ups < np.arange(1, n)).all())
    if ordered:
        depth = _depths(ups) + (0 if names[0] == "" else len(source.ancestors(names[0])) - 1)
    else:
        depths: list[int] = []
        for i, (name, parent) in enumerate(zip(names, parents)):  # pre-order: parents' depths come first
            up = index.get(parent, i) if parent is not None else i
            depths.append(depths[up] + 1 if up < i else len(source.ancestors(name)) - 1)
        depth = _int64(depths)
    # Every storage at one path (most models): a subtree's unique counts are its modules' own
    # counts added up. Otherwise each subtree counts its distinct storages.
    own = _own(source) if ordered else None
    if own is not None:
        params, trainable, param_bytes, buffer_bytes = _summed_up(own[:, :4], ups, depth).T
        own_params = own[:, 0]
    else:
        params, trainable, param_bytes, buffer_bytes, own_params = map(_int64, _distinct_per_subtree(source))
    # column by column: a dict per module row costs more than the counting
    return LAYERS.from_columns(
        {
            "index": np.arange(n, dtype=np.int64),
            "name": names,
            "parent": parents,
            "depth": depth,
            "type": modules["type"],
            "is_leaf": modules["is_leaf"],
            "alias_of": modules["alias_of"],
            "params": params,
            "own_params": own_params,
            "trainable_params": trainable,
            "frozen_params": params - trainable,
            "param_bytes": param_bytes,
            "buffer_bytes": buffer_bytes,
            "training": modules["training"],
            "attrs": modules["attrs"],
        },
        n,
    )


def _parents(source: ModelSource, names: Sequence[str], parents: list[str | None]) -> list[str | None]:
    """Each module's parent path: its entry's, else what the source says (a dotted name)."""
    i = -1
    try:
        while True:  # the modules without a parent in their entry (live models: the root only)
            i = parents.index(None, i + 1)
            # the root "" has none; source.parent would index every module's parent to say so
            parents[i] = None if names[i] == "" else source.parent(names[i])
    except ValueError:
        return parents


def _depths(ups: np.ndarray) -> np.ndarray:
    """Each module's depth below the first (row 0), from its parent's row (`ups`: rows 1..n-1,
    each parent before its child) by pointer jumping: a numpy step per doubling of the depth."""
    up = np.concatenate(([0], ups))  # the first is its own parent, at distance 0
    depth = np.ones(len(up), dtype=np.int64)
    depth[0] = 0
    while up.any():  # depth[i]: steps from row i to row up[i]
        depth += depth[up]
        up = up[up]
    return depth


def _summed_up(own: np.ndarray, ups: np.ndarray, depths: np.ndarray) -> np.ndarray:
    """Subtree counts when no storage is held at two paths: the modules' own counts (one row
    each, the root first, parents before children), each level's rows added into their
    parents' from the deepest level up, a numpy call per level. In pre-order the parents of a
    level's rows, in row order, never decrease: each parent's children are one run."""
    counts = own.copy()
    if len(ups):
        depth = depths[1:]
        order = np.argsort(-depth, kind="stable")  # deepest first, rows in order within a level
        for rows in np.split(order, np.flatnonzero(np.diff(depth[order])) + 1):
            parents = ups[rows]
            starts = np.flatnonzero(np.diff(parents, prepend=-1))
            counts[parents[starts]] += np.add.reduceat(counts[rows + 1], starts, axis=0)
    return counts


def _own(source: ModelSource) -> np.ndarray | None:
    """Per module (a row each, in `source.modules` order) its own parameters, trainable
    parameters, parameter bytes, buffer bytes and buffer elements (the columns of `_SUMS`),
    when every storage is held at one path and none overlaps another (most models): then
    `layers`, `by_type` and `totals` add these up, and the model's tensors are read once
    for the three. None otherwise, or when a tensor names a module the source does not list.
    Kept on the source."""
    memo = source.derived
    if "structure.own" not in memo:
        memo["structure.own"] = _own_counts(source)
    return memo["structure.own"]


def _own_counts(source: ModelSource) -> np.ndarray | None:
    if source.tied() or source.overlap_groups:  # a storage at two paths, or views that overlap
        return None
    columns = tensor_columns(source)
    n, k = len(source.module_columns["name"]), len(columns["name"])
    rows = np.fromiter(map(_index(source).get, columns["module"], repeat(-1)), dtype=np.int64, count=k)
    if k and rows.min() < 0:  # a tensor of a module the source does not list
        return None
    kinds = columns["kind"]
    if kinds.count(PARAMETER) == k:  # no buffer (many models)
        param = np.ones(k, dtype=bool)
    else:
        param = np.fromiter(map(eq, kinds, repeat(PARAMETER)), dtype=bool, count=k)
    trainable = param & np.fromiter(columns["requires_grad"], dtype=bool, count=k)  # truth values
    buffer = ~param
    numel, nbytes = columns["numel"], columns["bytes"]
    values = np.stack((numel * param, numel * trainable, nbytes * param, nbytes * buffer, numel * buffer), axis=1)
    out = np.zeros((n, len(_SUMS)), dtype=np.int64)
    if k and (rows[1:] >= rows[:-1]).all():  # each module's tensors together (a walk's order): a sum per run
        starts = np.flatnonzero(np.diff(rows, prepend=-1))
        out[rows[starts]] = np.add.reduceat(values, starts, axis=0)
    else:
        np.add.at(out, rows, values)
    return out


def _index(source: ModelSource) -> dict[str | None, int]:
    """Each module path's row, made once per source (for the layers and the own counts)."""
    memo = source.derived
    if "structure.index" not in memo:
        names = source.module_columns["name"]
        memo["structure.index"] = dict(zip(names, range(len(names))))
    return memo["structure.index"]


_Counts = tuple[list[int], list[int], list[int], list[int], list[int]]  # params, trainable, param/buffer bytes, own


def _distinct_per_subtree(source: ModelSource) -> _Counts:
    """Subtree counts of a model with shared storage: each subtree counts its distinct
    storages once (less the elements a partially overlapping view already holds)."""
    subtree = source.subtree_tensors()
    own: dict[str, dict[Any, TensorEntry]] = {m.name: {} for m in source.modules}
    tied = source.tied()
    overlapping = bool(source.overlap_groups)
    # own counts take shared elements at their first path, as totals do
    repeated = source.repeated_elements(source.unique_tensors()) if overlapping else {}
    for t in source.tensors:
        if t.name not in tied:  # a tied tensor is owned at its first path: own counts add up to the total
            own[t.module].setdefault(t.storage_key, t)
    params, trainable, param_bytes, buffer_bytes, own_params = [], [], [], [], []
    for m in source.modules:
        sums = _unique_sums(subtree[m.name], source.repeated_elements(subtree[m.name]) if overlapping else {})
        own_params.append(
            sum(t.numel - repeated.get(t.storage_key, 0) for t in own[m.name].values() if t.kind == PARAMETER)
        )
        params.append(sums["params"])
        trainable.append(sums["trainable_params"])
        param_bytes.append(sums["param_bytes"])
        buffer_bytes.append(sums["buffer_bytes"])
    return params, trainable, param_bytes, buffer_bytes, own_params


@on_receiving_rank(0)
def by_type(model: Any) -> pd.DataFrame:
    """Parameters grouped by the type of the module that first owns them (schema.BY_TYPE)."""
    source = as_source(model)
    types, aliases = source.module_columns["type"], source.module_columns["alias_of"]
    code = dict(zip(dict.fromkeys(types), itertools.count()))  # each type's group, in order of appearance
    codes = np.fromiter(map(code.__getitem__, types), dtype=np.int64, count=len(types))
    if aliases.count(None) != len(aliases):  # a module at two paths: counted at its first
        codes_first = codes[np.fromiter(map(is_, aliases, repeat(None)), dtype=bool, count=len(aliases))]
    else:
        codes_first = codes
    counts = np.bincount(codes_first, minlength=len(code)).tolist()
    groups = {name: {"modules": n, "params": 0, "param_bytes": 0} for name, n in zip(code, counts)}
    total = 0
    own = _own(source)
    if own is not None:  # each module's own parameters, counted once for layers and totals too
        sums = np.zeros((len(groups), 2), dtype=np.int64)
        np.add.at(sums, codes, own[:, [0, 2]])
        for g, (numel, nbytes) in zip(groups.values(), sums.tolist()):
            g["params"] += numel
            g["param_bytes"] += nbytes
        total = int(own[:, 0].sum())
    else:
        type_of = dict(zip(source.module_columns["name"], types))
        unique = source.unique_tensors()
        repeated = source.repeated_elements(unique)
        for t in unique.values():
            if t.kind == PARAMETER:
                g = groups[type_of[t.module]]
                numel, nbytes = _counted(t, repeated) if repeated else (t.numel, t.nbytes)
                g["params"] += numel
                g["param_bytes"] += nbytes
                total += numel
    rows: list[dict[str, Any]] = [
        {"type": name, **g, "share": 100.0 * g["params"] / total} for name, g in groups.items() if g["params"] > 0
    ]
    rows.sort(key=lambda r: (-r["params"], r["type"]))
    return BY_TYPE.build(rows)


@on_receiving_rank(0)
def totals(model: Any) -> dict[str, int]:
    """Model-wide counts (keys: schema.STRUCTURE_TOTALS); shared storage counted once."""
    source = as_source(model)
    own = _own(source)
    if own is not None:  # every storage at one path: the modules' own counts add up to the totals
        sums = dict(zip(_SUMS, own.sum(axis=0).tolist()))
        by_path = sums["params"]
    else:
        unique = source.unique_tensors()
        sums = _unique_sums(unique, source.repeated_elements(unique))
        by_path = sum(t.numel for t in source.tensors if t.kind == PARAMETER)
    return {
        "total_params": sums["params"],
        "trainable_params": sums["trainable_params"],
        "non_trainable_params": sums["params"] - sums["trainable_params"],
        "total_params_by_path": by_path,
        "buffer_numel": sums["buffer_numel"],
        "param_bytes": sums["param_bytes"],
        "buffer_bytes": sums["buffer_bytes"],
        "num_modules": source.module_columns["alias_of"].count(None),
    }
