# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import torch
import nbi_check as check
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from tiny_models import tiny_llama, train_steps
# ---- checks (not in the document) ----
# Not a document block ("ActivationMetrics: Dead neurons, saturation") on a SiLU (Llama) model.
model = tiny_llama()
m = ModelAnalysisManager.create(AnalysisConfig(interval=5, activation_enabled=True))
train_steps(model, m, steps=10, with_inputs=True)
keys = [k for k in m.metric_keys() if k.startswith("activation/")]
check.true("activation/dead_fraction" in keys, "dead units defined for SiLU", f"activation keys {keys[:4]}")
check.true("activation/saturated_fraction" in keys, "saturated units defined for SiLU", f"activation keys {keys[:4]}")
