# DOC: 001_01  seed 001_e5325f17af369d35.txt lines 34-47, under "Linear Layers"
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
# the model the document's records describe: input (8, 10), Linear(10, 20) named "0", output (8, 5)
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
insp = nbinspect.trace(model, torch.zeros(8, 10))  # "Execution Analysis: forward pass to determine input/output shapes"
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
document = insp.to_model_info("model_info.json")  # also written, as `--model-info OUT` does
json.loads(open("model_info.json").read())
record = next((r for r in document['layers'] if r['name'] == DOCUMENTED.get('name')), None)
check.true(record is not None, 'a record named ' + repr(DOCUMENTED.get('name')))
record = record or {}
check.same_keys(record, DOCUMENTED, "Linear record keys", extra_ok=False)
check.values(record, DOCUMENTED, DOCUMENTED, "Linear record values")
