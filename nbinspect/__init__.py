"""nbinspect: see inside PyTorch and MLX models from a Jupyter notebook.

Analyzers return pandas DataFrames; everything you look at (text, widget, plots, JSON)
is rendered from those frames.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
    from . import examples, mlx, track
    from .analyze.health import HealthThresholds
    from .analyze.stats import stats
    from .analyze.structure import by_type, layers, params, totals
    from .backends.distributed.reduce import distributed
    from .comparison import Comparison, compare
    from .config_inspection import build_on_meta, from_config
    from .errors import CheckpointError, EngineError, TraceError, UnsafeCheckpointError
    from .experts import MixtureOfExperts, expert_changes, moe, split_experts
    from .inspection import Inspection, health, inspect, locate, memory, plot_distributions, trace, value_grid
    from .io.checkpoint import load_checkpoint
    from .io.project_trust import trust_project
    from .model_info import ModelInfo, dump_model_info
    from .render.json_export import json_schema
    from .render.widget import InspectWidget

# Public name -> the module that defines it. `import nbinspect` loads none of them (pandas,
# anywidget, IPython and matplotlib cost ~1 s): each loads when a name from it is first used.
_SUBMODULES = ("examples", "mlx", "track")
_LAZY = {
    **{name: f".{name}" for name in _SUBMODULES},
    "distributed": ".backends.distributed.reduce",
    "HealthThresholds": ".analyze.health",
    "stats": ".analyze.stats",
    **dict.fromkeys(("by_type", "layers", "params", "totals"), ".analyze.structure"),
    **dict.fromkeys(("Comparison", "compare"), ".comparison"),
    **dict.fromkeys(("build_on_meta", "from_config"), ".config_inspection"),
    **dict.fromkeys(("CheckpointError", "EngineError", "TraceError", "UnsafeCheckpointError"), ".errors"),
    **dict.fromkeys(("MixtureOfExperts", "expert_changes", "moe", "split_experts"), ".experts"),
    **dict.fromkeys(
        ("Inspection", "health", "inspect", "locate", "memory", "plot_distributions", "trace", "value_grid"),
        ".inspection",
    ),
    **dict.fromkeys(("ModelInfo", "dump_model_info"), ".model_info"),
    "json_schema": ".render.json_export",
    "load_checkpoint": ".io.checkpoint",
    "trust_project": ".io.project_trust",
    "InspectWidget": ".render.widget",
}


def __getattr__(name: str) -> _typing.Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'nbinspect' has no attribute {name!r}")
    _warm_up()
    module = _importlib.import_module(_LAZY[name], __name__)
    value = module if name in _SUBMODULES else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"


def _warm_up() -> None:
    """nbinspect is used in this session: load the statistics kernels in the background."""
    from .analyze.fused import warm_up

    warm_up()


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbinspect` registers `%inspect_model` (IPython is imported only then)."""
    from .ui.magic import load_ipython_extension as load

    _warm_up()
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
    "build_on_meta",
    "by_type",
    "compare",
    "distributed",
    "dump_model_info",
    "examples",
    "expert_changes",
    "from_config",
    "health",
    "inspect",
    "json_schema",
    "layers",
    "load_checkpoint",
    "load_ipython_extension",
    "locate",
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
    "trust_project",
    "value_grid",
]
