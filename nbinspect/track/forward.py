"""Running the user's model for analysis without leaving a trace on it.

:func:`preserved` puts the model in eval mode for the block (no dropout: the outputs compare
like for like) inside a forked RNG, without autograd, and afterwards restores what the
trace restores (:func:`~nbinspect.backends.torch.preserve.preserved`): every module's train/eval flag,
any buffer the forward pass changed, and tensor attributes it replaced or cached. Weights are never
written: other parameter values are swapped in with ``torch.func.functional_call``, which
puts the original tensor objects back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from ..backends.torch import preserve, trace
from ..core.inputs import split_input, tensors_in

__all__ = ["INPUTS_ARE", "check_inputs", "logits", "preserved", "run"]

INPUTS_ARE = (
    "the batch the model is called with (a tensor, a tuple of positional arguments or a dict of keyword arguments)"
)


@contextlib.contextmanager
def preserved(model: nn.Module) -> Iterator[None]:
    modules = [m for _, m in trace.named_modules_of(model)]
    with torch.no_grad(), preserve.preserved(modules, trace.tensors_of(modules), training=False, real=True):
        yield


def check_inputs(inputs: Any) -> None:
    """Refuse an `inputs` that cannot be what the model is called with (a function, a
    generator, a number) with one message saying what it must be."""
    import inspect

    what = None
    if inspect.isgenerator(inputs) or inspect.isasyncgen(inputs):
        what = "a generator — pass one batch from it"
    elif callable(inputs) and not isinstance(inputs, (torch.Tensor, nn.Module)):
        what = f"a function ({getattr(inputs, '__name__', type(inputs).__name__)}) — pass its result"
    elif isinstance(inputs, (int, float, complex, str, bytes)) and not isinstance(inputs, bool):
        what = f"a {type(inputs).__name__}"
    if what is not None:
        raise TypeError(f"inputs= must be {INPUTS_ARE}, got {what}")


def run(model: nn.Module, inputs: Any, params: Mapping[str, torch.Tensor] | None = None) -> Any:
    """model(inputs) (a tensor, a tuple of arguments or a dict of keyword arguments), with
    `params` in place of those parameters when given."""
    if inputs is None:
        raise ValueError("this metric runs the model: pass inputs= to on_optimizer_step (e.g. a fixed batch)")
    args, kwargs = split_input(inputs)
    if params is None:
        return model(*args, **kwargs)
    return functional_call(model, dict(params), args, kwargs)


def logits(output: Any) -> torch.Tensor:
    """The tensor to compare in a model's output: ``logits`` when it has them, else the
    first floating tensor."""
    if isinstance(output, torch.Tensor):
        return output
    found = output.get("logits") if isinstance(output, Mapping) else getattr(output, "logits", None)
    if isinstance(found, torch.Tensor):
        return found
    for t in tensors_in(output):
        if t.is_floating_point():
            return t
    raise ValueError(f"the model's output ({type(output).__name__}) holds no floating tensor to compare")
