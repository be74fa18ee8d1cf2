"""Loading a checkpoint's weights into a freshly built model, with a report of the keys.

The model comes from a class or factory (or ``"pkg.module:factory"``) called with keyword
arguments from a dict or a YAML/JSON file. Weights whose shapes match are copied in;
missing, unexpected and mismatched keys are reported, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from ...core.source import ModelSource, TensorEntry
from ...core.tree import PACKED_KEY
from ...dtypes import dtype_name
from ...io.state_dict import packed_weight_bias, unpacked
from .meta_build import call_factory
from .source import from_module

__all__ = ["LoadReport", "load_into", "read_config", "resolve_factory", "saved_ties"]

Saved = TypeVar("Saved")


@dataclass(frozen=True)
class LoadReport:
    """How a checkpoint's keys met a model's state_dict keys."""

    loaded: int
    missing: tuple[str, ...] = ()  # in the model, not in the checkpoint (left as initialised)
    unexpected: tuple[str, ...] = ()  # in the checkpoint, not in the model (ignored)
    mismatched: tuple[tuple[str, tuple, tuple], ...] = ()  # (name, checkpoint shape, model shape): not loaded
    cast: tuple[tuple[str, str, str], ...] = ()  # (name, checkpoint dtype, model dtype): converted

    @property
    def ok(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def __str__(self) -> str:
        lines = [f"Loaded {self.loaded} tensors" + ("; every key matched" if self.ok else "")]
        for title, items in (
            ("missing (kept the model's initial values)", self.missing),
            ("unexpected (ignored)", self.unexpected),
            (
                "shape mismatch (not loaded)",
                [f"{n}: checkpoint {list(a)} vs model {list(b)}" for n, a, b in self.mismatched],
            ),
            ("dtype converted", [f"{n}: {a} -> {b}" for n, a, b in self.cast]),
        ):
            if items:
                lines.append(f"{len(items)} {title}: " + ", ".join(items[:10]) + (" ..." if len(items) > 10 else ""))
        return "\n".join(lines)


def saved_ties(tensors: Iterable[TensorEntry], saved: Mapping[str, Saved]) -> dict[Hashable, Saved]:
    """The tie rule of both load reports (:func:`load_into` and :func:`.attach.attach`): a tie
    saved once is present at all its paths. Each storage of the model's `tensors` that has a
    path among the `saved` state_dict keys -> what is saved at its first such path."""
    out: dict[Hashable, Saved] = {}
    for t in tensors:
        if t.name in saved:
            out.setdefault(t.storage_key, saved[t.name])
    return out


def _unpacked(saved: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The model's state_dict tensors, a quantized Linear's packed pair as its `weight` and
    `bias` (the names its checkpoint source and live source give them)."""
    out: dict[str, torch.Tensor] = {}
    for name, value in saved.items():
        pair = unpacked(name, value)
        if pair is not None:
            out.update(pair)
        elif isinstance(value, torch.Tensor):
            out[name] = value
    return out


def _repacked(matched: dict[str, torch.Tensor], saved: Mapping[str, Any]) -> Mapping[str, Any]:
    """`matched` as ``load_state_dict`` takes it: a quantized Linear's weight and bias packed
    back into its one entry (a bias the file lacks kept from the model), the other packed
    entries (their dtype) as the model has them, and the model's per-module versions, which
    say how each module's entries are laid out."""
    out: OrderedDict[str, Any] = OrderedDict(matched)
    for name, value in saved.items():
        packed = packed_weight_bias(name, value)
        if packed is None:
            continue
        base = name.removesuffix(PACKED_KEY)
        if base + "weight" not in out:  # a bias alone cannot be packed: the model keeps its pair
            out.pop(base + "bias", None)
            continue
        out[name] = (out.pop(base + "weight"), out.pop(base + "bias", packed[1]))
        dtype_key = base + "dtype"
        if dtype_key in saved:
            out[dtype_key] = saved[dtype_key]
    out._metadata = getattr(saved, "_metadata", None)  # type: ignore[attr-defined]  # torch's own attribute
    return out


def resolve_factory(spec: str | type | Callable[..., Any]) -> Callable[..., Any]:
    """A callable from ``"pkg.module:attr"`` (attr may be dotted), or `spec` if callable."""
    if callable(spec):
        return spec
    module_name, sep, attr = str(spec).partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"model {spec!r}: expected 'package.module:factory'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"model {spec!r}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"model {spec!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"model {spec!r}: {attr!r} is not callable")
    return obj


def read_config(config: Mapping[str, Any] | str | os.PathLike | None) -> dict[str, Any]:
    """Keyword arguments for the model factory: a dict, or a YAML (or JSON) file of one."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    from ...core.limits import MAX_YAML_BYTES
    from ...io.files import FileHandle
    from ...io.text import load_yaml, read_text

    path = Path(config)
    handle = FileHandle.open(path)
    try:
        data = load_yaml(read_text(handle, MAX_YAML_BYTES, "config"), handle.where)
    finally:
        handle.close()
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: config must be a mapping of keyword arguments, got {type(data).__name__}")
    return dict(data)


_FACTORY_KEYS = ("_target_", "_class_path", "class_path")  # a config naming its factory (known_model.FACTORY_KEYS)


def _names_factory(data: Mapping[str, Any]) -> bool:
    return any(isinstance(data.get(k), str) for k in _FACTORY_KEYS)


def _takes(build: Callable[..., Any] | None, keys: Any) -> bool:
    """Whether `build` accepts every one of `keys` (those starting with ``_`` aside) as keywords."""
    if build is None:
        return False
    try:
        params = inspect.signature(build).parameters.values()
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return True
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return all(str(k) in names for k in keys if not str(k).startswith("_"))


def select_section(
    data: Mapping[str, Any], factory: Callable[..., Any] | None = None, key: str | None = None, where: str = "config"
) -> tuple[dict[str, Any], str | None]:
    """The part of a config that configures the model, and a note saying which section was
    used (None for the whole file). A real project nests the model's settings under
    ``model:`` beside ``data:`` and ``training:``:

    1. `key` (``--config-key model``; dotted ``a.b`` allowed) names the section;
    2. a top level that names a factory (``_target_``...) or whose keys `factory` all takes
       is used whole;
    3. else the one top-level mapping that fits (names a factory, or whose keys `factory`
       takes); of several, the one named ``model``; otherwise a ValueError saying to choose
       with ``--config-key``.
    """
    if key:
        node: Any = data
        for part in key.split("."):
            if not isinstance(node, Mapping) or not isinstance(node.get(part), Mapping):
                found = sorted(str(k) for k in node) if isinstance(node, Mapping) else []
                raise ValueError(f"{where}: no section {key!r} (its keys: {', '.join(found)})")
            node = node[part]
        return dict(node), f"using section {key!r} of {where}"
    if _names_factory(data) or (factory is not None and _takes(factory, data.keys())):
        return dict(data), None
    sections = {str(k): v for k, v in data.items() if isinstance(v, Mapping)}
    fits = [k for k, v in sections.items() if (_takes(factory, v.keys()) if factory is not None else _names_factory(v))]
    if len(fits) > 1 and "model" in fits:
        fits = ["model"]
    if len(fits) == 1:
        return dict(sections[fits[0]]), f"using section {fits[0]!r} of {where}"
    if len(fits) > 1:
        names = ", ".join(repr(k) for k in fits)
        raise ValueError(f"{where}: sections {names} all fit the model: choose one with --config-key")
    return dict(data), None


def read_model_config(
    config: Mapping[str, Any] | str | os.PathLike | None,
    factory: Callable[..., Any] | None = None,
    key: str | None = None,
) -> tuple[dict[str, Any], str | None]:
    """:func:`read_config`, then :func:`select_section`."""
    where = Path(config).name if isinstance(config, (str, os.PathLike)) else "config"
    return select_section(read_config(config), factory, key, where)


def load_into(
    source: ModelSource, factory: str | type | Callable[..., Any], config: Any = None, config_key: str | None = None
) -> ModelSource:
    """Build the model, copy the checkpoint's matching weights in, and return the model's
    source, with the checkpoint's metadata and ``metadata["load_report"]``."""
    build = resolve_factory(factory)
    kwargs, _ = read_model_config(config, build, config_key)
    model = call_factory(build, kwargs, where=str(config) if isinstance(config, (str, os.PathLike)) else "config")
    saved = model.state_dict()
    target = _unpacked(saved)
    entries = {t.name: t for t in source.tensors}
    matched: dict[str, torch.Tensor] = {}
    mismatched: list[tuple[str, Any, tuple[int, ...]]] = []
    cast: list[tuple[str, str, str]] = []
    for name, t in entries.items():
        if name not in target:
            continue
        if tuple(target[name].shape) != t.shape:
            mismatched.append((name, t.shape, tuple(target[name].shape)))
            continue
        if dtype_name(target[name].dtype) != t.dtype:
            cast.append((name, t.dtype, dtype_name(target[name].dtype)))
        matched[name] = t.values()
    with torch.no_grad():
        model.load_state_dict(_repacked(matched, saved), strict=False)
    for name in matched:
        entries[name].release()
    result = from_module(model, source.name)
    loaded = saved_ties(result.tensors, matched)
    # state_dict keys that are no path of the module source (a quantized module's packed
    # parameters) are their own storage
    storage = {t.name: t.storage_key for t in result.tensors}
    report = LoadReport(
        loaded=len(matched),
        missing=tuple(n for n in target if n not in entries and storage.get(n, n) not in loaded),
        unexpected=tuple(n for n in entries if n not in target),
        mismatched=tuple(mismatched),
        cast=tuple(cast),
    )
    return dataclasses.replace(result, metadata={**source.metadata, "load_report": report})
