"""Watch a model while other code runs it: the `%%inspect_model` cell magic's trace.

:func:`run_trace` runs one forward pass of its own and restores everything afterwards.
:func:`watch` instead records every call of the model's modules that the block makes
(a real batch, several steps, a training loop) with the same recorder, FLOP counter and
saved-tensor meter, and restores nothing but its hooks: what the block does to the model
is the user's own doing. Activation bytes count each saved storage once over the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from ...core.trace import TraceResult, add_block_totals, finish
from .activations import SavedTensorMeter, storage_ids
from .flops import FlopCounter, coverage_note
from .trace import TorchRecorder, named_modules_of, tensors_of

__all__ = ["watch"]


@contextlib.contextmanager
def watch(model: nn.Module, *, flops: bool = True) -> Iterator[TraceResult]:
    """Record the model's module calls made inside the block. The yielded result is
    complete once the block has ended (also when it raised: the calls so far)."""
    named_modules = named_modules_of(model)
    recorder = TorchRecorder(named_modules)
    weights = storage_ids(tensors_of([m for _, m in named_modules]))
    counter = FlopCounter(recorder.stack, recorder.outside, recorder.calls, tag_nodes=False)
    result = TraceResult(recorder.calls, [], None, counter.uncounted, flops, False, False)
    recorder.attach()
    try:
        meter = SavedTensorMeter(recorder.stack, recorder.outside, weights)
        with meter, counter if flops else contextlib.nullcontext():
            yield result
            counter.tag_pending()
    finally:
        recorder.detach()
        add_block_totals(finish(result, coverage_note))
