# DOC: 003_06  seed 003_2bbe9edb939ae6af.txt lines 123-132, under "Step 2.1: Create LayerInfo dataclass"
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
    output_shape: Optional[Tuple[int, ...]] = None
    num_params: int = 0
    trainable_params: int = 0
    param_bytes: int = 0
# ---- end of document block ----
# ---- checks (not in the document) ----
import dataclasses
ours = getattr(nbinspect.mlx, "LayerInfo", None)
check.true(ours is not None, "nbinspect.mlx.LayerInfo exists")
if ours is not None:
    for f in dataclasses.fields(LayerInfo):
        check.true(f.name in {g.name for g in dataclasses.fields(ours)}, f"LayerInfo.{f.name}")
