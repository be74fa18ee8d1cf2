# DOC: 000_14  seed 000_63878d1cb7f4f056.txt lines 266-280, under "Comparing Checkpoints"
# ---- placeholders (not in the document) ----
from nbinspect import dump_model_info
from models import load_model, tiny_transformer, write_training_checkpoints
write_training_checkpoints(tiny_transformer(), steps=(1000, 5000))  # checkpoint-step-1000.pt, -5000.pt
# ---- document block (as written; only the substitutions above) ----
# Load two checkpoints
model_early = load_model("checkpoint-step-1000.pt")
model_late = load_model("checkpoint-step-5000.pt")

# Compare
info_early = dump_model_info(model_early, logger=None, plot_distributions=False)
info_late = dump_model_info(model_late, logger=None, plot_distributions=False)

# Detect weight drift
for layer_e, layer_l in zip(info_early.layers, info_late.layers):
    mean_drift = abs(layer_e.mean - layer_l.mean)
    if mean_drift > 0.1:
        print(f"Large drift in {layer_e.name}: {mean_drift:.4f}")
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
check.attrs(info_early.layers[0], ["name", "mean"], "layers carry name and mean (the drift loop reads them)")
check.equal(len(info_early.layers), len(info_late.layers), "same layers in both")
