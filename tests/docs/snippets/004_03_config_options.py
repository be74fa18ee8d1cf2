# DOC: 004_03  seed 004_28c1a5dc4a9ee1ee.txt lines 108-130, under "Configuration Options"
# ---- placeholders (not in the document) ----
from dataclasses import dataclass
import nbi_check as check
DOC_SOURCE = check.block(r'''
# ---- document block (as written; only the substitutions above) ----
@dataclass
class AnalysisConfig:
    # Global
    interval: int = 100                    # Measure every N optimizer steps
    snapshot_device: str = "cpu"           # Where to store snapshots
    snapshot_dtype: str = "float32"        # Dtype for snapshots

    # Parameter Change Analysis
    param_change_enabled: bool = True
    param_change_thresholds: list[float] = [1e-8, 1e-6, 1e-4]
    param_change_per_layer: bool = False   # Per-layer breakdown
    param_change_track_components: bool = False  # Attention vs MLP

    # Sparse Quality Analysis
    sparse_quality_enabled: bool = True
    sparse_quality_thresholds: list[float] = [1e-8, 1e-6, 1e-4]
    sparse_quality_include_random: bool = True  # Random baseline

    # Future: Gradient, Momentum analysis
    gradient_enabled: bool = False
    momentum_enabled: bool = False
# ---- end of document block ----
''')
# ---- checks (not in the document) ----
import ast
try:
    exec(DOC_SOURCE, {"dataclass": dataclass})
    check.true(True, "the document's dataclass is valid Python")
except ValueError as exc:
    check.record("the document's own AnalysisConfig: a list default in a dataclass raises", True, str(exc), kind="doc-wrong")
from nbinspect.track import AnalysisConfig
ours = AnalysisConfig()
cls = next(n for n in ast.parse(DOC_SOURCE).body if isinstance(n, ast.ClassDef))
for stmt in cls.body:
    if isinstance(stmt, ast.AnnAssign):
        name, value = stmt.target.id, ast.literal_eval(stmt.value)
        if not hasattr(ours, name):
            check.true(False, f"AnalysisConfig.{name}", "missing")
            continue
        got = getattr(ours, name)
        got = list(got) if isinstance(got, tuple) else got
        check.equal(got, value, f"AnalysisConfig.{name} default")
check.true(callable(getattr(AnalysisConfig, "minimal", None)) and callable(getattr(AnalysisConfig, "comprehensive", None)), "presets minimal(), comprehensive()")
check.true(AnalysisConfig(snapshot_dtype="float16").snapshot_dtype == "float16", "snapshot_dtype='float16' (Troubleshooting)")
