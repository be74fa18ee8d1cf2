# DOC: 000_08  seed 000_63878d1cb7f4f056.txt lines 156-167, under "Example 3: Check Frozen Layers"
# EXPECT-OUT: frozen encoder rows marked ✗ :: encoder\.0\.weight\s.*✗
# EXPECT-OUT: trainable decoder rows marked ✓ :: decoder\.weight\s.*✓
# EXPECT-OUT: the root's own parameter listed :: \btemperature\b
# EXPECT-OUT: printed Trainable/Frozen :: Trainable: [\d,]+\nFrozen: [\d,]+
# EXPECT-FILE: default plot file model_weight_distributions.png :: model_weight_distributions.png :: 
# ---- placeholders (not in the document) ----
import torch.nn as nn
from nbinspect import dump_model_info
from models import MyModel  # the user's model: fixtures/models.py
# the logger of the document's "With Logger" block (src.logging is the user's: fixtures/src/logging.py)
from src.logging import setup_logging, get_logger
setup_logging(log_level="INFO")
logger = get_logger(__name__)
# ---- document block (as written; only the substitutions above) ----
# Create model with frozen encoder
model = MyModel()
for param in model.encoder.parameters():
    param.requires_grad = False

# Dump info to see what's frozen
info = dump_model_info(model, logger=logger)

print(f"\nTrainable: {info.trainable_params:,}")
print(f"Frozen: {info.non_trainable_params:,}")
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
frozen = sum(p.numel() for p in model.encoder.parameters())
check.equal(info.non_trainable_params, frozen, "non_trainable_params == the encoder's parameters (BatchNorm running stats are buffers)")
check.equal(info.trainable_params, sum(p.numel() for p in model.parameters() if p.requires_grad), "trainable_params")
