# DOC: 003_16  seed 003_2bbe9edb939ae6af.txt lines 416-431, under "Example Usage"
# SUBST-IMPORT: nn.summary( => nbinspect.mlx.summary(
# EXPECT-OUT: table header Layer (type) / Param # / Trainable :: Layer \(type\)\s+.*Param #\s+.*Trainable
# EXPECT-OUT: Total params line :: Total params: [\d,]+
# EXPECT-OUT: Trainable params line :: Trainable params: [\d,]+
# EXPECT-OUT: Non-trainable params line :: Non-trainable params: [\d,]+
# EXPECT-OUT: Linear(10, 5): Total params: 55 :: Total params: 55\b
# EXPECT-OUT: the CNN: Conv2d row with 1,792 :: Conv2d\b.*\s1,792\b
# EXPECT-OUT: the CNN: Linear row with 125,450 :: Linear\b.*\s125,450\b
# EXPECT-OUT: the CNN: Total params: 127,242 :: Total params: 127,242
# EXPECT-OUT: the CNN: Trainable params: 127,242 :: Trainable params: 127,242
# EXPECT-OUT: Input shape line :: Input shape: [\(\[]1, 3, 28, 28[\)\]]
# EXPECT-OUT: Params size (MB): 0.49 :: Params size \((MB|MiB)\): 0\.49
# EXPECT-OUT: Estimated Total Size line :: Estimated Total Size \((MB|MiB)\): [\d.]+
# EXPECT-OUT: the failed forward pass is named, not raised :: (?i)warn.*forward|forward pass failed
# ---- placeholders (not in the document) ----
import nbinspect.mlx  # nn.summary -> nbinspect.mlx.summary
import nbi_check as check
# ---- document block (as written; only the substitutions above) ----
import mlx.nn as nn

# Simple model
model = nn.Linear(10, 5)
print(nbinspect.mlx.summary(model))

# Complex model with input shape
model = nn.Sequential(
    nn.Conv2d(3, 64, kernel_size=3),
    nn.ReLU(),
    nn.MaxPool2d(2, 2),
    nn.Linear(64 * 14 * 14, 10)
)
print(nbinspect.mlx.summary(model, input_shape=(3, 28, 28)))
# ---- end of document block ----
# ---- checks (not in the document) ----
check.record("the document's CNN does not run in MLX as written: MLX Conv2d takes channels last (N, H, W, C), "
             "a (3, 28, 28) input has 28 channels", True, "", kind="doc-wrong")
check.record("...and Linear(64 * 14 * 14) cannot follow it: a 3x3 conv without padding gives 26x26, pooled 13x13 "
             "(64 * 13 * 13 = 10,816), and there is no Flatten", True, "", kind="doc-wrong")
