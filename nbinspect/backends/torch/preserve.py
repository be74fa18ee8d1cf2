"""The trace's promise that the model does not change: :func:`preserved` restores train/eval
flags, plain tensor attributes, buffers and the RNG state however the forward pass ends.
Used by every real or fake trace (``trace.run_trace``) and by the tracked forward pass."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from itertools import compress
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

__all__ = ["preserved"]

_IS_CUDA = operator.attrgetter("is_cuda")
_BUFFERS = operator.itemgetter("_buffers")  # of a module's __dict__


@contextlib.contextmanager
def preserved(
    modules: list[nn.Module], tensors: list[torch.Tensor], training: bool | None, real: bool
) -> Iterator[None]:
    """Restore train/eval flags, tensor attributes, buffers changed in place or replaced (BatchNorm running
    stats, num_batches_tracked) and the RNG state, however the block ends."""
    # Plain tensor attributes, which forward pre-hooks recompute (legacy prune, weight_norm,
    # spectral_norm set `module.weight`) and forward passes cache: put back, or a fake or a
    # graph-holding tensor stays. A shallow copy of each __dict__ is cheap; most never change.
    saved = list(map(dict.copy, map(vars, modules)))
    buffers = []
    if real:
        tables = list(map(_BUFFERS, saved))  # in C: Python only for the modules that have buffers
        for m, table in zip(compress(modules, tables), compress(tables, tables)):
            buffers += [(m, name, b, b.clone()) for name, b in table.items() if b is not None and not b.is_meta]
    # is_cuda in C first: a device object per tensor only on a CUDA model
    cuda = sorted({t.device.index or 0 for t in tensors if t.is_cuda}) if any(map(_IS_CUDA, tensors)) else []
    with torch.random.fork_rng(devices=cuda):
        try:
            if training is not None:
                for m in modules:
                    m.training = training
            yield
        finally:
            dicts = list(map(vars, modules))
            if not _unchanged(saved, dicts):
                for m, now, attrs in zip(modules, dicts, saved):
                    if len(now) != len(attrs) or not all(map(operator.is_, now.values(), attrs.values())):
                        mode = attrs.get("training")
                        if mode is not None and now.get("training") is not mode:
                            m.training = mode
                        _restore_attrs(now, attrs)
            for m, name, b, copy in buffers:
                m._buffers[name] = b
                if not torch.equal(b, copy):
                    with torch.no_grad(), torch.inference_mode(b.is_inference()):
                        b.copy_(copy)


class _Changed(Exception):
    pass


class _RefuseTensorOps(TorchFunctionMode):
    """On torch's function-mode stack while :func:`_unchanged` compares: a tensor compared
    with anything but itself lands here before any kernel runs, and counts as a change."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise _Changed


def _unchanged(saved: list[dict[str, Any]], now: list[dict[str, Any]]) -> bool:
    """Whether every module's __dict__ holds the same keys with the same objects as its copy
    in `saved`, in the common case in C only: ``==`` on the lists of dicts compares each pair
    of values by identity first, and only a pair of different objects reaches ``__eq__``. A
    tensor's ``__eq__`` (either side) raises here instead of comparing values, so an
    equal-valued replacement is a change; so is any other ``__eq__`` that raises or says
    unequal. Another pair of different objects that ``==`` calls equal (``in_features``
    replaced by an equal int) passes: no such attribute is restored (a train flag set to an
    equal non-bool, or an old value whose own ``__eq__`` says equal to a tensor, would slip).
    False whenever torch would not consult the mode (torch functions disabled): the caller
    then checks identity one module at a time."""
    torch._C._push_on_torch_function_stack(_RefuseTensorOps())
    try:
        return torch._C._is_torch_function_mode_enabled() and saved == now
    except Exception:  # _Changed, or a value's own __eq__ raised: not the same objects
        return False
    finally:
        torch._C._pop_torch_function_stack()


def _restore_attrs(now: dict[str, Any], saved: dict[str, Any]) -> None:
    """Put a module's plain tensor attributes back as they were (`saved` is a copy of its
    __dict__): the same objects, none added, and none left over another value (a cache that
    was None). Called only where something changed."""
    for k, v in saved.items():
        current = now.get(k)
        if current is not v and (isinstance(v, torch.Tensor) or isinstance(current, torch.Tensor)):
            now[k] = v
    for k in [k for k, v in now.items() if isinstance(v, torch.Tensor) and k not in saved]:
        del now[k]
