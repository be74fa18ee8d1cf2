"""nbinspect: see inside PyTorch and MLX models from a Jupyter notebook.

Analyzers return pandas DataFrames; everything you look at (text, widget, plots, JSON)
is rendered from those frames.
"""

from __future__ import annotations

from . import examples, mlx, track
from .analyze.distributed import distributed
from .analyze.health import HealthThresholds
from .analyze.stats import stats
from .analyze.structure import by_type, layers, params, totals
from .comparison import Comparison, compare
from .errors import CheckpointError, EngineError, TraceError, UnsafeCheckpointError
from .experts import MixtureOfExperts, expert_changes, moe, split_experts
from .inspection import Inspection, health, inspect, memory, plot_distributions, trace
from .model_info import ModelInfo, dump_model_info
from .render.json_export import json_schema
from .sources.checkpoint import load_checkpoint
from .widget import InspectWidget

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbinspect` registers `%inspect_model` (IPython is imported only then)."""
    from .magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "CheckpointError",
    "Comparison",
    "EngineError",
    "HealthThresholds",
    "InspectWidget",
    "Inspection",
    "MixtureOfExperts",
    "ModelInfo",
    "TraceError",
    "UnsafeCheckpointError",
    "by_type",
    "compare",
    "distributed",
    "dump_model_info",
    "examples",
    "expert_changes",
    "health",
    "inspect",
    "json_schema",
    "layers",
    "load_checkpoint",
    "load_ipython_extension",
    "memory",
    "mlx",
    "moe",
    "params",
    "plot_distributions",
    "split_experts",
    "stats",
    "totals",
    "trace",
    "track",
]
