"""The Lightning ``Callback``: one line puts a manager into a ``lightning.Trainer``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.callbacks import Callback

from ..manager import ModelAnalysisManager

__all__ = ["LightningTrackingCallback"]


class LightningTrackingCallback(Callback):
    """Measures after each training batch (the optimizer has stepped) and logs the metrics
    with ``pl_module.log_dict``, which reaches every logger of the Trainer."""

    def __init__(self, manager: ModelAnalysisManager, inputs: Any = None):
        if not isinstance(manager, ModelAnalysisManager):
            raise TypeError(f"LightningTrackingCallback needs a ModelAnalysisManager, got {type(manager).__name__}")
        self.manager = manager
        self.inputs = inputs  # a fixed batch for sparse-quality and activation metrics
        self.last_step = -1

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if self.manager.current_snapshot is None:
            self.manager.snapshot(pl_module, step=trainer.global_step)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == self.last_step:  # accumulating gradients: no optimizer step yet
            return
        self.last_step = trainer.global_step
        optimizers = trainer.optimizers
        metrics = self.manager.on_optimizer_step(
            pl_module,
            inputs=self.inputs,
            optimizer=optimizers[0] if len(optimizers) == 1 else None,
            step=trainer.global_step,
        )
        if metrics:
            pl_module.log_dict(metrics, on_step=True, on_epoch=False)
