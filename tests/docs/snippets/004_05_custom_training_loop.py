# DOC: 004_05  seed 004_28c1a5dc4a9ee1ee.txt lines 215-231, under "2. Custom Training Loop"
# SUBST-IMPORT: from grail.trainer.analysis import => from nbinspect.track import
# EXPECT-OUT: printed at step 100 :: Step 100: \{'param_change/norm_l2'
# EXPECT-OUT: printed at step 200 :: Step 200: \{
# ---- placeholders (not in the document) ----
import torch
from tiny_models import tiny_llama, token_batches, LossModel, StepCounter
model = LossModel(tiny_llama())  # the document's model returns its loss: loss = model(batch)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dataloader = token_batches(model, optimizer, steps=200)
num_epochs = 1
optimizer_step = StepCounter(lambda: analyzer.step)  # the document's `optimizer_step`: the current step
# ---- document block (as written; only the substitutions above) ----
from nbinspect.track import ModelAnalysisManager, AnalysisConfig

config = AnalysisConfig(interval=100)
analyzer = ModelAnalysisManager.create(config)

for epoch in range(num_epochs):
    for batch in dataloader:
        loss = model(batch)
        loss.backward()
        optimizer.step()

        # Analyze
        metrics = analyzer.on_optimizer_step(model, inputs=batch)
        if metrics:
            print(f"Step {optimizer_step}: {metrics}")
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
rows = analyzer.history
check.equal(len(rows), 2, "two measurements")
check.keys(dict(rows.iloc[-1]) if len(rows) else {}, ['param_change/norm_l2', 'param_change/norm_l1', 'param_change/norm_max', 'param_change/mean', 'param_change/std', 'param_change/sparsity_at_1e-06', 'param_change/changed_ratio_at_1e-06'], "documented param_change/* keys")
