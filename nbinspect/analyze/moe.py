"""Mixture-of-experts models: routed experts found in the module tree, the parameters one
token activates, and per-expert views of fused expert tensors.

Two layouts are recognised, on live models, meta models and checkpoints alike:

- **fused** (transformers 5, and most new code): one module holds each projection of all
  its experts as one tensor with the experts along dim 0, e.g. ``gate_up_proj`` of shape
  ``[256, 4096, 7168]``. A module is taken for one when all its own parameters share that
  leading size, at least one has 3 dimensions, and its name, type or ``num_experts``
  attribute says experts.
- **modules** (older code): a module named like ``experts`` whose children are numbered
  ``0..E-1`` and equal in size, one ``nn.Linear`` (or MLP) per expert.

A token uses ``top_k`` routed experts per layer (read from the router, the block, the
model's config, or given), plus everything that is not a routed expert: attention, shared
experts, routers, norms, embeddings. So the activated parameters per token are
``total - routed + sum(top_k * expert_params)``, with embeddings counted whole as model
cards count them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..backends import ModelSource, ModuleEntry, TensorEntry, as_source
from ..core.gc_pause import gc_paused
from ..schema import EXPERT_CHANGES, MOE, PARAMETER
from .compare import by_module, compare_frame
from .structure import tensor_columns

__all__ = ["ExpertGroup", "expert_changes", "expert_groups", "moe_frame", "moe_totals", "split_experts"]

TOP_K_KEYS = ("top_k", "num_experts_per_tok", "moe_top_k", "topk", "experts_per_token", "num_selected_experts")


class ExpertGroup(NamedTuple):
    """The routed experts of one layer."""

    path: str  # the module holding them
    layout: str  # "fused" or "modules"
    experts: int
    expert_params: int
    top_k: int | None
    shared_params: int


def _says_experts(m: ModuleEntry) -> bool:
    last = m.name.rpartition(".")[2].lower()
    return "expert" in last or "expert" in m.type.lower()


def _may_say_experts(modules: Mapping[str, Sequence[Any]]) -> bool:
    """False only if no module's name or type says "expert" (:func:`_says_experts`), from the
    modules' columns."""
    return "expert" in "\n".join([*set(modules["type"]), *modules["name"]]).lower()


def _fused_size(m: ModuleEntry, own: list[TensorEntry]) -> int | None:
    """E when `m` holds fused experts (every own parameter [E, ...], one of them 3-D)."""
    shapes = [t.shape for t in own if t.kind == PARAMETER]
    full = [s for s in shapes if s is not None and len(s) >= 2]
    if not shapes or len(full) < len(shapes) or not any(len(s) >= 3 for s in full):
        return None
    sizes = {s[0] for s in full}
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    if size < 2 or "shared" in m.name.rpartition(".")[2].lower():
        return None
    return size if m.attrs.get("num_experts") == size or _says_experts(m) else None


def _top_k(source: ModelSource, path: str, by_name: dict[str, ModuleEntry], children: dict[str, list[str]]) -> Any:
    block = path.rpartition(".")[0]
    for name in (path, block, *children.get(block, ())):
        attrs = by_name[name].attrs if name in by_name else {}
        for key in TOP_K_KEYS:
            if isinstance(attrs.get(key), int) and not isinstance(attrs.get(key), bool):
                return attrs[key]
    config = getattr(source.model, "config", None)
    for key in TOP_K_KEYS:
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _subtree_params(source: ModelSource) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in source.unique_tensors(PARAMETER).values():
        for path in source.ancestors(t.module):
            out[path] = out.get(path, 0) + t.numel
    return out


def expert_groups(model: Any, top_k: int | None = None) -> list[ExpertGroup]:
    """The routed-expert groups of `model` in tree order. `top_k` overrides what the model says."""
    source = as_source(model)
    # fused experts hold a 3-D parameter; expert modules say so in their name or type. Most
    # models have no tensor of 3 dimensions: the shapes column (kept on the source for the
    # params frame) says so in C before a scan of the tensors
    deep: set[str] = set()
    if max(map(len, filter(None, tensor_columns(source)["shape"])), default=0) >= 3:
        deep = {t.module for t in source.tensors if t.shape is not None and len(t.shape) >= 3 and t.kind == PARAMETER}
    # most models: no name or type says "expert" (one test over the joined text, not one
    # per module; a name's last part lies inside it) and no 3-D parameter
    if not deep and not _may_say_experts(source.module_columns):
        return []
    candidates = [m for m in source.modules if m.name in deep or _says_experts(m)]
    if not candidates:  # nothing more to look at
        return []
    by_name = {m.name: m for m in source.modules}
    children: dict[str, list[str]] = {}
    for m in source.modules[1:]:
        children.setdefault(m.name.rpartition(".")[0], []).append(m.name)
    own: dict[str, list[TensorEntry]] = {}
    for t in source.tensors:
        own.setdefault(t.module, []).append(t)
    # subtree parameter counts: summed on first use, once a module looks like an expert group
    params = functools.cache(lambda: _subtree_params(source))
    groups = []
    for m in candidates:
        layout, size, per_expert = None, _fused_size(m, own.get(m.name, [])), 0
        if size is not None:
            layout, per_expert = "fused", params().get(m.name, 0) // size
        else:
            kids = children.get(m.name, [])
            keys = [k.rpartition(".")[2] for k in kids]
            if (
                len(kids) >= 2
                and _says_experts(m)
                and "shared" not in m.name.rpartition(".")[2].lower()
                and keys == [str(i) for i in range(len(kids))]
                and len({params().get(k, 0) for k in kids}) == 1
                and not any(t.kind == PARAMETER for t in own.get(m.name, []))
            ):
                layout, size, per_expert = "modules", len(kids), params().get(kids[0], 0)
        if layout is None or size is None:
            continue
        block = m.name.rpartition(".")[0]
        shared = sum(params().get(s, 0) for s in children.get(block, []) if "shared" in s.rpartition(".")[2].lower())
        k = top_k if top_k is not None else _top_k(source, m.name, by_name, children)
        groups.append(ExpertGroup(m.name, layout, size, per_expert, k, shared))
    return [g for g in groups if not any(g.path.startswith(o.path + ".") for o in groups)]


def moe_frame(groups: list[ExpertGroup]) -> pd.DataFrame:
    """One row per expert group (schema.MOE)."""
    return MOE.build(
        {
            "name": g.path,
            "layout": g.layout,
            "experts": g.experts,
            "top_k": g.top_k,
            "expert_params": g.expert_params,
            "routed_params": g.experts * g.expert_params,
            "activated_params": None if g.top_k is None else g.top_k * g.expert_params,
            "shared_params": g.shared_params,
        }
        for g in groups
    )


def moe_totals(total_params: int, groups: list[ExpertGroup]) -> dict[str, Any]:
    """Total and activated parameters; activated is None when some layer's top_k is unknown."""
    routed = sum(g.experts * g.expert_params for g in groups)
    known = all(g.top_k is not None for g in groups)
    used = sum((g.top_k or 0) * g.expert_params for g in groups)
    activated = total_params - routed + used if known else None
    return {
        "total_params": total_params,
        "activated_params": activated,
        "routed_params": routed,
        "dense_params": total_params - routed,
        "moe_layers": len(groups),
        "routed_experts": sum(g.experts for g in groups),
        "top_k": sorted({g.top_k for g in groups if g.top_k is not None}),
        "experts_per_layer": sorted({g.experts for g in groups}),
    }


# ---------------------------------------------------------------- per-expert rows


def _slice_loader(entry: TensorEntry, index: int) -> Any:
    def load() -> Any:
        return entry.values()[index]

    return load


@gc_paused()
def split_experts(model: Any, groups: list[ExpertGroup] | None = None) -> ModelSource:
    """`model` as a source with one module per routed expert: each fused ``[E, ...]`` tensor
    of module ``P`` becomes E tensors ``P.<e>.<name>`` (views of row e, read when needed), so
    the tree, statistics and comparisons have one row per expert; repeated experts fold like
    repeated blocks. Module-per-expert models come back as they are."""
    source = as_source(model)
    if source.collective is not None:
        raise ValueError(
            "split_experts: per-expert rows of a sharded model are not supported; "
            "save it with torch.distributed.checkpoint and inspect the folder"
        )
    groups = expert_groups(source) if groups is None else groups
    fused = {g.path: g.experts for g in groups if g.layout == "fused"}
    if not fused:
        return source
    modules: list[ModuleEntry] = []
    for m in source.modules:
        if m.name in fused:
            modules.append(dataclasses.replace(m, is_leaf=False))
            modules += [
                ModuleEntry(f"{m.name}.{e}", f"{m.type} expert", True, m.training, {}) for e in range(fused[m.name])
            ]
        else:
            modules.append(m)

    def splits(t: TensorEntry) -> bool:
        return t.module in fused and bool(t.shape) and t.shape[0] == fused[t.module]  # type: ignore[index]

    expected: dict[str, int] = {}
    for t in source.tensors:
        if splits(t):
            expected[t.module] = expected.get(t.module, 0) + 1
    tensors: list[TensorEntry] = []
    pending: dict[str, list[TensorEntry]] = {}
    for t in source.tensors:  # a module's fused tensors become its experts' tensors, expert by expert
        if not splits(t):
            tensors.append(t)
            continue
        pending.setdefault(t.module, []).append(t)
        if len(pending[t.module]) == expected[t.module]:
            tensors += _expert_entries(pending.pop(t.module), fused[t.module])
    return dataclasses.replace(source, modules=tuple(modules), tensors=tuple(tensors))


def _expert_entries(fused: list[TensorEntry], experts: int) -> list[TensorEntry]:
    out = []
    for e in range(experts):
        for t in fused:
            shape = t.shape[1:]  # type: ignore[index]  # fused tensors have a shape
            out.append(
                TensorEntry(
                    f"{t.module}.{e}.{t.name.rpartition('.')[2]}",
                    f"{t.module}.{e}",
                    t.kind,
                    shape,
                    t.dtype,
                    t.device,
                    t.numel // experts,
                    t.nbytes // experts,
                    t.requires_grad,
                    (t.storage_key, e),
                    _slice_loader(t, e),
                    t.release_hook,
                )
            )
    return out


def expert_changes(a: Any, b: Any, dead_below: float = 0.01) -> pd.DataFrame:
    """How far each routed expert moved from `a` to `b` (schema.EXPERT_CHANGES), e.g. two
    checkpoints of one training run. An expert is *dead* when its weights did not move, or
    moved less than `dead_below` times the median expert of its layer: the router never
    sent it tokens, so no gradient reached it."""
    src_a, src_b = as_source(a), as_source(b)
    groups = expert_groups(src_a)
    if not groups:
        raise ValueError(f"expert_changes: {src_a.name} has no routed experts (no fused expert tensors or experts.N)")
    rolled = by_module(compare_frame(split_experts(src_a, groups), split_experts(src_b, groups))).set_index("group")
    rows = []
    for g in groups:
        names = [f"{g.path}.{e}" for e in range(g.experts)]
        part = rolled.reindex(names)
        rel = part["rel_change"].to_numpy(dtype=np.float64, na_value=np.nan)
        median = float(np.nanmedian(rel)) if np.isfinite(rel).any() else np.nan
        for e, (_, row) in enumerate(part.iterrows()):
            ratio = row["rel_change"] / median if median > 0 else np.nan
            dead = bool(row["rel_change"] == 0 or (median > 0 and ratio < dead_below))
            rows.append(
                {
                    "group": g.path,
                    "expert": e,
                    "numel": row["numel"],
                    "l2_a": row["l2_a"],
                    "l2_delta": row["l2_delta"],
                    "rel_change": row["rel_change"],
                    "vs_median": ratio,
                    "dead": dead,
                }
            )
    return EXPERT_CHANGES.build(rows)
