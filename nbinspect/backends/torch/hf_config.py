"""A Hugging Face ``config.json`` as a model: the transformers class it names, built on meta.

Only classes transformers ships are built (never ``trust_remote_code``): the config is
data, and nothing it names outside transformers runs. Anything that stops the build (no
transformers, a model type or class it does not know, a config it rejects) raises
:class:`UnknownArchitecture` with one line saying why, and the caller falls back to the
untyped tree.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from ...errors import first_line
from .meta_build import empty_weights

__all__ = ["CONFIG_NAME", "UnknownArchitecture", "hf_model", "is_hf_config"]

CONFIG_NAME = "config.json"


class UnknownArchitecture(ValueError):
    """The config does not lead to a model transformers can build; the message says why."""


def is_hf_config(path: str | os.PathLike) -> bool:
    """Whether `path` is a JSON file of a transformers config (it has a ``model_type``)."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(doc, dict) and "model_type" in doc


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """transformers' warnings about the config (token ids outside a tiny vocabulary, ...) kept
    off stderr while it builds; its verbosity is put back after."""
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)


def hf_model(config_path: str | os.PathLike) -> tuple[nn.Module, str]:
    """(the model `config_path` describes, parameters on meta; a one-line description of it)."""
    config_path = Path(config_path)
    try:
        import transformers
    except ImportError:
        raise UnknownArchitecture(
            f"{config_path}: transformers is not installed, so module types are unknown"
        ) from None
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise UnknownArchitecture(
            f"{config_path}: transformers {transformers.__version__} does not know model_type {model_type!r}"
        )
    try:
        with _quiet(transformers):
            # a folder's config.json by its folder, so name_or_path is what from_pretrained records
            where = config_path.parent if config_path.name == CONFIG_NAME else config_path
            config: Any = transformers.AutoConfig.from_pretrained(str(where), trust_remote_code=False)
    except Exception as exc:  # transformers' own words on why (bad values, remote code)
        raise UnknownArchitecture(f"{config_path}: transformers cannot read it: {first_line(exc)}") from None
    architecture = (getattr(config, "architectures", None) or [None])[0]
    model_class: Any = getattr(transformers, architecture, None) if architecture else transformers.AutoModel
    if model_class is None or (architecture and not hasattr(model_class, "_from_config")):
        raise UnknownArchitecture(
            f"{config_path}: transformers {transformers.__version__} has no model class {architecture!r}"
        )
    try:
        with empty_weights(), _quiet(transformers):
            if architecture:
                # what AutoModel*.from_config calls once it has picked the class: applies the config's dtype
                model = model_class._from_config(config)
            else:
                model = model_class.from_config(config, trust_remote_code=False)
    except Exception as exc:
        name = architecture or "AutoModel"
        raise UnknownArchitecture(f"{config_path}: transformers could not build {name}: {first_line(exc)}") from None
    model.eval()  # as from_pretrained leaves it
    return model, f"{type(model).__name__} built from {config_path.name} (transformers {transformers.__version__})"
