# DOC: 003_11  seed 003_2bbe9edb939ae6af.txt lines 256-279, under "Step 4.1: Add memory tracking"
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
LayerInfo = doc003.LayerInfo  # the document's own dataclass (Step 2.1)
# ---- document block (as written; only the substitutions above) ----
def calculate_memory_usage(layer_infos: List[LayerInfo], 
                         batch_size: int = 1) -> Dict[str, int]:
    """Calculate memory usage statistics."""
    total_params_mb = sum(info.param_bytes for info in layer_infos) / (1024 * 1024)

    # Estimate activation memory (if output shapes are available)
    total_output_size = 0
    for info in layer_infos:
        if info.output_shape:
            # Assume float32 for activations
            elements = batch_size
            for dim in info.output_shape[1:]:  # Skip batch dimension
                elements *= dim
            total_output_size += elements * 4  # 4 bytes for float32

    total_activation_mb = total_output_size / (1024 * 1024)

    return {
        "params_mb": total_params_mb,
        "activations_mb": total_activation_mb,
        "total_mb": total_params_mb + total_activation_mb
    }
# ---- end of document block ----
# ---- checks (not in the document) ----
import re
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
s = nbinspect.mlx.summary(model, (784,), batch_size=32)
text = str(s)
print(text)
infos = doc003.collect_layer_info(model)
shapes = dict(zip(s.layers["name"], s.layers["output_shapes"]))
for i in infos:
    out = shapes.get(i.name)
    i.output_shape = tuple(out[0]) if out else None
documented = calculate_memory_usage(infos, batch_size=32)
m = re.search(r"Params size \((MB|MiB)\): ([\d.]+)", text)
check.true(m is not None, "'Params size (MB)' line")
if m:
    check.equal(float(m.group(2)), round(documented["params_mb"], 2), f"params size in {m.group(1)} = bytes / 2**20, as the document computes MB")
m = re.search(r"Forward/backward pass size \((MB|MiB)\): ([\d.]+)", text)
check.true(m is not None, "'Forward/backward pass size (MB)' line")
check.text(text, [r"(?i)cache"], "cache memory (mx.get_cache_memory) reported beside active/peak")
