# DOC: 000_02  seed 000_63878d1cb7f4f056.txt lines 74-82, under "With Distribution Plots"
# EXPECT-OUT: SUMMARY section :: SUMMARY
# EXPECT-OUT: Total parameters: 262,912 (document: 263,936, wrong) :: Total parameters:\s+262,912
# EXPECT-OUT: 'Trainable params:' line :: Trainable params:\s+262,912
# EXPECT-OUT: 'Non-trainable params:' line :: Non-trainable params:\s+0\b
# EXPECT-OUT: 'Total memory:' 1.00 MB/MiB (document: 1.01, wrong) :: Total memory:\s+1\.00 Mi?B
# EXPECT-OUT: 'Total layers:' line (one per parameter tensor: 4; document: 6) :: Total layers:\s+4\b
# EXPECT-OUT: LAYER DETAILS section :: LAYER DETAILS
# EXPECT-OUT: LAYER DETAILS columns Layer Name/Shape/Params/Memory/Grad :: Layer Name\s+Shape\s+Params\s+Memory\s+Grad
# EXPECT-OUT: row 0.weight (512, 256) 131,072 0.50 MB ✓ :: 0\.weight\s+[\(\[]512, 256[\)\]]\s+131,072\s+0\.50 Mi?B\s+✓
# EXPECT-OUT: row 0.bias (512,) 512 0.00 MB ✓ :: 0\.bias\s+[\(\[]512,?[\)\]]\s+512\s+0\.00 Mi?B\s+✓
# EXPECT-OUT: row 2.weight (256, 512) 131,072 0.50 MB ✓ :: 2\.weight\s+[\(\[]256, 512[\)\]]\s+131,072\s+0\.50 Mi?B\s+✓
# EXPECT-OUT: row 2.bias (256,) 256 0.00 MB ✓ :: 2\.bias\s+[\(\[]256,?[\)\]]\s+256\s+0\.00 Mi?B\s+✓
# EXPECT-OUT: WEIGHT STATISTICS section :: WEIGHT STATISTICS
# EXPECT-OUT: WEIGHT STATISTICS columns Layer/Mean/Std/Min/Max :: Layer\s+Mean\s+Std\s+Min\s+Max
# EXPECT-OUT: statistics row 0.weight (uniform ±0.0625: std 0.0361, within 0.0358-0.0364, ±6 standard errors) :: 0\.weight\s+-?0\.\d+\s+0\.03(?:5[89]|6[0-3])\d*\s+-0\.06\d+\s+0\.06\d+
# EXPECT-OUT: statistics row 2.weight (uniform ±0.0442: std ≈ 0.0255) :: 2\.weight\s+-?0\.\d+\s+0\.025\d*\s+-0\.044\d*\s+0\.044\d*
# EXPECT-ABSENT: every log line carries the logger's prefix :: ^(=+|-+|SUMMARY|LAYER DETAILS|WEIGHT STATISTICS)\s*$
# EXPECT-FILE: the plot PNG at save_path :: my_model_distributions.png :: 
# ---- placeholders (not in the document) ----
import torch.nn as nn
from nbinspect import dump_model_info

# the model of the document's first block (its output sections show this model)
model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
# the logger of the document's "With Logger" block (src.logging is the user's: fixtures/src/logging.py)
from src.logging import setup_logging, get_logger
setup_logging(log_level="INFO")
logger = get_logger(__name__)
# ---- document block (as written; only the substitutions above) ----
# Generate weight distribution visualization
info = dump_model_info(
    model,
    logger=logger,
    plot_distributions=True,
    save_path="my_model_distributions.png"
)
# ---- end of document block ----
# ---- checks (not in the document) ----
import dataclasses
import nbi_check as check

check.attrs(info, ["total_params", "trainable_params", "non_trainable_params", "total_memory_mb", "layers", "num_layers"], "ModelInfo fields of the document")
layer_fields = ["name", "num_params", "mean"]
if info.layers:
    check.attrs(info.layers[0], layer_fields, "LayerInfo attributes the document's examples use (name, num_params, mean)")
    check.attrs(info.layers[0], ["shape", "memory_mb", "requires_grad", "std", "min", "max"], "LayerInfo carries the LAYER DETAILS / WEIGHT STATISTICS columns")
    first = info.layers[0]
    check.true(dataclasses.is_dataclass(first) and isinstance(dataclasses.asdict(first), dict), "a LayerInfo converts to a dict (dataclasses.asdict)")
    counted = [getattr(l, "num_params", None) for l in info.layers if getattr(l, "tied_to", None) is None]
    check.true(None not in counted and sum(counted) == info.total_params, "every parameter appears: layers sum to total_params", f"sum {sum(c or 0 for c in counted):,} vs total {info.total_params:,}")
check.equal(info.num_layers, len(info.layers), "num_layers == len(layers)")
import os
check.true(os.path.getsize("my_model_distributions.png") > 10_000, "my_model_distributions.png written")
