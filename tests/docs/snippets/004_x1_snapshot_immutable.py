# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import torch
import nbi_check as check
from nbinspect.track import ParameterSnapshot, ParameterDelta
from tiny_models import tiny_llama
# ---- checks (not in the document) ----
# Not a document block ("Immutability: Snapshots and deltas can't be modified").
model = tiny_llama()
writes = {
    "add_": lambda t: t.add_(1.0),
    "copy_": lambda t: t.copy_(torch.ones_like(t)),
    ".data.add_": lambda t: t.data.add_(1.0),
    "mul_ on .tensors[name]": lambda t: None,
}
for how, write in writes.items():
    snap = ParameterSnapshot.take(model)
    name = snap.names[0]
    before = snap[name].clone()
    target = snap.tensors[name] if how.endswith("tensors[name]") else snap[name]
    try:
        (write(target) if how != "mul_ on .tensors[name]" else target.mul_(2.0))
        raised = False
    except Exception:
        raised = True
    check.true(torch.equal(snap[name], before), f"snapshot unchanged after {how} (it raised: {raised})")
# the sequence: a write attempt that raises, then one training step of 0.01
snap = ParameterSnapshot.take(model)
name = snap.names[0]
try:
    snap[name].add_(0.98)
except Exception:
    pass
with torch.no_grad():
    model.get_parameter(name).add_(0.01)
delta = ParameterDelta.between(snap, model)
check.true(abs(delta.max_abs - 0.01) < 1e-6, "the next delta is the true change (0.01)", f"max |Δ| {delta.max_abs:.4g}")
