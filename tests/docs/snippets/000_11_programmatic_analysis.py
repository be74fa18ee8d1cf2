# DOC: 000_11  seed 000_63878d1cb7f4f056.txt lines 207-221, under "Return Value"
# EXPECT-OUT: Trainable ratio printed :: Trainable ratio: 100\.00%
# EXPECT-OUT: largest layer: the 0.weight tensor :: Largest layer: 0\.weight \(131,072 params\)
# EXPECT-OUT: model size in GB :: Model size: 0\.00 GB
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
info = dump_model_info(model, logger=logger)

# Access information programmatically
ratio = info.trainable_params / info.total_params
print(f"Trainable ratio: {ratio:.2%}")

# Find largest layer
largest_layer = max(info.layers, key=lambda l: l.num_params)
print(f"Largest layer: {largest_layer.name} ({largest_layer.num_params:,} params)")

# Total memory in GB
memory_gb = info.total_memory_mb / 1024
print(f"Model size: {memory_gb:.2f} GB")
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
