# DOC: 001_02  seed 001_e5325f17af369d35.txt lines 50-66, under "Conv2D Layers"
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
class Net(nn.Module):  # the model the Conv2d/BatchNorm/ReLU/Dropout records describe (layer_index 0..3)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(0.3)

    def forward(self, x):
        return self.dropout1(self.relu1(self.bn1(self.conv1(x))))

model = Net()
insp = nbinspect.trace(model, torch.zeros(2, 3, 8, 8))
DOCUMENTED = json.loads(check.block(r"""
# ---- document block (as written; only the substitutions above) ----
{
  "layer_index": 0,
  "name": "conv1",
  "type": "Conv2d",
  "parameters": 432,
  "trainable": true,
  "parameter_shapes": [[16, 3, 3, 3], [16]],
  "parameter_dtypes": ["torch.float32", "torch.float32"],
  "in_channels": 3,
  "out_channels": 16,
  "kernel_size": [3, 3],
  "stride": [1, 1],
  "padding": [1, 1],
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
check.same_keys(record, DOCUMENTED, "Conv2d record keys")
same = [k for k in DOCUMENTED if k != "parameters"]
check.values(record, DOCUMENTED, same, "Conv2d record values (but parameters)")
check.doc_wrong("Conv2d(3, 16, 3) parameters, with its bias", 432, 448, record.get("parameters"))
