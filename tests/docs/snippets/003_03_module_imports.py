# DOC: 003_03  seed 003_2bbe9edb939ae6af.txt lines 81-87, under "Step 1.1: Create the base module structure"
# ---- document block (as written; only the substitutions above) ----
# File: python/mlx/nn/utils/summary.py
from dataclasses import dataclass
from typing import Dict, List, Tuple, Optional, Union
import mlx.core as mx
from mlx.nn import Module
# ---- end of document block ----
# ---- checks (not in the document) ----
import nbi_check as check
import nbinspect.mlx
check.attrs(nbinspect.mlx, ["summary", "ModelSummary"], "nbinspect.mlx is the summary module")
