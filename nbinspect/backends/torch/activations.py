"""Activation memory: the tensors autograd saves for backward, attributed to module calls.

``torch.autograd.graph.saved_tensors_hooks`` shows every tensor an op saves. Each storage
is counted once (views of one buffer, or one tensor saved by two ops, cost memory once),
at the call that saved it first. Parameters, buffers and the model's own inputs are not
activations and are left out. On meta or fake tensors a storage's size comes from its
shape and element size, so the figure is what a real run would hold, with nothing
allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from ...core.trace import OWN_ACTIVATION_BYTES

__all__ = ["SavedTensorMeter", "storage_id", "storage_ids"]


# The address of a tensor's storage, read in C without making a Storage object (3x
# cheaper than ``t.untyped_storage()._cdata``, the same number); absent on other builds.
_c_storage_id: Callable[[torch.Tensor], int] | None = getattr(torch._C, "_storage_id", None)


def storage_id(t: torch.Tensor) -> int:
    """Identifies the memory a tensor lives in; views of one storage share it. Tensors
    without a plain storage (sparse, nested, some subclasses) stand for themselves."""
    try:
        return _c_storage_id(t) if _c_storage_id is not None else t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, TypeError):
        return id(t)


def storage_ids(tensors: list[torch.Tensor]) -> set[int]:
    """``{storage_id(t) for t in tensors}``, in one C-level pass when every tensor has a storage."""
    if _c_storage_id is not None:
        try:
            return set(map(_c_storage_id, tensors))
        except (RuntimeError, NotImplementedError, TypeError):
            pass  # a sparse or other storage-less tensor among them: one at a time
    return {storage_id(t) for t in tensors}


class SavedTensorMeter:
    """Context manager: adds the bytes of each newly saved storage to the
    ``own_activation_bytes`` of the call on top of `stack` (`outside` when it is empty; rows,
    see ``core.trace.ROW``).
    ``exclude`` are storages that are not activations. ``pack`` is the one place that
    counts: the trace's shortcut for plain ``Linear`` calls (see .linear_shortcut), which
    runs them with the hooks quiet, hands it the tensors autograd saved.

    Storages are known by address, so each counted tensor is kept until the meter exits:
    a saved tensor freed during the pass (a branch the forward dropped) would otherwise
    free its address for the next storage, which would then go uncounted."""

    def __init__(self, stack: list, outside: Any, exclude: Iterable[int] = ()):
        seen: dict[int, torch.Tensor | None] = dict.fromkeys(exclude)
        self._seen = seen

        def pack(t: torch.Tensor) -> torch.Tensor:  # runs for every saved tensor: locals only
            try:
                key = _c_storage_id(t) if _c_storage_id is not None else t.untyped_storage()._cdata
            except (RuntimeError, NotImplementedError, TypeError):  # no plain storage: the tensor stands for itself
                if id(t) not in seen:
                    seen[id(t)] = t
                    (stack[-1] if stack else outside)[OWN_ACTIVATION_BYTES] += t.nbytes
                return t
            if key not in seen:
                seen[key] = t
                (stack[-1] if stack else outside)[OWN_ACTIVATION_BYTES] += t.untyped_storage().nbytes()
            return t

        self.pack = pack
        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, _unpack)

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)
        self._seen.clear()  # the tensors kept alive, let go


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t
