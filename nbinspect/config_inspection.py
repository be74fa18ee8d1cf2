"""Sizing a model from its config alone: built on meta, inspected, traced and planned."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from .backends.torch.config_alone import meta_model
from .backends.torch.model_loader import read_model_config, resolve_factory
from .inspection import Inspection, inspect, memory, with_memory

__all__ = ["build_on_meta", "from_config", "with_plan"]


def with_plan(
    inspection: Inspection, model: Any, *, input: Any = None, input_dtype: Any = None, **plan: Any
) -> Inspection:
    """`inspection` of `model` holding its training-memory plan (``memory`` frame); `plan`
    takes :func:`nbinspect.memory`'s options (``batch_size``, ``optimizer``, ``precision``, ...)."""
    return with_memory(inspection, memory(model, input=input, input_dtype=input_dtype, **plan))


def model_config(
    model: str | type | Callable[..., Any] | None,
    config: Mapping[str, Any] | str | os.PathLike,
    config_key: str | None = None,
) -> dict[str, Any]:
    """The keyword arguments `config` holds for `model`: its section `config_key`, or the
    one section that fits (see :func:`from_config`)."""
    return read_model_config(config, None if model is None else resolve_factory(model), config_key)[0]


def build_on_meta(
    model: str | type | Callable[..., Any] | None = None,
    config: Mapping[str, Any] | str | os.PathLike | None = None,
    config_key: str | None = None,
    *,
    trust: bool = False,
) -> nn.Module:
    """The module `model` builds from `config` (as :func:`from_config` takes them), with its
    parameters on the meta device: inspect, trace or plan it like any model."""
    return meta_model(model, config, config_key, trust=trust)[0]


def from_config(
    model: str | type | Callable[..., Any] | None = None,
    config: Mapping[str, Any] | str | os.PathLike | None = None,
    *,
    name: str | None = None,
    input: Any = None,
    input_dtype: Any = None,
    flops: bool = True,
    batch_size: int | None = None,
    optimizer: str = "adam",
    precision: str = "fp32",
    trust: bool = False,
    config_key: str | None = None,
) -> Inspection:
    """Inspect the model `model` builds from `config`, without a checkpoint and without
    allocating its weights: parameters are created on the meta device.

    `model` is a class, a factory, or ``"pkg.module:factory"``; `config` its keyword
    arguments (a dict, or a YAML/JSON file). A config file may name the factory itself
    (``_target_``, ``_class_path``, ``class_path`` + ``init_args``), and a Hugging Face
    ``config.json`` names its transformers class: then `model` is left out. Keys the factory
    does not take are named in a ValueError before it runs. A project config that nests the
    model's settings (``model:`` beside ``data:`` and ``training:``) is read at its section
    `config_key` (dotted for deeper ones), or at the one section that fits the factory (or
    names one); the Inspection's ``metadata["model"]`` says which.

    The Inspection has the structure frames, the trace with `input` (a shape tuple makes
    zeros of `input_dtype`, e.g. ``torch.long`` for token ids; it runs on fake tensors) and
    the ``memory`` frame: the training-memory plan at `batch_size` with `optimizer` and
    `precision`; ``metadata["model"]`` says how the model was built. No weight statistics:
    there are no values. :func:`build_on_meta` gives the module itself."""
    built, how = meta_model(model, config, config_key, trust=trust)
    insp = inspect(built, name=name, input=input, input_dtype=input_dtype, flops=flops, stats=False)
    metadata: dict[str, Any] = {"model": how}
    if config is not None and not how.startswith("transformers"):
        try:  # the keyword arguments the model was built with, shown as the report's configuration
            used = model_config(model, config, config_key)
            metadata["config"] = {k: v for k, v in used.items() if not str(k).startswith("_")}
        except ValueError:
            pass
    insp = dataclasses.replace(insp, metadata=metadata)
    return with_plan(
        insp,
        built,
        input=input,
        input_dtype=input_dtype,
        batch_size=batch_size,
        optimizer=optimizer,
        precision=precision,
    )
