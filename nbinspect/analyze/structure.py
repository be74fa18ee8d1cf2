"""Structure analyzers: what a model is made of, without running it.

Every function takes a model (or anything :func:`nbinspect.sources.as_source` accepts) and
returns a fresh DataFrame or dict. Shared storage (tied weights, a module registered at two
paths) is counted once wherever a total is given; the per-path view is kept alongside.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..schema import BY_TYPE, LAYERS, PARAMETER, PARAMS
from ..sources import TensorEntry, as_source
from .distributed import on_receiving_rank

__all__ = ["by_type", "layers", "params", "totals"]


@on_receiving_rank(0)
def params(model: Any) -> pd.DataFrame:
    """One row per parameter and buffer path (schema.PARAMS), with `tied_to` for shared storage."""
    source = as_source(model)
    tied, overlaps = source.tied(), source.overlaps()
    rows = []
    for t in source.tensors:
        rows.append(
            {
                "name": t.name,
                "module": t.module,
                "kind": t.kind,
                "shape": t.shape,
                "dtype": t.dtype,
                "device": t.device,
                "numel": t.numel,
                "bytes": t.nbytes,
                "requires_grad": t.requires_grad,
                "tied_to": tied.get(t.name),
                "overlaps": overlaps.get(t.name),
            }
        )
    return PARAMS.build(rows)


def _counted(t: TensorEntry, repeated: dict[Any, int]) -> tuple[int, int]:
    """(elements, bytes) of `t` less those an earlier, partially overlapping view holds."""
    n = repeated.get(t.storage_key, 0)
    if not n:
        return t.numel, t.nbytes
    return t.numel - n, t.nbytes - n * (t.nbytes // t.numel)


def _unique_sums(entries: dict[Any, TensorEntry], repeated: dict[Any, int]) -> dict[str, int]:
    out = {"params": 0, "trainable_params": 0, "param_bytes": 0, "buffer_bytes": 0, "buffer_numel": 0}
    for t in entries.values():
        numel, nbytes = _counted(t, repeated) if repeated else (t.numel, t.nbytes)
        if t.kind == PARAMETER:
            out["params"] += numel
            out["param_bytes"] += nbytes
            out["trainable_params"] += numel if t.requires_grad else 0
        else:
            out["buffer_bytes"] += nbytes
            out["buffer_numel"] += numel
    return out


@on_receiving_rank(0)
def layers(model: Any) -> pd.DataFrame:
    """One row per module path in pre-order (schema.LAYERS). Subtree counts are unique."""
    source = as_source(model)
    subtree = source.subtree_tensors()
    own: dict[str, dict[Any, TensorEntry]] = {m.name: {} for m in source.modules}
    tied = source.tied()
    overlapping = bool(source.overlap_groups)
    # own counts take shared elements at their first path, as totals do
    repeated = source.repeated_elements(source.unique_tensors()) if overlapping else {}
    for t in source.tensors:
        if t.name not in tied:  # a tied tensor is owned at its first path: own counts add up to the total
            own[t.module].setdefault(t.storage_key, t)
    modules = source.modules
    parents, depths, own_params = [], [], []
    params, trainable, param_bytes, buffer_bytes = [], [], [], []
    depth_of: dict[str, int] = {}  # pre-order: a parent's depth is known before its children's
    for m in modules:
        sums = _unique_sums(subtree[m.name], source.repeated_elements(subtree[m.name]) if overlapping else {})
        parent = m.parent if m.parent is not None else source.parent(m.name)  # the entry's own: no lookup
        depth = depth_of[m.name] = depth_of[parent] + 1 if parent in depth_of else len(source.ancestors(m.name)) - 1
        parents.append(parent)
        depths.append(depth)
        own_params.append(
            sum(t.numel - repeated.get(t.storage_key, 0) for t in own[m.name].values() if t.kind == PARAMETER)
        )
        params.append(sums["params"])
        trainable.append(sums["trainable_params"])
        param_bytes.append(sums["param_bytes"])
        buffer_bytes.append(sums["buffer_bytes"])
    # column by column: a dict per module row costs more than the counting
    return LAYERS.from_columns(
        {
            "index": list(range(len(modules))),
            "name": [m.name for m in modules],
            "parent": parents,
            "depth": depths,
            "type": [m.type for m in modules],
            "is_leaf": [m.is_leaf for m in modules],
            "alias_of": [m.alias_of for m in modules],
            "params": params,
            "own_params": own_params,
            "trainable_params": trainable,
            "frozen_params": [p - t for p, t in zip(params, trainable)],
            "param_bytes": param_bytes,
            "buffer_bytes": buffer_bytes,
            "training": [m.training for m in modules],
            "attrs": [m.attrs for m in modules],
        },
        len(modules),
    )


@on_receiving_rank(0)
def by_type(model: Any) -> pd.DataFrame:
    """Parameters grouped by the type of the module that first owns them (schema.BY_TYPE)."""
    source = as_source(model)
    type_of = {m.name: m.type for m in source.modules}
    groups: dict[str, dict[str, int]] = {}
    for m in source.modules:
        if m.alias_of is None:
            groups.setdefault(m.type, {"modules": 0, "params": 0, "param_bytes": 0})["modules"] += 1
    total = 0
    unique = source.unique_tensors()
    repeated = source.repeated_elements(unique)
    for t in unique.values():
        if t.kind == PARAMETER:
            g = groups[type_of[t.module]]
            numel, nbytes = _counted(t, repeated)
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
    unique = source.unique_tensors()
    sums = _unique_sums(unique, source.repeated_elements(unique))
    return {
        "total_params": sums["params"],
        "trainable_params": sums["trainable_params"],
        "non_trainable_params": sums["params"] - sums["trainable_params"],
        "total_params_by_path": sum(t.numel for t in source.tensors if t.kind == PARAMETER),
        "buffer_numel": sums["buffer_numel"],
        "param_bytes": sums["param_bytes"],
        "buffer_bytes": sums["buffer_bytes"],
        "num_modules": sum(1 for m in source.modules if m.alias_of is None),
    }
