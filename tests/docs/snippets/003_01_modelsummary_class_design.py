# DOC: 003_01  seed 003_2bbe9edb939ae6af.txt lines 57-65, under "Core Components"
# SUBST-PLACEHOLDER: def __init__(self, model: Module, input_shape: Tuple[int, ...])\n => def __init__(self, model: Module, input_shape: Tuple[int, ...]): ...\n
# SUBST-PLACEHOLDER: def _register_hooks(self)\n => def _register_hooks(self): ...\n
# SUBST-PLACEHOLDER: def _forward_pass(self)\n => def _forward_pass(self): ...\n
# SUBST-PLACEHOLDER: def _collect_parameters(self)\n => def _collect_parameters(self): ...\n
# SUBST-PLACEHOLDER: def _format_summary(self) -> str\n => def _format_summary(self) -> str: ...\n
# SUBST-PLACEHOLDER: def __str__(self) -> str => def __str__(self) -> str: ...
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
# ---- document block (as written; only the substitutions above) ----
class ModelSummary:
    def __init__(self, model: Module, input_shape: Tuple[int, ...]): ...
    def _register_hooks(self): ...
    def _forward_pass(self): ...
    def _collect_parameters(self): ...
    def _format_summary(self) -> str: ...
    def __str__(self) -> str: ...
# ---- end of document block ----
# ---- checks (not in the document) ----
ours = nbinspect.mlx.ModelSummary
check.true(isinstance(ours, type), "nbinspect.mlx.ModelSummary is a class")
s = nbinspect.mlx.summary(nn.Linear(10, 5))
check.true(isinstance(s, ours), "summary() returns a ModelSummary")
check.true("Total params" in str(s), "str(ModelSummary) is the table")
