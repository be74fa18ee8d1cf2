# DOC: 001_05  seed 001_e5325f17af369d35.txt lines 101-113, under "Dropout Layers"
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
  "layer_index": 3,
  "name": "dropout1",
  "type": "Dropout",
  "parameters": 0,
  "trainable": false,
  "parameter_shapes": [],
  "parameter_dtypes": [],
  "p": 0.3,
  "inplace": false
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
document = insp.to_model_info("model_info.json")  # also written, as `--model-info OUT` does
json.loads(open("model_info.json").read())
record = next((r for r in document['layers'] if r['name'] == DOCUMENTED.get('name')), None)
check.true(record is not None, 'a record named ' + repr(DOCUMENTED.get('name')))
record = record or {}
check.same_keys(record, DOCUMENTED, "Dropout record keys", extra_ok=False)
check.values(record, DOCUMENTED, DOCUMENTED, "Dropout record values")
