# DOC: 003_00  seed 003_2bbe9edb939ae6af.txt lines 45-54, under "Core Components"
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
@dataclass
class LayerInfo:
    name: str
    module_type: str
    output_shape: Optional[Tuple[int, ...]]
    num_params: int
    trainable_params: int
    param_bytes: int
# ---- end of document block ----
# ---- checks (not in the document) ----
import dataclasses
documented = [f.name for f in dataclasses.fields(LayerInfo)]
ours = getattr(nbinspect.mlx, "LayerInfo", None)
check.true(ours is not None, "nbinspect.mlx.LayerInfo exists")
if ours is not None:
    check.equal([f.name for f in dataclasses.fields(ours)][: len(documented)], documented, "LayerInfo fields")
s = nbinspect.mlx.summary(nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5)), (10,))
infos = getattr(s, "layer_infos", None)
check.true(infos is not None, "the summary's layer_infos (the document's ModelSummary.layer_infos)")
