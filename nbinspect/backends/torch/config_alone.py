"""A model from its config alone, built on meta: no checkpoint, no weights allocated.

The config is keyword arguments for a factory (a dict, or a YAML/JSON file), or a Hugging
Face ``config.json`` (it has a ``model_type``), which names its own transformers class. A
config file may also name its factory (Hydra's ``_target_``, LightningCLI's
``_class_path``, jsonargparse's ``class_path`` with ``init_args``); the caller chose the
file, but a file can come from anywhere: that factory is called only with ``trust=True``
(``--trust``) or when the project trusts it (``[tool.nbinspect] trust`` in its
``pyproject.toml``, approved once with ``nbinspect trust``, see
:mod:`nbinspect.io.project_trust`), the same rule as a checkpoint naming its factory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from ...errors import UnsafeCheckpointError
from ...io.project_trust import project_trust
from ...terminal import safe_text
from .hf_config import hf_model, is_hf_config
from .known_model import carried_config, recorded_factory
from .meta_build import call_factory, factory_name
from .model_loader import read_model_config, resolve_factory

__all__ = ["meta_model"]


def meta_model(
    model: str | type | Callable[..., Any] | None,
    config: Mapping[str, Any] | str | os.PathLike | None,
    config_key: str | None = None,
    *,
    trust: bool = False,
) -> tuple[nn.Module, str]:
    """(the model `model` builds with `config` (its section `config_key`, or the one section
    that fits), parameters on meta; how it was built)."""
    if model is None and isinstance(config, (str, os.PathLike)) and is_hf_config(config):
        return hf_model(config)
    where = Path(config).name if isinstance(config, (str, os.PathLike)) else "config"
    kwargs, section = read_model_config(config, None if model is None else resolve_factory(model), config_key)
    if section:
        where = f"{where}, {section.split(' of ')[0].removeprefix('using ')}"
    trusted = ""
    if model is None:
        wrapped = {"config": kwargs}
        model = recorded_factory(wrapped)
        if model is None:
            raise ValueError(
                f"{where}: names no model (no _target_, _class_path or class_path, no Hugging Face model_type): "
                "pass the factory, e.g. --model package.module:factory"
            )
        from_file = isinstance(config, (str, os.PathLike))  # a dict in memory is the caller's own
        if from_file and not trust and not callable(model):  # the same rule as a checkpoint naming its factory
            trust_list = project_trust()
            trusted_by = trust_list.covers(str(model))
            note = trust_list.unapproved_note(str(model))
            if trusted_by is None and note is not None:
                raise UnsafeCheckpointError(f"{where}: names its factory {safe_text(str(model), 120)!r}; {note}")
            if trusted_by is None:
                raise UnsafeCheckpointError(
                    f"{where}: names its factory {safe_text(str(model), 120)!r}; running code a config file names "
                    "needs trust=True (--trust on the command line), or the project's trust (trust = [...] under "
                    "[tool.nbinspect] in pyproject.toml, approved with `nbinspect trust`), or pass the factory "
                    "yourself (--model). Nothing was run"
                )
            trusted = f" (the factory trusted by {trusted_by})"
        kwargs = (carried_config(wrapped) or ("", {}))[1]
    build = resolve_factory(model)
    return call_factory(
        build, kwargs, meta=True, where=where
    ), f"{factory_name(build)} with {where}, parameters on meta{trusted}"
