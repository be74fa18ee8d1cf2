# DOC: 003_08  seed 003_2bbe9edb939ae6af.txt lines 170-196, under "Step 2.3: Format the output"
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
def format_layer_summary(layer_infos: List[LayerInfo]) -> str:
    """Format layer information as a table."""
    # Table headers
    headers = ["Layer (type)", "Param #", "Trainable"]
    col_widths = [40, 15, 15]

    # Build table
    lines = []
    lines.append("=" * sum(col_widths))
    lines.append("".join(h.ljust(w) for h, w in zip(headers, col_widths)))
    lines.append("=" * sum(col_widths))

    for info in layer_infos:
        layer_str = f"{info.name} ({info.module_type})"
        param_str = f"{info.num_params:,}"
        trainable_str = f"{info.trainable_params:,}"

        lines.append("".join([
            layer_str[:col_widths[0]].ljust(col_widths[0]),
            param_str.ljust(col_widths[1]),
            trainable_str.ljust(col_widths[2])
        ]))

    lines.append("=" * sum(col_widths))
    return "\n".join(lines)
# ---- end of document block ----
# ---- checks (not in the document) ----
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
table = format_layer_summary(doc003.collect_layer_info(model))
print(table)
ours = str(nbinspect.mlx.summary(model))
print(ours)
check.text(ours, [r"Layer \(type\)", r"Param #", r"Trainable"], "nbinspect's table has the document's columns")
check.text(ours, [r"Linear\b.*\s220\s+220\b"], "Trainable column holds counts (220), as the document's table")
