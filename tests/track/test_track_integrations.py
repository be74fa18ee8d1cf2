"""The trainer callbacks in real, short training runs: a transformers Trainer on a tiny
GPT-2 built here, and a Lightning Trainer when lightning is installed."""

from __future__ import annotations

import csv

import pytest
import torch
from torch import nn

from nbinspect.track import AnalysisConfig, ModelAnalysisManager

transformers = pytest.importorskip("transformers")


class Recorder(transformers.TrainerCallback):
    """What a reporting callback (TensorBoard, W&B, ...) would receive."""

    def __init__(self):
        self.logs: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


def _tiny_gpt2():
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def test_transformers_trainer_reports_to_every_logger(tmp_path):
    from nbinspect.track.integrations import HFTrackingCallback, attach

    model = _tiny_gpt2()
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 64, (24, 12), generator=g)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=100,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    reporter = Recorder()
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[reporter])
    manager = ModelAnalysisManager.create(
        AnalysisConfig(interval=2, gradient_enabled=True, sparse_quality_enabled=True)
    )
    batch = {"input_ids": data[0]["input_ids"][None]}
    callback = attach(trainer, manager, inputs=batch)
    assert isinstance(callback, HFTrackingCallback) and trainer.callback_handler.callbacks[0] is callback
    trainer.train()

    history = manager.history
    assert history["step"].tolist() == [2, 4, 6] and history["since_step"].tolist() == [0, 2, 4]
    assert manager.errors == []
    assert (history["param_change/norm_l2"] > 0).all() and (history["gradient/norm"] > 0).all()
    assert "sparse/kl_at_1e-06_random" in history
    logged = [entry for entry in trainer.state.log_history if "param_change/norm_l2" in entry]
    assert [entry["step"] for entry in logged] == [2, 4, 6]
    assert logged[1]["param_change/norm_l2"] == history.loc[1, "param_change/norm_l2"]
    seen = [entry for entry in reporter.logs if "param_change/norm_l2" in entry]
    assert len(seen) == 3  # a callback registered before ours got them as well


def test_transformers_callback_needs_a_manager():
    from nbinspect.track.integrations import HFTrackingCallback

    with pytest.raises(TypeError, match="ModelAnalysisManager"):
        HFTrackingCallback(AnalysisConfig())


def test_lightning_trainer_logs_the_metrics(tmp_path):
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.loggers import CSVLogger

    from nbinspect.track.integrations import LightningTrackingCallback

    class Regressor(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    torch.manual_seed(0)
    x = torch.randn(48, 4)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    module = Regressor()
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=2, optimizer_state_enabled=True))
    trainer = pl.Trainer(
        max_steps=6,
        accelerator="cpu",
        logger=CSVLogger(str(tmp_path), name="run"),
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[LightningTrackingCallback(manager, inputs=x[:8])],
    )
    trainer.fit(module, loader)
    history = manager.history
    assert history["step"].tolist() == [2, 4, 6] and manager.errors == []
    assert (history["optimizer/step_size"] > 0).all()
    with open(trainer.logger.log_dir + "/metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("param_change/norm_l2")]
    logged = sorted({float(r["param_change/norm_l2"]) for r in rows})
    assert logged == pytest.approx(sorted(history["param_change/norm_l2"]))
