# DOC: 003_02  seed 003_2bbe9edb939ae6af.txt lines 68-74, under "Core Components"
# SUBST-PLACEHOLDER: dtypes: Optional[List[mx.Dtype]] = None) -> ModelSummary => dtypes: Optional[List[mx.Dtype]] = None) -> ModelSummary: ...
# ---- placeholders (not in the document) ----
# the document's own imports (its Step 1.1) and the one it forgets (tree_flatten)
from dataclasses import dataclass
from typing import Dict, List, Tuple, Optional, Union
import mlx.core as mx
from mlx.nn import Module
from mlx.utils import tree_flatten
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
import doc003  # the document's other blocks, as it defines them (fixtures/doc003.py)
ModelSummary = nbinspect.mlx.ModelSummary  # the document's return type, at nbinspect's path
# ---- document block (as written; only the substitutions above) ----
def summary(model: Module, 
           input_shape: Union[Tuple[int, ...], mx.array],
           batch_size: int = -1,
           device: mx.Device = mx.default_device(),
           dtypes: Optional[List[mx.Dtype]] = None) -> ModelSummary: ...
# ---- end of document block ----
# ---- checks (not in the document) ----
import inspect
documented = inspect.signature(summary)
ours = inspect.signature(nbinspect.mlx.summary)
missing = [n for n in documented.parameters if n not in ours.parameters]
check.true(not missing, "nbinspect.mlx.summary takes the documented parameters", f"missing {missing}")
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
try:
    s = nbinspect.mlx.summary(model, (10,), batch_size=-1, device=mx.default_device(), dtypes=None)
    check.true("Total params: 325" in str(s), "the documented call with batch_size=-1 (torchsummary's 'any batch') and device=")
except Exception as exc:
    check.true(False, "the documented call with batch_size=-1 and device=", f"{type(exc).__name__}: {exc}")
