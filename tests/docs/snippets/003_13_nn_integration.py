# DOC: 003_13  seed 003_2bbe9edb939ae6af.txt lines 319-328, under "Step 5.2: Integration with nn module"
# SUBST-IMPORT: from .utils.summary import summary => from nbinspect.mlx import summary
# SUBST-IMPORT: from ..utils.summary import summary => from nbinspect.mlx import summary
# ---- placeholders (not in the document) ----
import mlx.core as mx
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
# ---- document block (as written; only the substitutions above) ----
# In python/mlx/nn/__init__.py
from nbinspect.mlx import summary

# In python/mlx/nn/layers/base.py
def summary(self, input_shape=None, batch_size=1, verbose=1):
    """Generate a summary of this module."""
    from nbinspect.mlx import summary
    return summary(self, input_shape, batch_size, verbose=verbose)
# ---- end of document block ----
# ---- checks (not in the document) ----
# the block's `summary` is now the method body as a function of the module (self)
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
try:
    text = summary(model, (10,), 1, verbose=1)
    check.true("Total params: 325" in str(text), "Module.summary(input_shape, batch_size, verbose=) through nbinspect.mlx.summary")
except TypeError as exc:
    check.true(False, "summary(self, input_shape, batch_size, verbose=verbose)", str(exc))
