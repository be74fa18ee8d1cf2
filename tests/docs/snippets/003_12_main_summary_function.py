# DOC: 003_12  seed 003_2bbe9edb939ae6af.txt lines 284-316, under "Step 5.1: Create the main summary function"
# ---- placeholders (not in the document) ----
# the document's own imports (its Step 1.1) and the one it forgets (tree_flatten)
from dataclasses import dataclass
from typing import Dict, List, Tuple, Optional, Union
import mlx.core as mx
from mlx.nn import Module
from mlx.utils import tree_flatten
import mlx.nn as nn
import nbinspect.mlx
import nbi_check as check
import doc003  # the document's other blocks, as it defines them (fixtures/doc003.py)
ModelSummary = doc003.ModelSummary
collect_layer_info = doc003.collect_layer_info
# ---- document block (as written; only the substitutions above) ----
def summary(model: Module,
           input_shape: Optional[Union[Tuple[int, ...], mx.array]] = None,
           batch_size: int = 1,
           device: Optional[mx.Device] = None,
           verbose: int = 1) -> str:
    """
    Generate a summary of the model.

    Args:
        model: The MLX model to summarize
        input_shape: Input shape (excluding batch dimension) or sample input
        batch_size: Batch size for memory calculations
        device: Device to run the model on
        verbose: 0=silent, 1=default, 2=detailed

    Returns:
        Summary string
    """
    summary_obj = ModelSummary(model)

    # Collect basic layer information
    layer_infos = collect_layer_info(model)

    # If input shape provided, run forward pass
    if input_shape is not None:
        if isinstance(input_shape, tuple):
            input_shape = (batch_size,) + input_shape
        summary_obj.forward_pass(input_shape)

    # Generate summary string
    return summary_obj.generate_summary(layer_infos, batch_size, verbose)
# ---- end of document block ----
# ---- checks (not in the document) ----
import inspect
ours = inspect.signature(nbinspect.mlx.summary)
for name in ("input_shape", "batch_size", "device", "verbose"):
    check.true(name in ours.parameters, f"nbinspect.mlx.summary takes {name}=")
model = nn.Linear(10, 5)
try:
    s = nbinspect.mlx.summary(model, input_shape=None, batch_size=1, device=None, verbose=1)
    check.true(isinstance(s, str), "returns the summary string (documented: Returns: Summary string)", type(s).__name__)
except TypeError as exc:
    check.true(False, "summary(model, input_shape=, batch_size=, device=, verbose=) as Step 5.1 defines it", str(exc))
try:
    summary(model, (10,))
except AttributeError as exc:
    check.record("the document's own summary(): generate_summary is never defined", True, str(exc), kind="doc-wrong")
