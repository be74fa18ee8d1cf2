# DOC: 003_14  seed 003_2bbe9edb939ae6af.txt lines 333-356, under "Step 6.1: Write unit tests"
# SUBST-IMPORT: nn.summary( => nbinspect.mlx.summary(
# ---- placeholders (not in the document) ----
import nbinspect.mlx  # nn.summary -> nbinspect.mlx.summary
# ---- document block (as written; only the substitutions above) ----
# File: python/tests/test_nn_summary.py
import unittest
import mlx.core as mx
import mlx.nn as nn

class TestModelSummary(unittest.TestCase):
    def test_simple_linear(self):
        model = nn.Linear(10, 5)
        summary = nbinspect.mlx.summary(model)
        self.assertIn("Total params: 55", summary)
        self.assertIn("weight", summary)
        self.assertIn("bias", summary)

    def test_sequential_model(self):
        model = nn.Sequential(
            nn.Linear(10, 20),
            nn.ReLU(),
            nn.Linear(20, 5)
        )
        summary = nbinspect.mlx.summary(model, input_shape=(10,))
        self.assertIn("Linear", summary)
        self.assertIn("ReLU", summary)
# ---- end of document block ----
# ---- checks (not in the document) ----
import sys
import nbi_check as check
result = unittest.main(argv=["test_nn_summary"], exit=False, verbosity=2).result
for test, trace in result.failures + result.errors:
    check.true(False, f"the document's {test.id().split('.')[-1]}", trace.strip().splitlines()[-1])
check.true(result.wasSuccessful(), "the document's unit tests pass", f"{result.testsRun} run, {len(result.failures)} failed, {len(result.errors)} errors")
sys.exit(0 if result.wasSuccessful() else 1)
