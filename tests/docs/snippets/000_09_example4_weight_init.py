# DOC: 000_09  seed 000_63878d1cb7f4f056.txt lines 171-188, under "Example 4: Analyze Weight Initialization"
# EXPECT-OUT: two reports :: (?s)SUMMARY.*SUMMARY
# ---- placeholders (not in the document) ----
import torch.nn as nn  # the document's earlier blocks import it
from nbinspect import dump_model_info
from models import MyModel
# the logger of the document's "With Logger" block (src.logging is the user's: fixtures/src/logging.py)
from src.logging import setup_logging, get_logger
setup_logging(log_level="INFO")
logger = get_logger(__name__)
# ---- document block (as written; only the substitutions above) ----
import torch.nn.init as init

model = MyModel()

# Check initial weight distribution
info_before = dump_model_info(model, logger=logger)

# Initialize with Xavier uniform
for module in model.modules():
    if isinstance(module, nn.Linear):
        init.xavier_uniform_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)

# Check after initialization
info_after = dump_model_info(model, logger=logger)
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
by_name = lambda info: {getattr(l, "name", None): l for l in info.layers}
before, after = by_name(info_before), by_name(info_after)
bias = after.get("decoder.bias")
check.true(bias is not None and getattr(bias, "mean", None) == 0.0, "after init.zeros_ the decoder.bias entry has mean 0.0")
w0, w1 = before.get("decoder.weight"), after.get("decoder.weight")
check.true(w0 is not None and w1 is not None and getattr(w0, "std", None) != getattr(w1, "std", None), "xavier_uniform_ changed decoder.weight's std")
