# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import io, contextlib, logging, warnings
import torch
import nbi_check as check
from nbinspect.track import AnalysisConfig, ModelAnalysisManager
from tiny_models import tiny_llama
# ---- checks (not in the document) ----
# Not a document block: `inputs` given as a function instead of a batch.
model = tiny_llama()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
m = ModelAnalysisManager.create(AnalysisConfig.comprehensive(interval=2))
batch = torch.randint(0, 64, (2, 8))
records = []
handler = logging.Handler(); handler.emit = records.append
logging.getLogger().addHandler(handler)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(40):
        model(batch).logits.mean().backward(); opt.step(); opt.zero_grad()
        m.on_optimizer_step(model, inputs=lambda: batch, optimizer=opt)
messages = [str(w.message) for w in caught] + [r.getMessage() for r in records]
print(len(messages), "messages; first:", messages[:1])
check.true(len(messages) <= 2, "one clear message, not one per metric per interval", f"{len(messages)} messages")
check.true(any("inputs" in s and ("tensor" in s or "batch" in s) for s in messages[:2]), "the message says what inputs must be", (messages or [""])[0][:200])
