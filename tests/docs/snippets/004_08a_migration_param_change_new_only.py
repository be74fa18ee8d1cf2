# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from tiny_models import tiny_llama
import nbi_check as check
model = tiny_llama()
# ---- checks (not in the document) ----
# Not a document block: the "# New" half of the block alone.
config = AnalysisConfig(interval=100, param_change_enabled=True)
analyzer = ModelAnalysisManager.create(config)
metrics = analyzer.on_optimizer_step(model)  # Handles snapshot lifecycle
check.equal(metrics, {}, "first call: snapshot, {}")
