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

from ..sources.mlx_module import is_mlx_module
from .activations import SavedTensorMeter, storage_ids
from .flops import FlopCounter
from .trace import Recorder, TraceResult, finish, named_modules_of, tensors_of

__all__ = ["add_block_totals", "watch"]


@contextlib.contextmanager
def watch(model: nn.Module, *, flops: bool = True) -> Iterator[TraceResult]:
    """Record the model's module calls made inside the block. The yielded result is
    complete once the block has ended (also when it raised: the calls so far)."""
    if is_mlx_module(model):
        from .mlx_trace import watch_mlx

        with watch_mlx(model, flops=flops) as result:
            yield result
        return
    named_modules = named_modules_of(model)
    recorder = Recorder(named_modules)
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
        add_block_totals(finish(result))


def add_block_totals(result: TraceResult) -> None:
    """Totals over every time the block called the model (each root call), not the first
    call only as a one-pass trace has them; the MLX watch shares this."""
    roots = [c for c in result.calls if c.parent is None]
    result.totals.update(
        flops=sum(c.flops for c in roots) if result.flops else None,
        activation_bytes=sum(c.activation_bytes for c in roots),
        input_bytes=sum(c.input_bytes for c in roots),
        model_calls=len(roots),
    )
