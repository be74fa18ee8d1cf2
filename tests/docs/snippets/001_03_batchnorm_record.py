# DOC: 001_03  seed 001_e5325f17af369d35.txt lines 69-84, under "BatchNorm Layers"
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
  "layer_index": 1,
  "name": "bn1",
  "type": "BatchNorm2d",
  "parameters": 64,
  "trainable": true,
  "parameter_shapes": [[16], [16], [16], [16]],
  "parameter_dtypes": ["torch.float32", "torch.float32", "torch.float32", "torch.float32"],
  "num_features": 16,
  "eps": 1e-05,
  "momentum": 0.1,
  "affine": true,
  "track_running_stats": true
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
document = insp.to_model_info("model_info.json")  # also written, as `--model-info OUT` does
json.loads(open("model_info.json").read())
record = next((r for r in document['layers'] if r['name'] == DOCUMENTED.get('name')), None)
check.true(record is not None, 'a record named ' + repr(DOCUMENTED.get('name')))
record = record or {}
check.same_keys(record, DOCUMENTED, "BatchNorm2d record keys")
same = [k for k in DOCUMENTED if k not in ("parameters", "parameter_shapes", "parameter_dtypes")]
check.values(record, DOCUMENTED, same, "BatchNorm2d record values (but the parameter counts)")
check.doc_wrong("BatchNorm2d(16) parameters (running stats are buffers)", 64, 32, record.get("parameters"))
check.doc_wrong("BatchNorm2d(16) parameter_shapes", [[16]] * 4, [[16], [16]], record.get("parameter_shapes"))
check.equal(record.get("buffer_shapes"), [[16], [16], []], "running_mean, running_var, num_batches_tracked as buffer_shapes")
