# DOC: 000_13  seed 000_63878d1cb7f4f056.txt lines 254-262, under "During Training (Checkpoint Analysis)"
# EXPECT-OUT: the log line before the report :: Checkpoint model analysis:
# EXPECT-OUT: SUMMARY :: SUMMARY
# ---- placeholders (not in the document) ----
import torch
from nbinspect import dump_model_info
from models import tiny_transformer, write_training_checkpoints
model = tiny_transformer()  # the user's model
write_training_checkpoints(tiny_transformer())  # writes checkpoint.pt as a training loop does
# the logger of the document's "With Logger" block (src.logging is the user's: fixtures/src/logging.py)
from src.logging import setup_logging, get_logger
setup_logging(log_level="INFO")
logger = get_logger(__name__)
# ---- document block (as written; only the substitutions above) ----
# Load checkpoint
checkpoint = torch.load("checkpoint.pt")
model.load_state_dict(checkpoint['model_state_dict'])

# Analyze checkpoint
logger.info("Checkpoint model analysis:")
dump_model_info(model, logger=logger)
# ---- end of document block ----
