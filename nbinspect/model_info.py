"""`dump_model_info`: the print-style report, for people coming from such utilities."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .inspection import inspect
from .render.format import format_bytes, format_count, format_shape, is_missing, trainable_status
from .render.json_export import tensors_by_module
from .render.plots import distribution_figure

__all__ = ["ModelInfo", "dump_model_info"]

_RULE = "=" * 60
_LOG = logging.getLogger("nbinspect")


@dataclass
class ModelInfo:
    total_params: int = 0
    trainable_params: int = 0
    non_trainable_params: int = 0
    total_memory_mb: float = 0.0  # parameters + buffers, MB = 2**20 bytes
    layers: list[dict[str, Any]] = field(default_factory=list)  # one per leaf module
    num_layers: int = 0
    errors: list[str] = field(default_factory=list)  # what went wrong, if anything
    weight_stats: list[dict[str, Any]] = field(default_factory=list)  # per parameter, with plot_distributions
    figure: Any = None  # the distribution plot (a matplotlib Figure), with plot_distributions


def _emit(logger: logging.Logger | None) -> Callable[[str], None]:
    return logger.info if logger is not None else print


def _leaf_layers(insp) -> list[dict[str, Any]]:
    tensors = tensors_by_module(insp.params)
    out = []
    for row in insp.layers.itertuples(index=False):
        if row.is_leaf and row.name and is_missing(row.alias_of):  # an alias is the same module again
            out.append(
                {
                    "name": row.name,
                    "type": row.type,
                    "params": int(row.params),
                    "trainable": trainable_status(row.trainable_params, row.frozen_params) or None,
                    "shapes": {t["name"]: t["shape"] for t in tensors.get(row.name, [])},
                }
            )
    return out


def dump_model_info(
    model: Any,
    logger: logging.Logger | None = None,
    plot_distributions: bool = False,
    save_path: str | None = None,
) -> ModelInfo:
    """Write SUMMARY and LAYER DETAILS for `model` through `logger` (or print) and return
    the numbers. Never raises for an odd model: what fails is logged and left out."""
    emit = _emit(logger)
    info = ModelInfo()
    try:
        insp = inspect(model, stats=plot_distributions)
        t = insp.totals
        info.total_params = t["total_params"]
        info.trainable_params = t["trainable_params"]
        info.non_trainable_params = t["non_trainable_params"]
        info.total_memory_mb = (t["param_bytes"] + t["buffer_bytes"]) / 2**20
        info.layers = _leaf_layers(insp)
        info.num_layers = len(info.layers)
    except Exception as exc:  # contract: report, never raise
        info.errors.append(f"could not inspect {type(model).__name__}: {exc}")
        (logger.error if logger else print)(f"dump_model_info: {info.errors[-1]}")
        return info

    emit(_RULE + "\nSUMMARY\n" + _RULE)
    emit(f"Model: {insp.name}")
    emit(f"Total parameters: {format_count(info.total_params)}")
    emit(f"Trainable parameters: {format_count(info.trainable_params)}")
    emit(f"Non-trainable parameters: {format_count(info.non_trainable_params)}")
    emit(f"Memory (parameters + buffers): {format_bytes(t['param_bytes'] + t['buffer_bytes'])}")
    emit(_RULE + "\nLAYER DETAILS\n" + _RULE)
    for layer in info.layers:
        shapes = ", ".join(f"{k} {format_shape(v)}" for k, v in layer["shapes"].items())
        status = layer["trainable"] or "no parameters"
        emit(
            f"{layer['name']} ({layer['type']}): {format_count(layer['params'])} params, {status}"
            + (f"; {shapes}" if shapes else "")
        )
    if plot_distributions:
        _weight_statistics(insp.stats, emit, info, save_path, logger or _LOG)
    return info


def _weight_statistics(
    frame, emit: Callable[[str], None], info: ModelInfo, save_path: str | None, log: logging.Logger
) -> None:
    """The WEIGHT STATISTICS section (one line per parameter) and the distribution plot,
    saved to `save_path` when given. A missing matplotlib or a failing save is logged."""
    emit(_RULE + "\nWEIGHT STATISTICS\n" + _RULE)
    for row in frame[frame["kind"] == "parameter"].itertuples(index=False):
        if row.hist_counts is None:
            emit(f"{row.name}: {row.note}")
            continue
        info.weight_stats.append(
            {k: getattr(row, k) for k in ("name", "mean", "std", "min", "max", "abs_mean", "zeros")}
        )
        line = (
            f"{row.name}: mean {row.mean:.4g}, std {row.std:.4g}, min {row.min:.4g}, max {row.max:.4g}, "
            f"zeros {row.zeros:.1%}"
        )
        emit(line + (f", {row.nan} NaN, {row.inf} Inf" if row.nan or row.inf else ""))
    try:
        info.figure = distribution_figure(frame, path=save_path)
    except ImportError as exc:
        info.errors.append(f"no distribution plot: {exc}")
        log.warning("dump_model_info: %s", info.errors[-1])
    except Exception as exc:  # contract: report, never raise (e.g. an unwritable save_path)
        info.errors.append(f"distribution plot failed: {type(exc).__name__}: {exc}")
        log.error("dump_model_info: %s", info.errors[-1])
    else:
        if save_path is not None:
            emit(f"Distribution plot saved to {save_path}")
