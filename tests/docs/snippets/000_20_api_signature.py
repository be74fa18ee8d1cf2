# DOC: 000_20  seed 000_63878d1cb7f4f056.txt lines 331-338, under "dump_model_info()"
# SUBST-PLACEHOLDER: dump_model_info(\n => def dump_model_info(\n
# SUBST-PLACEHOLDER: ) -> ModelInfo => ) -> ModelInfo: ...
# ---- placeholders (not in the document) ----
import logging, inspect
from typing import Optional
import torch
from nbinspect import ModelInfo
# ---- document block (as written; only the substitutions above) ----
def dump_model_info(
    model: torch.nn.Module,
    logger: Optional[logging.Logger] = None,
    plot_distributions: bool = True,
    save_path: Optional[str] = None
) -> ModelInfo: ...
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
import nbinspect
documented = inspect.signature(dump_model_info)
ours = inspect.signature(nbinspect.dump_model_info)
for name, p in documented.parameters.items():
    q = ours.parameters.get(name)
    check.true(q is not None, f"parameter {name!r} exists")
    if q is not None and p.default is not inspect.Parameter.empty:
        check.equal(q.default, p.default, f"default of {name!r}")
check.equal(list(ours.parameters)[:4], list(documented.parameters), "parameter order")
