# DOC: 004_04  seed 004_28c1a5dc4a9ee1ee.txt lines 185-209, under "1. TRL GRPO Training"
# SUBST-IMPORT: from grail.trainer.analysis import ModelAnalysisManager, AnalysisConfig => from nbinspect.track import ModelAnalysisManager, AnalysisConfig
# ---- placeholders (not in the document) ----
import wandb  # offline stand-in: fixtures/wandb.py
from tiny_models import grpo_trainer_stand_in
GRPOTrainer = grpo_trainer_stand_in(max_steps=200)  # trl is not installed: a transformers Trainer on a tiny Llama
from tiny_models import MessageLog
messages = MessageLog()  # every warning and log record, to count them after the block
# ---- document block (as written; only the substitutions above) ----
from transformers import TrainerCallback
from nbinspect.track import ModelAnalysisManager, AnalysisConfig

class ModelAnalysisCallback(TrainerCallback):
    def __init__(self, analyzer: ModelAnalysisManager):
        self.analyzer = analyzer

    def on_step_end(self, args, state, control, **kwargs):
        model = kwargs.get("model")
        inputs = kwargs.get("inputs")  # Optional

        metrics = self.analyzer.on_optimizer_step(model, inputs=inputs)
        if metrics:
            import wandb
            wandb.log({f"analysis/{k}": v for k, v in metrics.items()})

# Usage
config = AnalysisConfig(interval=100)
analyzer = ModelAnalysisManager.create(config)
callback = ModelAnalysisCallback(analyzer)

trainer = GRPOTrainer(..., callbacks=[callback])
trainer.train()
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
logged = wandb.logged
check.equal(len(logged), 2, "measured at steps 100 and 200")
last = logged[-1] if logged else {}
check.keys(last, ["analysis/" + k for k in ['param_change/norm_l2', 'param_change/norm_l1', 'param_change/norm_max', 'param_change/mean', 'param_change/std', 'param_change/sparsity_at_1e-06', 'param_change/changed_ratio_at_1e-06']], "analysis/param_change/* keys")
sparse = [m for m in messages.all() if "sparse" in m.lower()]
check.true(len(sparse) == 1, "one message that sparse quality was skipped (the Trainer passes no inputs)", f"{len(sparse)} messages: {sparse[:1]}")
