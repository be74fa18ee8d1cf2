"""Checkpoints that say what model they are: the model rebuilt on meta, the file attached.

Two ways a checkpoint knows its model:

- a Hugging Face ``config.json`` beside the weights (a folder, or a file or shard index in
  it): transformers builds the class it names (see :mod:`.hf_config`);
- a training checkpoint holding its constructor arguments (``config``, ``hparams`` or
  Lightning's ``hyper_parameters``) and the factory that takes them: a top-level
  ``model_factory``, or in the config Hydra's ``_target_``, LightningCLI's ``_class_path``
  or jsonargparse's ``class_path`` with ``init_args``, at its top level or in the one section
  that names a factory (a project's ``model:`` beside ``data:`` and ``training:``). A factory
  named by a file is code the file chose, so it is imported and run only with ``trust=True``
  or when the project trusts it (:mod:`nbinspect.io.project_trust`); a factory the caller
  passes (``model=``) takes the checkpoint's config without that.

When the model cannot be built the source stays the untyped tree and ``metadata["model"]``
says why, in one line.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...core.limits import shown
from ...core.source import ModelSource
from ...io.files import Root
from ...io.project_trust import project_trust
from ...io.state_dict import CONFIG_KEYS
from .attach import attach
from .hf_config import CONFIG_NAME, UnknownArchitecture, hf_model, is_hf_config
from .meta_build import call_factory, factory_name
from .model_loader import load_into, resolve_factory, select_section

__all__ = ["carried_config", "recorded_factory", "with_model"]

FACTORY_KEYS = ("_target_", "_class_path", "class_path")  # inside a config: Hydra, LightningCLI, jsonargparse


def _model_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The part of a carried config that configures the model: the whole, or its one section
    naming a factory (``model:`` with ``_target_`` beside ``data:`` and ``training:``)."""
    try:
        return select_section(config)[0]
    except ValueError:  # several sections name factories: none is the model's for sure
        return config


def carried_config(metadata: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(the entry's name, the keyword arguments) of the config a checkpoint carries, if any.
    Keys starting with ``_`` are the training framework's (``_target_``, ``_instantiator``)."""
    for key in CONFIG_KEYS:
        config = metadata.get(key)
        if isinstance(config, Mapping):
            config = _model_section(config)
            args = config.get("init_args") if "class_path" in config else config
            if isinstance(args, Mapping):
                return key, {str(k): v for k, v in args.items() if not str(k).startswith("_")}
    return None


def recorded_factory(metadata: Mapping[str, Any]) -> str | None:
    """The factory a checkpoint names, as ``"pkg.module:attr"``."""
    spec = metadata.get("model_factory")
    for key in CONFIG_KEYS:
        config = metadata.get(key)
        if spec is None and isinstance(config, Mapping):
            config = _model_section(config)
            spec = next((config[k] for k in FACTORY_KEYS if isinstance(config.get(k), str)), None)
    if not isinstance(spec, str) or not spec:
        return None
    if ":" not in spec and "." in spec:  # dotted path of a class or function: pkg.module.Class
        module, _, attr = spec.rpartition(".")
        spec = f"{module}:{attr}"
    return spec


def _hf_config_for(path: Path | None) -> Path | None:
    if path is None:
        return None
    folder = path if path.is_dir() else path.parent
    if not os.path.lexists(folder / CONFIG_NAME):
        return None
    Root(folder).resolve(CONFIG_NAME, shown(folder))  # a symlink out of the folder (or hub repo) is refused
    config = folder / CONFIG_NAME
    return config if is_hf_config(config) else None


def _noted(source: ModelSource, reason: str) -> ModelSource:
    return dataclasses.replace(source, metadata={**source.metadata, "model": reason})


def _from_recorded(source: ModelSource, spec: str, trust: bool) -> ModelSource:
    trusted = ""
    if not trust:
        trust_list = project_trust()
        trusted_by = trust_list.covers(spec)
        note = trust_list.unapproved_note(spec)
        if trusted_by is None and note is not None:
            return _noted(source, f"the checkpoint names its model {spec!r}; {note}")
        if trusted_by is None:
            return _noted(
                source,
                f"the checkpoint names its model {spec!r}; module types are unknown until it is built: pass "
                "trust=True (--trust) to import and run that code, list it under [tool.nbinspect] trust in your "
                "project's pyproject.toml (and run `nbinspect trust` there), or pass model=... (--model)",
            )
        trusted = f" (the factory trusted by {trusted_by})"
    found = carried_config(source.metadata)
    where, kwargs = found if found else ("checkpoint", {})
    build = resolve_factory(spec)
    model = call_factory(build, kwargs, meta=True, where=f"{source.name}: {where!r}")
    return attach(model, source, built=f"{factory_name(build)} from {spec!r} with the checkpoint's {where!r}{trusted}")


def with_model(
    source: ModelSource,
    path: str | os.PathLike | None,
    *,
    model: str | type | Callable[..., Any] | None = None,
    config: Any = None,
    trust: bool = False,
) -> ModelSource:
    """`source` (read from `path`, if from a file) with its model: `model` built with `config`
    (default: the config the checkpoint carries) and loaded; or else the model the checkpoint
    knows, on meta with the file attached; or else `source` as it is."""
    if model is not None:
        if config is None and (found := carried_config(source.metadata)) is not None:
            config = found[1]
        return load_into(source, model, config)
    hf_config = _hf_config_for(Path(path) if path is not None else None)
    if hf_config is not None:
        try:
            built, how = hf_model(hf_config)
        except UnknownArchitecture as exc:
            return _noted(source, f"untyped tree: {exc}")
        return attach(built, source, built=how)
    spec = recorded_factory(source.metadata)
    return source if spec is None else _from_recorded(source, spec, trust)
