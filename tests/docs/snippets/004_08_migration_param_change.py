# DOC: 004_08  seed 004_28c1a5dc4a9ee1ee.txt lines 302-313, under "Migration from Old Code"
# ---- placeholders (not in the document) ----
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from nbinspect.track import ParamChangeTracker  # the old API the block starts from (a legacy alias, if provided)
from tiny_models import tiny_llama
model = tiny_llama()
# ---- document block (as written; only the substitutions above) ----
# Old
tracker = ParamChangeTracker(measure_interval=100)
if tracker.has_snapshot():
    metrics = tracker.compute_metrics(model)
tracker.capture_snapshot(model)

# New
config = AnalysisConfig(interval=100, param_change_enabled=True)
analyzer = ModelAnalysisManager.create(config)
metrics = analyzer.on_optimizer_step(model)  # Handles snapshot lifecycle
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
check.equal(metrics, {}, 'the first call takes the snapshot and returns {}')
