# DOC: 000_12  seed 000_63878d1cb7f4f056.txt lines 238-250, under "Before Training"
# EXPECT-OUT: SUMMARY in the log :: SUMMARY
# EXPECT-OUT: WEIGHT STATISTICS in the log :: WEIGHT STATISTICS
# EXPECT-ABSENT: every log line carries the logger's prefix :: ^(=+|-+|SUMMARY|LAYER DETAILS|WEIGHT STATISTICS)\s*$
# EXPECT-FILE: training.log has the report with the logger's prefix :: training.log :: \| INFO \| .*SUMMARY
# EXPECT-FILE: training.log has LAYER DETAILS with the prefix :: training.log :: \| INFO \| .*LAYER DETAILS
# EXPECT-FILE: default plot file model_weight_distributions.png :: model_weight_distributions.png :: 
# ---- placeholders (not in the document) ----
import torch.nn as nn
from nbinspect import dump_model_info
from src.models.transformer import TransformerModel  # the user's model: fixtures/src/models/transformer.py
from src.config import ModelConfig
from src.logging import setup_logging, get_logger
config = ModelConfig(hidden_size=64, num_layers=2)  # the user's config (document: `config`)

class Trainer:  # the user's trainer: the document only constructs it
    def __init__(self, model, config, *rest):
        self.model, self.config = model, config
# ---- document block (as written; only the substitutions above) ----
# Setup logging
setup_logging(log_level="INFO", log_file="training.log")
logger = get_logger(__name__)

# Create and analyze model
model = TransformerModel(config)
logger.info("Model analysis before training:")
model_info = dump_model_info(model, logger=logger, plot_distributions=True)

# Start training
trainer = Trainer(model, config, ...)
# ---- end of document block ----
