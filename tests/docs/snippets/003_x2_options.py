# (an extra check of an issue-26 point; not a document block)
# ---- placeholders (not in the document) ----
import mlx.core as mx
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
# ---- checks (not in the document) ----
# Not a document block: verbose levels and device= of the documented signature.
model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
for kwargs in ({"verbose": 0}, {"verbose": 2}, {"device": mx.cpu}, {"device": mx.default_device()}):
    try:
        text = str(nbinspect.mlx.summary(model, (10,), **kwargs))
        check.true(True, f"summary(..., {kwargs}) accepted")
        if kwargs.get("verbose") == 2:
            check.text(text, [r"weight", r"bias"], "verbose=2 lists parameter rows")
    except Exception as exc:
        check.true(False, f"summary(..., {kwargs}) accepted", f"{type(exc).__name__}: {exc}")
