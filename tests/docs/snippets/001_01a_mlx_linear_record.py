# DOC: 001_01  seed 001_e5325f17af369d35.txt lines 34-47, under "Linear Layers"
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
import mlx.core as mx
import mlx.nn as mnn
# the same Linear record, from an MLX model (README: every call takes an mlx.nn.Module)
model = mnn.Sequential(mnn.Linear(10, 20), mnn.ReLU(), mnn.Linear(20, 5))
insp = nbinspect.trace(model, mx.zeros((8, 10)))
DOCUMENTED = json.loads(check.block(r"""
# ---- document block (as written; only the substitutions above) ----
{
  "layer_index": 0,
  "name": "0",
  "type": "Linear",
  "parameters": 220,
  "trainable": true,
  "parameter_shapes": [[20, 10], [20]],
  "parameter_dtypes": ["torch.float32", "torch.float32"],
  "in_features": 10,
  "out_features": 20,
  "bias": true
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
document = insp.to_model_info()
record = next((r for r in document["layers"] if r["name"].endswith("0")), {})
check.same_keys(record, DOCUMENTED, "MLX Linear record keys")
check.equal(record.get("parameter_dtypes"), ["mlx.core.float32", "mlx.core.float32"], "MLX dtypes in MLX's own names (str(mx.float32))")
check.equal((document.get("input_info") or {}).get("dtype"), "mlx.core.float32", "input_info.dtype in MLX's name")
