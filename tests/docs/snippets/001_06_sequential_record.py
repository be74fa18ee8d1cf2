# DOC: 001_06  seed 001_e5325f17af369d35.txt lines 116-127, under "Sequential Layers"
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
class Net(nn.Module):  # the model the Sequential record describes: seq_block first (layer_index 0), 3 layers
    def __init__(self):
        super().__init__()
        self.seq_block = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))

    def forward(self, x):
        return self.seq_block(x)

model = Net()
insp = nbinspect.trace(model, torch.zeros(8, 10))
DOCUMENTED = json.loads(check.block(r"""
# ---- document block (as written; only the substitutions above) ----
{
  "layer_index": 0,
  "name": "seq_block",
  "type": "Sequential",
  "parameters": 0,
  "trainable": true,
  "parameter_shapes": [],
  "parameter_dtypes": [],
  "num_layers": 3
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
document = insp.to_model_info("model_info.json")  # also written, as `--model-info OUT` does
json.loads(open("model_info.json").read())
record = next((r for r in document['layers'] if r['name'] == DOCUMENTED.get('name')), None)
check.true(record is not None, 'a record named ' + repr(DOCUMENTED.get('name')))
record = record or {}
check.same_keys(record, DOCUMENTED, "Sequential record keys")
check.values(record, DOCUMENTED, DOCUMENTED, "Sequential record values (parameters = its own: 0)")
total = sum(r["parameters"] for r in document["layers"])
check.equal(total, document["parameters"], "records' parameters sum to the model's (no double counting)")
subtree = [k for k, v in record.items() if k not in DOCUMENTED and v == 325]
check.true(subtree, "the subtree count (325) kept under another key", f"extra keys {sorted(set(record) - set(DOCUMENTED))}")
