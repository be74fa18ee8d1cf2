# DOC: 004_10  seed 004_28c1a5dc4a9ee1ee.txt lines 339-345, under "Future Extensions"
# SUBST-PLACEHOLDER: return {"my_metric/value": ...} => return {"my_metric/value": 1.0}
# ---- placeholders (not in the document) ----
from nbinspect.track import AnalysisConfig, MetricComputer, ModelAnalysisManager
analyzer = ModelAnalysisManager.create(AnalysisConfig(interval=10))
# ---- document block (as written; only the substitutions above) ----
class MyMetric(MetricComputer):
    def compute(self, delta, context, **kwargs):
        return {"my_metric/value": 1.0}

analyzer.add_metric(MyMetric())
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
from tiny_models import tiny_llama, train_steps
model = tiny_llama()
train_steps(model, analyzer, steps=20)
check.true("my_metric/value" in analyzer.metric_keys(), "MyMetric's key measured", str(analyzer.errors[:1]))
