"""A Hugging Face ``config.json`` as a model: the transformers class it names, built on meta.

Only classes transformers ships are built (never ``trust_remote_code``): the config is
data, and nothing it names outside transformers runs. Anything that stops the build (no
transformers, a model type or class it does not know, a config it rejects) raises
:class:`UnknownArchitecture` with one line saying why, and the caller falls back to the
untyped tree.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import nn

from ...core.limits import MAX_CONFIG_BYTES, MAX_CONFIG_LAYERS, MAX_CONFIG_POSITIONS, shown
from ...errors import CheckpointError, first_line
from ...io.files import FileHandle
from ...io.text import load_json
from .meta_build import build_on_meta

__all__ = ["CONFIG_NAME", "UnknownArchitecture", "hf_model", "is_hf_config"]

CONFIG_NAME = "config.json"


class UnknownArchitecture(ValueError):
    """The config does not lead to a model transformers can build; the message says why."""


_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers")
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "n_ctx", "seq_length")


def read_hf_config(path: str | os.PathLike) -> dict[str, Any]:
    """The config.json at `path` (already confined by the caller), read within the limits:
    at most MAX_CONFIG_BYTES, integers of at most 20 digits, nesting at most 64, and the
    numbers a model build multiplies (layers, positions) within MAX_CONFIG_LAYERS and
    MAX_CONFIG_POSITIONS, checked at every level (text_config & co.)."""
    handle = FileHandle.open(path)
    try:
        doc = load_json(handle, MAX_CONFIG_BYTES, "config.json", allow_nan=True)
    finally:
        handle.close()
    if not isinstance(doc, dict):
        raise CheckpointError(f"{shown(path)}: config.json is not a JSON object")
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                limit = (
                    MAX_CONFIG_LAYERS if key in _LAYER_KEYS else MAX_CONFIG_POSITIONS if key in _POSITION_KEYS else None
                )
                if limit is not None and isinstance(value, int | float) and value > limit:
                    raise CheckpointError(
                        f"{shown(path)}: {key} = {value:.4g} is over the limit of {limit:,} for building the model"
                    )
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return doc


def is_hf_config(path: str | os.PathLike) -> bool:
    """Whether `path` is a JSON file of a transformers config (it has a ``model_type``)."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file():
        return False
    try:
        handle = FileHandle.open(path)
    except CheckpointError:
        return False
    try:
        if handle.size > MAX_CONFIG_BYTES:
            return False
        head = handle.pread(0, handle.size)
    finally:
        handle.close()
    return b'"model_type"' in head


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

    try:
        doc = read_hf_config(config_path)
    except CheckpointError as exc:  # the weights are still read; the note says why there is no model
        raise UnknownArchitecture(str(exc)) from None
    model_type = doc.get("model_type")
    if model_type not in CONFIG_MAPPING:
        raise UnknownArchitecture(
            f"{shown(config_path)}: transformers {transformers.__version__} does not know model_type "
            f"{shown(str(model_type), 60)!r}"
        )
    try:
        with _quiet(transformers):
            # the checked document, never the path: transformers would follow symlinks itself
            where = config_path.parent if config_path.name == CONFIG_NAME else config_path
            config: Any = CONFIG_MAPPING[str(model_type)].from_dict(doc)
            config._name_or_path = str(where)
    except Exception as exc:  # transformers' own words on why (bad values, remote code)
        raise UnknownArchitecture(f"{config_path}: transformers cannot read it: {first_line(exc)}") from None
    architecture = (getattr(config, "architectures", None) or [None])[0]
    if architecture is not None and not isinstance(architecture, str):
        raise UnknownArchitecture(
            f"{config_path}: architectures[0] is a {type(architecture).__name__}, not a class name"
        )
    model_class: Any = getattr(transformers, architecture, None) if architecture else transformers.AutoModel
    if model_class is None or (architecture and not hasattr(model_class, "_from_config")):
        raise UnknownArchitecture(
            f"{config_path}: transformers {transformers.__version__} has no model class "
            f"{shown(str(architecture), 60)!r}"
        )

    def build() -> nn.Module:
        if architecture:  # what AutoModel*.from_config calls once it has picked the class: applies the config's dtype
            return model_class._from_config(config)
        return model_class.from_config(config, trust_remote_code=False)

    try:
        with _quiet(transformers):
            model, note = build_on_meta(build)
    except Exception as exc:
        name = architecture or "AutoModel"
        raise UnknownArchitecture(f"{config_path}: transformers could not build {name}: {first_line(exc)}") from None
    model.eval()  # as from_pretrained leaves it
    built = f"{type(model).__name__} built from {config_path.name} (transformers {transformers.__version__})"
    return model, f"{built}; {note}" if note else built
