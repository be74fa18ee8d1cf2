# DOC: 000_07  seed 000_63878d1cb7f4f056.txt lines 138-152, under "Example 2: Compare Two Models"
# SUBST-PLACEHOLDER: ModelConfig(hidden_size=256, num_layers=4, ...) => ModelConfig(hidden_size=256, num_layers=4)
# SUBST-PLACEHOLDER: ModelConfig(hidden_size=768, num_layers=12, ...) => ModelConfig(hidden_size=768, num_layers=12)
# EXPECT-OUT: the three printed lines :: Model A: [\d,]+ params\nModel B: [\d,]+ params\nRatio: [\d.]+x larger
# ---- placeholders (not in the document) ----
import torch.nn as nn
from nbinspect import dump_model_info
from src.models.transformer import TransformerModel  # the user's model: fixtures/src/models/transformer.py
from src.config import ModelConfig
# the logger of the document's "With Logger" block (src.logging is the user's: fixtures/src/logging.py)
from src.logging import setup_logging, get_logger
setup_logging(log_level="WARNING")  # two large reports: keep the run's log short
logger = get_logger(__name__)
# ---- document block (as written; only the substitutions above) ----
# Model A: Small transformer
config_a = ModelConfig(hidden_size=256, num_layers=4)
model_a = TransformerModel(config_a)
info_a = dump_model_info(model_a, logger=logger, plot_distributions=False)

# Model B: Large transformer
config_b = ModelConfig(hidden_size=768, num_layers=12)
model_b = TransformerModel(config_b)
info_b = dump_model_info(model_b, logger=logger, plot_distributions=False)

print(f"\nModel A: {info_a.total_params:,} params")
print(f"Model B: {info_b.total_params:,} params")
print(f"Ratio: {info_b.total_params / info_a.total_params:.2f}x larger")
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
for m, i in ((model_a, info_a), (model_b, info_b)):
    truth = sum(p.numel() for p in m.parameters())
    check.equal(i.total_params, truth, f"total_params of hidden {m.head.in_features}")
