# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import mlx.core as mx
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
# ---- checks (not in the document) ----
# Not a document block ("Edge Cases: Quantized models"): a 128x128 Linear quantized to 4 bits.
model = nn.Sequential(nn.Linear(128, 128, bias=False))
nn.quantize(model, group_size=64, bits=4)
s = nbinspect.mlx.summary(model, (128,))
print(str(s))
t = s.totals
check.equal(t["total_params"], 128 * 128, "a quantized Linear counts its 16,384 logical weights")
flops = t.get("flops")
check.true(flops and flops >= 2 * 128 * 128, "quantized matmul FLOPs counted", f"flops {flops}")
