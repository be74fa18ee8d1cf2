# DOC: 000_16  seed 000_63878d1cb7f4f056.txt lines 300-305, under "Issue: Distribution plots not generated"
# EXPECT-OUT: WEIGHT STATISTICS section :: WEIGHT STATISTICS
# EXPECT-OUT: WEIGHT STATISTICS columns Layer/Mean/Std/Min/Max :: Layer\s+Mean\s+Std\s+Min\s+Max
# EXPECT-OUT: statistics row 0.weight (uniform ±0.0625: std 0.0361, within 0.0358-0.0364, ±6 standard errors) :: 0\.weight\s+-?0\.\d+\s+0\.03(?:5[89]|6[0-3])\d*\s+-0\.06\d+\s+0\.06\d+
# EXPECT-OUT: statistics row 2.weight (uniform ±0.0442: std ≈ 0.0255) :: 2\.weight\s+-?0\.\d+\s+0\.025\d*\s+-0\.044\d*\s+0\.044\d*
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
import os
save_path = "/tmp/my_model_distributions.png"
os.makedirs(os.path.dirname(save_path), exist_ok=True)
dump_model_info(model, logger=logger, plot_distributions=True, save_path=save_path)
# ---- end of document block ----
# ---- checks (not in the document) ----
import os
import nbi_check as check
check.true(os.path.exists(save_path) and os.path.getsize(save_path) > 10_000, "plot written to /tmp/my_model_distributions.png")
if os.path.exists(save_path):
    os.remove(save_path)
