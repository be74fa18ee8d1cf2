# DOC: 003_05  seed 003_2bbe9edb939ae6af.txt lines 107-118, under "Step 1.3: Create simple summary function"
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
count_parameters = doc003.count_parameters
# ---- document block (as written; only the substitutions above) ----
def simple_summary(model: Module) -> str:
    """Generate a simple parameter count summary."""
    total, trainable = count_parameters(model)
    non_trainable = total - trainable

    return f"""
Total params: {total:,}
Trainable params: {trainable:,}
Non-trainable params: {non_trainable:,}
    """
# ---- end of document block ----
# ---- checks (not in the document) ----
model = nn.Linear(10, 5)
documented = simple_summary(model)
ours = str(nbinspect.mlx.summary(model))
for line in [ln.strip() for ln in documented.strip().splitlines()]:
    check.true(line in ours, f"nbinspect's summary has the line {line!r}")
