# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
# ---- checks (not in the document) ----
# Not a document block: the case of parameters owned by the root module.
class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, 8))
        self.pos_embed = nn.Parameter(torch.zeros(1, 5, 8))
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], 1) + self.pos_embed
        return self.head(self.blocks(x)[:, 0])

model = ViT()
document = nbinspect.trace(model, torch.zeros(2, 4, 8)).to_model_info()
shapes = [s for r in document["layers"] for s in r["parameter_shapes"]]
check.true([1, 1, 8] in shapes and [1, 5, 8] in shapes, "cls_token and pos_embed appear in a record", f"{len(shapes)} shapes")
check.equal(sum(r["parameters"] for r in document["layers"]), document["parameters"], "records sum to the total")
