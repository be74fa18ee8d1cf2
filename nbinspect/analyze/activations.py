"""Activation memory: the tensors autograd saves for backward, attributed to module calls.

``torch.autograd.graph.saved_tensors_hooks`` shows every tensor an op saves. Each storage
is counted once (views of one buffer, or one tensor saved by two ops, cost memory once),
at the call that saved it first. Parameters, buffers and the model's own inputs are not
activations and are left out. On meta or fake tensors a storage's size comes from its
shape and element size, so the figure is what a real run would hold, with nothing
allocated.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["SavedTensorMeter", "storage_id", "storage_ids"]


def storage_id(t: torch.Tensor) -> int:
    """Identifies the memory a tensor lives in; views of one storage share it. Tensors
    without a plain storage (sparse, nested, some subclasses) stand for themselves."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, TypeError):
        return id(t)


def storage_ids(tensors: list[torch.Tensor]) -> set[int]:
    """``{storage_id(t) for t in tensors}``, in C when every tensor has a plain storage."""
    try:
        return set(map(_CDATA, map(torch.Tensor.untyped_storage, tensors)))
    except (RuntimeError, NotImplementedError, TypeError):
        return {storage_id(t) for t in tensors}


_CDATA = operator.attrgetter("_cdata")


class SavedTensorMeter:
    """Context manager: adds the bytes of each newly saved storage to the
    ``own_activation_bytes`` of the call on top of `stack` (`outside` when it is empty).
    ``exclude`` are storages that are not activations.

    While a call is open the pack hook only notes (tensor, call): one Python call per saved
    tensor is autograd's floor, and reading storages there costs as much again. The notes
    are counted by :meth:`flush`, which the recorder calls when the model's outermost call
    returns (so nothing is held past the forward pass that saved it: autograd's graph holds
    it that long anyway), and on exit. Holding the tensors until then also keeps a freed
    storage's id from being reused by a later one and wrongly counted as seen."""

    def __init__(self, stack: list, outside: Any, exclude: Iterable[int] = ()):
        self.stack = stack
        self.outside = outside
        self.seen = set(exclude)
        self.pending: list[tuple[torch.Tensor, Any]] = []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        stack = self.stack
        if stack:
            self.pending.append((t, stack[-1]))
        else:  # saved outside the model (a loss in a watched block): nothing to wait for
            self.pending.append((t, self.outside))
            self.flush()
        return t

    def flush(self) -> None:
        """Count the tensors saved since the last flush, in the order they were saved."""
        pending, self.pending = self.pending, []
        seen = self.seen
        for t, call in pending:
            try:  # storage_id, inlined: this runs for every saved tensor
                storage = t.untyped_storage()
            except (RuntimeError, NotImplementedError, TypeError):
                storage = None
            key = id(t) if storage is None else storage._cdata
            if key not in seen:
                seen.add(key)
                call.own_activation_bytes += t.nbytes if storage is None else storage.nbytes()

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)
        self.flush()


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t
