# DOC: 003_04  seed 003_2bbe9edb939ae6af.txt lines 90-104, under "Step 1.2: Implement parameter counting"
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
# ---- document block (as written; only the substitutions above) ----
def count_parameters(module: Module) -> Tuple[int, int]:
    """Count total and trainable parameters."""
    total_params = 0
    trainable_params = 0

    for name, param in tree_flatten(module.parameters()):
        if isinstance(param, mx.array):
            param_count = param.size
            total_params += param_count
            if name not in module._no_grad:
                trainable_params += param_count

    return total_params, trainable_params
# ---- end of document block ----
# ---- checks (not in the document) ----
def models():
    frozen = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    frozen.layers[0].freeze()
    return {"Linear(10, 5)": nn.Linear(10, 5), "MLP with layers.0 frozen": frozen}
for label, model in models().items():
    total, trainable = count_parameters(model)
    t = nbinspect.mlx.summary(model).totals
    truth = sum(v.size for _, v in tree_flatten(model.trainable_parameters()))
    check.equal(t["total_params"], total, f"{label}: total as the document's count_parameters")
    if trainable != truth:
        check.doc_wrong(f"{label}: trainable (the document checks names against the root's _no_grad only)", trainable, truth, t["trainable_params"])
    else:
        check.equal(t["trainable_params"], trainable, f"{label}: trainable")
