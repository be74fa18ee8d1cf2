# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import torch
import nbi_check as check
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from tiny_models import tiny_llama, train_steps
# ---- checks (not in the document) ----
# Not a document block: the per-layer and per-component keys of the Metrics Reference.
model = tiny_llama()
config = AnalysisConfig(interval=5, param_change_per_layer=True, param_change_track_components=True, sparse_quality_enabled=True)
m = ModelAnalysisManager.create(config)
train_steps(model, m, steps=5, with_inputs=True)
keys = m.metric_keys()
print("\n".join(keys))
for k in ["param_change/layer_0/mean_abs_delta", "param_change/layer_0/sparsity",
          "param_change/component/q_proj/mean_abs_delta", "param_change/component/gate_proj/mean_abs_delta",
          *['sparse/kl_at_1e-06', 'sparse/cosine_at_1e-06', 'sparse/mse_at_1e-06', 'sparse/top1_agree_at_1e-06', 'sparse/kept_ratio_at_1e-06', 'sparse/unchanged_ratio_at_1e-06', 'sparse/kl_at_1e-06_random']]:
    check.true(k in keys, f"key {k}")
check.equal(AnalysisConfig().sparse_quality_enabled, True, "sparse_quality_enabled defaults to True (document)")
check.true(hasattr(AnalysisConfig(), "momentum_enabled"), "AnalysisConfig.momentum_enabled")
