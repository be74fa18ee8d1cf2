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

__all__ = ["SavedTensorMeter", "storage_id"]


def storage_id(t: torch.Tensor) -> int:
    """Identifies the memory a tensor lives in; views of one storage share it. Tensors
    without a plain storage (sparse, nested, some subclasses) stand for themselves."""
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, TypeError):
        return id(t)


class SavedTensorMeter:
    """Context manager: adds the bytes of each newly saved storage to
    ``current().own_activation_bytes``. ``exclude`` are storages that are not activations."""

    def __init__(self, current: Callable[[], Any], exclude: Iterable[int] = ()):
        self.current = current
        self.seen = set(exclude)
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        try:  # storage_id, inlined: this runs for every saved tensor
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):
            storage = None
        key = id(t) if storage is None else storage._cdata
        seen = self.seen
        if key not in seen:
            seen.add(key)
            self.current().own_activation_bytes += t.nbytes if storage is None else storage.nbytes()
        return t

    def __enter__(self) -> SavedTensorMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)


def _unpack(t: torch.Tensor) -> torch.Tensor:
    return t
