# DOC: 000_10  seed 000_63878d1cb7f4f056.txt lines 194-203, under "Return Value"
# ---- placeholders (not in the document) ----
from dataclasses import dataclass
from typing import List
from nbinspect.model_info import LayerInfo  # the document's LayerInfo, at nbinspect's import path
# ---- document block (as written; only the substitutions above) ----
@dataclass
class ModelInfo:
    total_params: int           # Total number of parameters
    trainable_params: int        # Parameters with requires_grad=True
    non_trainable_params: int    # Parameters with requires_grad=False
    total_memory_mb: float       # Total memory in MB
    layers: List[LayerInfo]     # List of layer information
    num_layers: int             # Number of layers
# ---- end of document block ----
# ---- checks (not in the document) ----
import dataclasses, typing
import nbi_check as check
import nbinspect
documented = [(f.name, f.type) for f in dataclasses.fields(ModelInfo)]
ours = {f.name: f for f in dataclasses.fields(nbinspect.ModelInfo)}
missing = [n for n, _ in documented if n not in ours]
check.true(not missing, "nbinspect.ModelInfo has the documented fields", f"missing {missing}")
check.equal([n for n in ours if n in dict(documented)], [n for n, _ in documented], "documented fields in the documented order")
hints = typing.get_type_hints(nbinspect.ModelInfo, include_extras=False, localns={"LayerInfo": LayerInfo})
check.true("LayerInfo" in str(hints.get("layers")), "ModelInfo.layers is a list of LayerInfo", str(hints.get("layers")))
check.true(dataclasses.is_dataclass(LayerInfo), "LayerInfo is a dataclass")
