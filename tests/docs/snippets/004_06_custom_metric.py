# DOC: 004_06  seed 004_28c1a5dc4a9ee1ee.txt lines 235-257, under "3. Custom Metrics"
# SUBST-IMPORT: from grail.trainer.analysis import => from nbinspect.track import
# ---- document block (as written; only the substitutions above) ----
from nbinspect.track import MetricComputer, AnalysisConfig, ModelAnalysisManager

class GradientNormMetric(MetricComputer):
    def compute(self, **kwargs):
        context = kwargs.get("context")
        if context is None or context.model is None:
            return {}

        total_norm = sum(
            p.grad.norm(2).item() ** 2
            for p in context.model.parameters()
            if p.grad is not None
        )
        return {"gradient/total_norm": total_norm ** 0.5}

# Add to manager
config = AnalysisConfig(interval=50)
analyzer = (
    ModelAnalysisManager(config)
    .add_metric(GradientNormMetric())
)
# ---- end of document block ----
# ---- checks (not in the document) ----
# exercise the block's manager (not in the document): 100 optimizer steps of a tiny model
import torch
import nbi_check as check
from tiny_models import tiny_llama, train_steps
model = tiny_llama()
train_steps(model, analyzer, steps=100)
keys = analyzer.metric_keys()
check.true("gradient/total_norm" in keys, "the plugin's gradient/total_norm measured", f"keys {keys[:5]}")
check.true(not analyzer.errors, "no metric failures", str(analyzer.errors[:1]))
