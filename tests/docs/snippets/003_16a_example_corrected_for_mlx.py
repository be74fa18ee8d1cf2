# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import mlx.core as mx
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
# ---- checks (not in the document) ----
# Not a document block: the document's CNN made runnable in MLX (channels last, padding 1 so
# that 14x14 holds, a Flatten), to compare the numbers of its Expected Output.
class Flatten(nn.Module):
    def __call__(self, x):
        return x.reshape(x.shape[0], -1)
model = nn.Sequential(
    nn.Conv2d(3, 64, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2), Flatten(), nn.Linear(64 * 14 * 14, 10)
)
s = nbinspect.mlx.summary(model, (28, 28, 3))
text = str(s)
print(text)
check.text(text, [r"Total params: 127,242", r"Trainable params: 127,242", r"Non-trainable params: 0"], "the document's totals")
check.text(text, [r"Conv2d\b.*\s1,792\s+1,792\b", r"Linear\b.*\s125,450\s+125,450\b"], "Param # and Trainable counts per row")
check.text(text, [r"Params size \((MB|MiB)\): 0\.49"], "params size 0.49 (508,968 bytes / 2**20)")
# forward activations: conv 28*28*64 + relu same + pool 14*14*64 + flatten + linear 10, float32
acts = (2 * 28 * 28 * 64 + 2 * 14 * 14 * 64 + 10) * 4
check.record("Forward/backward pass size: the document's 0.31 MB fits no count of this model's activations", True,
             f"outputs alone are {acts / 2**20:.2f} MiB, twice that for forward+backward", kind="doc-wrong")
