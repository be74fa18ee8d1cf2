"""`dump_model_info`: the print-style report, for people coming from such utilities.

``info = dump_model_info(model, logger)`` logs SUMMARY, LAYER DETAILS (one row per parameter
tensor: shape, count, memory, ✓/✗ for requires_grad) and WEIGHT STATISTICS, saves the
distribution plot (to ``model_weight_distributions.png`` unless `save_path` says where;
``plot_distributions=False`` skips it) and returns a :class:`ModelInfo` whose `layers` are
:class:`LayerInfo` records (``l.name``, ``l.num_params``, ``l.mean``...). Every parameter
appears, also those a non-leaf module owns (a ViT's ``cls_token``). The per-module view is
``nbinspect.inspect(model).layers``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .inspection import inspect
from .render import model_info_text
from .render.format import is_missing
from .render.plots import distribution_figure

__all__ = ["DEFAULT_PLOT_PATH", "LayerInfo", "ModelInfo", "dump_model_info"]

DEFAULT_PLOT_PATH = "model_weight_distributions.png"
_LOG = logging.getLogger("nbinspect")
_MIB = 2**20


def _float(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


@dataclass(frozen=True)
class LayerInfo:
    """One parameter tensor (a LAYER DETAILS row), immutable; ``to_dict()`` or
    ``dataclasses.asdict`` give a plain dict."""

    name: str  # parameter path, e.g. "transformer.blocks.0.attn_norm.weight"
    shape: tuple[int, ...]
    num_params: int  # elements of this tensor
    memory_mb: float  # its bytes / 2**20
    requires_grad: bool
    mean: float | None = None  # None when it has no values (meta device)
    std: float | None = None
    min: float | None = None
    max: float | None = None
    dtype: str = ""
    module: str = ""  # owning module path, "" for the root
    module_type: str = ""
    tied_to: str | None = None  # first path of the same storage: listed, counted once
    nan: int = 0
    inf: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ModelInfo:
    total_params: int = 0
    trainable_params: int = 0
    non_trainable_params: int = 0
    total_memory_mb: float = 0.0  # parameters + buffers, MiB = 2**20 bytes
    layers: list[LayerInfo] = field(default_factory=list)  # one per parameter tensor (tied aliases flagged)
    num_layers: int = 0  # len(layers)
    buffers: list[LayerInfo] = field(default_factory=list)  # running stats etc.: listed, not counted as parameters
    errors: list[str] = field(default_factory=list)  # what went wrong, if anything
    figure: Any = None  # the distribution plot (a matplotlib Figure), with plot_distributions
    plot_path: str | None = None  # where the PNG went

    @property
    def weight_stats(self) -> list[dict[str, Any]]:
        """The layers as dicts (kept for one release: use `layers`)."""
        return [layer.to_dict() for layer in self.layers]


def _records(insp: Any, kind: str) -> list[LayerInfo]:
    params = insp.params
    stats = insp.stats.set_index("name") if insp.stats is not None else None
    types = dict(zip(insp.layers["name"], insp.layers["type"]))
    out = []
    for row in params[params["kind"] == kind].itertuples(index=False):
        s = stats.loc[row.name] if stats is not None and row.name in stats.index else None
        tied = None if is_missing(row.tied_to) else str(row.tied_to)
        out.append(
            LayerInfo(
                name=row.name,
                shape=tuple(int(d) for d in row.shape),
                num_params=int(row.numel),
                memory_mb=int(row.bytes) / _MIB,
                requires_grad=False if is_missing(row.requires_grad) else bool(row.requires_grad),
                mean=_float(s["mean"]) if s is not None else None,
                std=_float(s["std"]) if s is not None else None,
                min=_float(s["min"]) if s is not None else None,
                max=_float(s["max"]) if s is not None else None,
                dtype=str(row.dtype),
                module=str(row.module or ""),
                module_type=str(types.get(row.module or "", "")),
                tied_to=tied,
                nan=int(s["nan"]) if s is not None else 0,
                inf=int(s["inf"]) if s is not None else 0,
            )
        )
    return out


def dump_model_info(
    model: Any,
    logger: logging.Logger | None = None,
    plot_distributions: bool = True,
    save_path: str | os.PathLike | None = None,
) -> ModelInfo:
    """Write SUMMARY, LAYER DETAILS and WEIGHT STATISTICS for `model` through `logger` (one
    record per line) or print, save the distribution plot (`save_path`, default
    ``model_weight_distributions.png``; ``plot_distributions=False``: no plot) and return
    the numbers. Never raises for an odd model: what fails is logged and left out."""
    emit: Callable[[str], None] = logger.info if logger is not None else print
    log = logger or _LOG
    info = ModelInfo()
    try:
        insp = inspect(model, stats=True)
        t = insp.totals
        info.total_params = int(t["total_params"])
        info.trainable_params = int(t["trainable_params"])
        info.non_trainable_params = int(t["non_trainable_params"])
        info.total_memory_mb = (t["param_bytes"] + t["buffer_bytes"]) / _MIB
        info.layers = _records(insp, "parameter")
        info.buffers = _records(insp, "buffer")
        info.num_layers = len(info.layers)
    except Exception as exc:  # contract: report, never raise
        info.errors.append(f"could not inspect {type(model).__name__}: {exc}")
        (logger.error if logger else print)(f"dump_model_info: {info.errors[-1]}")
        return info

    rows = [layer.to_dict() for layer in info.layers]
    totals = {
        "total_params": info.total_params,
        "trainable_params": info.trainable_params,
        "non_trainable_params": info.non_trainable_params,
        "total_memory_mb": info.total_memory_mb,
        "num_layers": info.num_layers,
    }
    lines = model_info_text.summary(insp.name, totals, [b.to_dict() for b in info.buffers])
    lines += model_info_text.layer_details(rows)
    lines += model_info_text.weight_statistics(rows)
    for line in lines:
        emit(line)
    if plot_distributions:
        path = os.fspath(save_path) if save_path is not None else DEFAULT_PLOT_PATH
        existed = os.path.exists(path)
        try:
            info.figure = distribution_figure(insp.stats, path=path)
        except ImportError as exc:
            info.errors.append(f"Matplotlib not available: distribution plot skipped ({exc})")
            log.warning("dump_model_info: %s", info.errors[-1])
        except Exception as exc:  # contract: report, never raise (e.g. an unwritable save_path)
            info.errors.append(f"distribution plot failed: {type(exc).__name__}: {exc}")
            log.error("dump_model_info: %s", info.errors[-1])
        else:
            info.plot_path = path
            emit(f"Distribution plot saved to {path}" + (" (overwrote the previous file)" if existed else ""))
    return info
