"""A model sharded across processes (``DTensor`` parameters: FSDP2 ``fully_shard``,
``distribute_tensor``, tensor-parallel plans) as a source.

Every rank runs the same code on the same module tree. Shapes, counts and bytes are
*global*: a DTensor's shape is the unsharded shape. Values are each rank's *contribution*:
its local shard where a tensor is sharded, the whole tensor on one rank only where it is
replicated (the ranks at coordinate 0 of every replicated mesh dimension), so that adding
the contributions of all ranks covers every element exactly once. ``Partial`` placements
are summed across ranks (``redistribute``) before their values are read. Plain tensors of a
sharded model (FSDP2 keeps buffers plain) count as replicated: rank 0 of the group
contributes them.

The analyzers combine the contributions with ``torch.distributed`` collectives
(``analyze/distributed.py``); every rank must call the same analysis in the same order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
from torch import nn

from ...core.source import ModelSource
from ..torch.source import from_module

__all__ = ["DistributedSource", "LocalPart", "from_sharded_module", "is_sharded_module"]


class LocalPart(NamedTuple):
    """Where this rank's contribution sits in the global tensor."""

    offsets: tuple[int, ...]  # global index of the local block's first element
    shape: tuple[int, ...]  # the local block's shape
    owner: bool  # this rank contributes the block (False: another rank holds the same elements)
    placements: str  # e.g. "Shard(dim=0)", "Replicate()", "plain"
    full: Callable[[], torch.Tensor] | None  # the whole global tensor (a collective), for realigning


@dataclass(frozen=True)
class DistributedSource(ModelSource):
    """A source whose tensors are split across the ranks of `group` (None: the default group).
    `rank` is the rank that receives the analyzers' frames (None: every rank)."""

    group: Any = field(default=None, repr=False, compare=False)
    rank: int | None = 0
    parts: Mapping[str, LocalPart] = field(default_factory=dict, repr=False, compare=False)

    @property
    def collective(self) -> Any:
        from .reduce import Ranks

        return Ranks(self)


def _dtensor_type() -> type | None:
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    from torch.distributed.tensor import DTensor

    return DTensor


def is_sharded_module(model: nn.Module) -> bool:
    """True when a process group is up and some parameter or buffer of `model` is a DTensor."""
    dtensor = _dtensor_type()
    if dtensor is None:
        return False
    return any(isinstance(t, dtensor) for t in (*model.parameters(), *model.buffers()))


def _reduced(t: Any) -> Any:
    """A DTensor with its Partial placements summed across ranks (a collective)."""
    from torch.distributed.tensor import Replicate

    if any(p.is_partial() for p in t.placements):
        return t.redistribute(t.device_mesh, [Replicate() if p.is_partial() else p for p in t.placements])
    return t


def _dtensor_part(t: Any) -> LocalPart:
    # DCP and the DTensor internals use this helper to place a local shard in the global tensor.
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    mesh, placements = t.device_mesh, t.placements
    coordinate = mesh.get_coordinate()
    shape, offsets = compute_local_shape_and_global_offset(t.shape, mesh, placements)
    owner = coordinate is not None and all(c == 0 for c, p in zip(coordinate, placements) if not p.is_shard())
    return LocalPart(
        tuple(offsets),
        tuple(shape),
        owner,
        ", ".join(map(str, placements)),
        lambda: _reduced(t).full_tensor().detach(),
    )


def _contribution(t: Any, owner: bool, sharded: bool) -> Callable[[], torch.Tensor]:
    """A loader for this rank's share of `t`'s values: empty when another rank holds them."""

    def load() -> torch.Tensor:
        local = _reduced(t).to_local().detach() if sharded else t.detach()
        return local if owner else local.reshape(-1)[:0]

    return load


def _module_type(module: nn.Module) -> str:
    """The user's class name: FSDP2 swaps a module's class for a subclass named FSDP<cls>."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # an old torch without FSDP2
        return type(module).__name__
    if isinstance(module, FSDPModule):
        return next(c for c in type(module).__mro__ if not issubclass(c, FSDPModule)).__name__
    return type(module).__name__


def from_sharded_module(
    model: nn.Module, name: str | None = None, *, rank: int | None = 0, group: Any = None
) -> DistributedSource:
    """The source of a model with DTensor parameters; global shapes, per-rank contributions.
    `rank` receives the frames (None: every rank); `group` is the process group whose ranks
    hold the shards (None: the default group)."""
    import torch.distributed as dist

    dtensor = _dtensor_type()
    if dtensor is None:
        raise ValueError("a sharded model needs torch.distributed initialised (init_process_group) on every rank")
    if rank is not None and not 0 <= rank < dist.get_world_size(group):
        raise ValueError(f"rank={rank}: the group has ranks 0..{dist.get_world_size(group) - 1}")
    plain = from_module(model, name or _module_type(model))
    me = dist.get_rank(group)
    by_path: dict[str, Any] = {
        p: t for m_path, m in model.named_modules(remove_duplicate=False) for p, t in _own_tensors(m_path, m)
    }
    tensors, parts = [], {}
    for entry in plain.tensors:
        t: Any = by_path[entry.name]
        sharded = isinstance(t, dtensor)
        if sharded:
            part = _dtensor_part(t)
            local = t.to_local()
            key: Any = ("dtensor", id(t))
            device = str(local.device)
        else:
            shape = tuple(t.shape)
            part = LocalPart((0,) * len(shape), shape, me == 0, "plain", t.detach)
            key, device = entry.storage_key, entry.device
        parts[entry.name] = part
        loader = _contribution(t, part.owner, sharded)
        tensors.append(dataclasses.replace(entry, tensor=loader, storage_key=key, device=device))
    modules = tuple(
        dataclasses.replace(m, type=_module_type(module))
        for m, (_, module) in zip(plain.modules, model.named_modules(remove_duplicate=False))
    )
    world = dist.get_world_size(group)
    n_sharded = sum(1 for p in parts.values() if p.placements != "plain")
    metadata = {
        "distributed": f"{world} ranks (this is rank {me}); {n_sharded} of {len(parts)} tensors are DTensors",
        "placements": ", ".join(sorted({p.placements for p in parts.values()})),
    }
    return DistributedSource(
        name=plain.name,
        framework=plain.framework,
        modules=modules,
        tensors=tuple(tensors),
        model=model,
        metadata=metadata,
        group=group,
        rank=rank,
        parts=parts,
    )


def _own_tensors(path: str, module: nn.Module) -> list[tuple[str, Any]]:
    prefix = f"{path}." if path else ""
    own = [(prefix + k, v) for k, v in module._parameters.items() if v is not None]
    return own + [(prefix + k, v) for k, v in module._buffers.items() if v is not None]
