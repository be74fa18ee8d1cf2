# DOC: 004_09  seed 004_28c1a5dc4a9ee1ee.txt lines 316-325, under "New"
# SUBST-PLACEHOLDER: inputs={"input_ids": ..., "attention_mask": ...} => inputs={"input_ids": input_ids, "attention_mask": attention_mask}
# ---- placeholders (not in the document) ----
import torch
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from nbinspect.track import ParamChangeTracker, SparseQualityAnalyzer  # the old API (legacy aliases, if provided)
from tiny_models import tiny_llama
model = tiny_llama()
input_ids = torch.randint(0, 64, (2, 8))
attention_mask = torch.ones(2, 8, dtype=torch.long)
tracker = ParamChangeTracker(measure_interval=100)  # from the block before
# ---- document block (as written; only the substitutions above) ----
# Old
analyzer = SparseQualityAnalyzer(tracker, enabled=True)
metrics = analyzer.analyze(model, input_ids, attention_mask)

# New
config = AnalysisConfig(interval=100, sparse_quality_enabled=True)
analyzer = ModelAnalysisManager.create(config)
metrics = analyzer.on_optimizer_step(model, inputs={"input_ids": input_ids, "attention_mask": attention_mask})
# ---- end of document block ----
