# DOC: 004_00  seed 004_28c1a5dc4a9ee1ee.txt lines 18-40, under "Quick Start"
# SUBST-IMPORT: from grail.trainer.analysis import => from nbinspect.track import
# ---- placeholders (not in the document) ----
import torch
import wandb  # offline stand-in: fixtures/wandb.py
from tiny_models import tiny_llama, token_batches  # placeholders: fixtures/tiny_models.py
model = tiny_llama()  # a Llama-shaped causal LM (q_proj ... gate_proj, SiLU), 22,688 parameters
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dataloader = token_batches(model, optimizer, steps=200)  # 200 batches of token ids (2, 8)
loss = dataloader.loss  # the user's loss for the current batch: loss.backward() computes it
# ---- document block (as written; only the substitutions above) ----
from nbinspect.track import ModelAnalysisManager, AnalysisConfig

# Configure analysis
config = AnalysisConfig(
    interval=100,  # Measure every 100 optimizer steps
    param_change_enabled=True,
    sparse_quality_enabled=True,
)

# Create manager
analyzer = ModelAnalysisManager.create(config)

# In training loop
for batch in dataloader:
    loss.backward()
    optimizer.step()

    # Analyze (returns {} if not at measurement interval)
    metrics = analyzer.on_optimizer_step(model, inputs=batch)
    if metrics:
        wandb.log(metrics)
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
logged = wandb.logged
check.equal(len(logged), 2, "measured at steps 100 and 200 (interval=100)")
last = logged[-1] if logged else {}
check.keys(last, ['param_change/norm_l2', 'param_change/norm_l1', 'param_change/norm_max', 'param_change/mean', 'param_change/std', 'param_change/sparsity_at_1e-06', 'param_change/changed_ratio_at_1e-06'], "documented param_change/* keys")
check.keys(last, ['sparse/kl_at_1e-06', 'sparse/cosine_at_1e-06', 'sparse/mse_at_1e-06', 'sparse/top1_agree_at_1e-06', 'sparse/kept_ratio_at_1e-06', 'sparse/unchanged_ratio_at_1e-06', 'sparse/kl_at_1e-06_random'], "documented sparse/* keys (sparse_quality_enabled=True, inputs=batch)")
