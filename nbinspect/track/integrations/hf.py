"""The transformers ``TrainerCallback``: one line puts a manager into a ``Trainer``."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ..manager import ModelAnalysisManager

__all__ = ["HFTrackingCallback", "attach"]


class HFTrackingCallback(TrainerCallback):
    """Measures at each optimizer step and adds the metrics to that step's log
    (``trainer.state.log_history`` and the logging callbacks after this one); use
    :func:`attach` to put it first, so every reporter (TensorBoard, W&B, ...) logs them."""

    def __init__(self, manager: ModelAnalysisManager, inputs: Any = None):
        if not isinstance(manager, ModelAnalysisManager):
            raise TypeError(f"HFTrackingCallback needs a ModelAnalysisManager, got {type(manager).__name__}")
        self.manager = manager
        self.inputs = inputs  # a fixed batch for sparse-quality and activation metrics
        self.pending: dict[str, float] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is not None and self.manager.current_snapshot is None:
            self.manager.snapshot(model, step=state.global_step)

    def on_optimizer_step(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        # Called after optimizer.step(), before global_step is incremented and gradients zeroed.
        metrics = self.manager.on_optimizer_step(
            model, inputs=self.inputs, optimizer=kwargs.get("optimizer"), step=state.global_step + 1
        )
        self.pending.update(metrics)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.pending:
            control.should_log = True  # log this step so the metrics reach the loggers now
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not self.pending or logs is None:
            return
        logs.update(self.pending)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(self.pending)
        self.pending = {}


def attach(trainer: Any, manager: ModelAnalysisManager, inputs: Any = None) -> Any:
    """Add an HFTrackingCallback to a transformers ``Trainer`` as its first callback, so the
    reporting callbacks (TensorBoard, W&B, ...) log the metrics too; returns the callback."""
    callback = HFTrackingCallback(manager, inputs)
    trainer.callback_handler.callbacks.insert(0, callback)
    return callback
