# DOC: 003_09  seed 003_2bbe9edb939ae6af.txt lines 201-224, under "Step 3.1: Implement forward hooks"
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
class ModelSummary:
    def __init__(self, model: Module):
        self.model = model
        self.layer_infos: Dict[str, LayerInfo] = {}
        self._hooks = []

    def register_forward_hook(self, name: str, module: Module):
        """Register a hook to capture output shapes."""
        def hook(module, inputs, outputs):
            # Handle different output types
            if isinstance(outputs, mx.array):
                output_shape = outputs.shape
            elif isinstance(outputs, (tuple, list)):
                output_shape = tuple(o.shape if isinstance(o, mx.array) else None 
                                   for o in outputs)
            else:
                output_shape = None

            if name in self.layer_infos:
                self.layer_infos[name].output_shape = output_shape

        self._hooks.append(module.register_forward_hook(hook))
# ---- end of document block ----
# ---- checks (not in the document) ----
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
try:
    ModelSummary(model).register_forward_hook("layers.0", model.layers[0])
    check.true(True, "document's hook registration runs")
except AttributeError as exc:
    check.record("the document's own code: MLX modules have no register_forward_hook", True, str(exc), kind="doc-wrong")
s = nbinspect.mlx.summary(model, (10,))
shapes = dict(zip(s.layers["name"], s.layers["output_shapes"]))
check.equal([list(x) for x in shapes.get("layers.0") or []], [[1, 20]], "output shape of layers.0 captured without hooks")
