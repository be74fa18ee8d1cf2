# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import subprocess, sys, os
import torch
import nbinspect
import nbi_check as check
root = os.path.join(os.environ["HOME"], "GENESIS")
subprocess.run([sys.executable, os.path.join(os.environ["FIXTURES"], "genesis", "make_genesis.py"), root], check=True)
sys.path.insert(0, root)
# ---- checks (not in the document) ----
# Not a document block: the same model from Python, several inputs by name (works on main).
import yaml
cfg = yaml.safe_load(open(os.path.join(root, "configs", "plain.yaml")))
insp = nbinspect.from_config(
    "models.pmtdit:PMTDit", cfg["model"], batch_size=512, optimizer="adamw", precision="amp-bf16",
    input={"x_sig": (1, 2, 5160), "t": torch.zeros(1, dtype=torch.long), "label": (1, 6), "geom": (1, 3, 5160)},
)
print(insp.report())
mem = insp.memory
comps = list(mem["component"])
check.true(sum(c.startswith("inputs") or c in ("x_sig", "t", "label", "geom") for c in comps) >= 4, "one memory row per input", f"components {comps}")
