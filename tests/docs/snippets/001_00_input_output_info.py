# DOC: 001_00  seed 001_e5325f17af369d35.txt lines 10-21, under "ğŸ“Š Input/Output Information"
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
  "input_info": {
    "shape": [8, 10],
    "dtype": "torch.float32"
  },
  "output_info": {
    "shape": [8, 5],
    "dtype": "torch.float32"
  }
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
document = insp.to_model_info("model_info.json")  # also written, as `--model-info OUT` does
json.loads(open("model_info.json").read())

for key in ("input_info", "output_info"):
    check.same_keys(document.get(key), DOCUMENTED[key], f"{key} keys (shape, dtype)")
    check.values(document.get(key) or {}, DOCUMENTED[key], DOCUMENTED[key], f"{key} values")
check.keys(document, ["model_name", "framework", "model_type", "parameters", "layers"], "top-level keys")
