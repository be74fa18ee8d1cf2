"""Parameters and buffers of a bare state_dict, told apart by the optimizer state saved with it.

A state_dict does not say which tensors are parameters: a floating buffer (a sinusoidal
``freqs``, a mask) looks like a weight. A training checkpoint often holds the optimizer's
state too, whose per-parameter moments (``exp_avg``, ``momentum_buffer``, ...) have the shapes
of the trained parameters, in the model's parameter order. Those shapes are matched as a
subsequence of the weights' shapes (file order, one entry per storage): when the match is
unique (its leftmost and rightmost embeddings coincide), the matched tensors are the trained
parameters and the other floating tensors are buffers. A frozen parameter is not in the
optimizer, so it is counted with the buffers; the note says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..core.tree import StoredTensor
from ..schema import BUFFER, PARAMETER

__all__ = ["optimizer_shapes", "with_optimizer_kinds"]

# the state entry with the parameter's shape, per torch.optim optimizer (Adam*, NAdam, RAdam,
# Adamax; SGD; RMSprop, Adadelta; Adagrad; Rprop; ASGD)
_MOMENT_KEYS = ("exp_avg", "momentum_buffer", "square_avg", "sum", "exp_avg_sq", "prev", "ax")
_FLOATING = ("float", "bfloat", "complex")


def _optimizer_states(obj: Mapping) -> list[Mapping]:
    """The optimizer state_dicts among a checkpoint's entries (Lightning keeps a list of them)."""
    found = []
    for value in obj.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, Mapping) and isinstance(item.get("state"), Mapping) and "param_groups" in item:
                found.append(item)
    return found


def optimizer_shapes(obj: Mapping) -> tuple[list[tuple[int, ...]] | None, str]:
    """(the shapes of the parameters the one optimizer state of `obj` trains, in the model's
    order, or None; why not, when None). A single param group only: several groups list
    their parameters group by group, which is not the model's order."""
    states = _optimizer_states(obj)
    if len(states) != 1:
        return None, "" if not states else f"{len(states)} optimizer states"
    state, groups = states[0]["state"], states[0]["param_groups"]
    if not isinstance(groups, Sequence) or len(groups) != 1 or not isinstance(groups[0], Mapping):
        return None, "the optimizer's param groups do not give the model's parameter order"
    params = groups[0].get("params")
    if not isinstance(params, (list, tuple)):
        return None, "the optimizer's param group lists no parameters"
    shapes = []
    for index in params:
        entry = state.get(index) if isinstance(index, (int, str)) else None  # a file may hold anything here
        moment = next((entry[k] for k in _MOMENT_KEYS if k in entry), None) if isinstance(entry, Mapping) else None
        if not isinstance(moment, torch.Tensor):
            return None, "the optimizer holds no moment for every parameter"
        shapes.append(tuple(moment.shape))
    return (shapes, "") if shapes else (None, "the optimizer trains no parameter")


def _embedding(shapes: list[tuple[int, ...]], wanted: list[tuple[int, ...]], order: range) -> list[int] | None:
    """Positions of `wanted` in `shapes` matched greedily in `order` (left or right first)."""
    found, todo = [], iter(range(len(wanted)) if order.step > 0 else range(len(wanted) - 1, -1, -1))
    need = next(todo, None)
    for i in order:
        if need is None:
            break
        if shapes[i] == wanted[need]:
            found.append(i)
            need = next(todo, None)
    return None if need is not None else sorted(found)


def with_optimizer_kinds(
    stored: list[StoredTensor], shapes: list[tuple[int, ...]] | None, why: str = ""
) -> tuple[list[StoredTensor], str]:
    """(`stored` with each floating tensor's kind set from the optimizer's parameter `shapes`,
    a note saying how kinds were decided); `stored` unchanged when the match is not unique."""
    if shapes is None:
        return stored, f"kinds by name ({why})" if why else ""
    first: dict[Any, int] = {}
    for i, t in enumerate(stored):
        if t.dtype.startswith(_FLOATING):
            first.setdefault(t.storage_key, i)
    candidates = sorted(first.values())
    cand_shapes = [stored[i].shape for i in candidates]
    left = _embedding(cand_shapes, shapes, range(len(candidates)))
    right = _embedding(cand_shapes, shapes, range(len(candidates) - 1, -1, -1))
    if left is None:
        return stored, "kinds by name (the optimizer's parameter shapes are not those of the weights)"
    if left != right:
        return stored, "kinds by name (the optimizer's parameter shapes fit the weights in more than one way)"
    trained = {stored[candidates[i]].storage_key for i in left}
    out = [
        dataclasses.replace(t, kind=PARAMETER if t.storage_key in trained else BUFFER)
        if t.dtype.startswith(_FLOATING)
        else t
        for t in stored
    ]
    others = len(candidates) - len(left)
    note = f"from the optimizer state: the {len(left)} tensors it trains are parameters"
    if others:
        note += f", the other {others} floating tensor(s) buffers (a frozen parameter would be among them)"
    return out, note
