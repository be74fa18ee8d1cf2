# DOC: 003_07  seed 003_2bbe9edb939ae6af.txt lines 135-167, under "Step 2.2: Implement layer traversal"
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
LayerInfo = doc003.LayerInfo
# ---- document block (as written; only the substitutions above) ----
def collect_layer_info(model: Module) -> List[LayerInfo]:
    """Collect information about each layer."""
    layer_infos = []

    for name, module in model.named_modules():
        if module is model:
            continue  # Skip the root module

        # Count parameters for this specific module
        total_params = 0
        trainable_params = 0
        param_bytes = 0

        # Only count direct parameters, not nested ones
        for param_name, param in module.items():
            if isinstance(param, mx.array) and not isinstance(param, Module):
                total_params += param.size
                param_bytes += param.nbytes
                if param_name not in module._no_grad:
                    trainable_params += param.size

        layer_info = LayerInfo(
            name=name,
            module_type=type(module).__name__,
            num_params=total_params,
            trainable_params=trainable_params,
            param_bytes=param_bytes
        )
        layer_infos.append(layer_info)

    return layer_infos
# ---- end of document block ----
# ---- checks (not in the document) ----
def models():
    frozen = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    frozen.layers[0].freeze()
    return {"Linear(10, 5)": nn.Linear(10, 5), "MLP with layers.0 frozen": frozen}
for label, model in models().items():
    documented = {i.name: i for i in collect_layer_info(model)}
    layers = nbinspect.mlx.summary(model).layers.set_index("name")
    for name, info in documented.items():
        row = layers.loc[name] if name in layers.index else None
        check.true(row is not None and int(row["own_params"]) == info.num_params, f"{label}: {name} own parameters {info.num_params}")
        if row is not None and info.trainable_params != info.num_params:
            check.equal(int(row["trainable_params"]), info.trainable_params, f"{label}: {name} trainable")
