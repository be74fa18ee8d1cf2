"""Checkpoint files and folders as sources, and ``load_checkpoint``, the public entry point.

Formats are recognised by their first bytes, not their names: a zip (``torch.save``), a
legacy pickle, or a safetensors header. A ``*.index.json`` (Hugging Face sharded layout)
or a folder holding one, or holding safetensors/torch files, becomes one source.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from ..backends.torch.known_model import with_model
from ..core.limits import MAX_INDEX_BYTES, MAX_TENSORS, check_module_paths, check_tensor_name, shown
from ..core.source import ModelSource
from ..core.tree import StoredTensor, build_source, natural_key
from ..errors import CheckpointError
from .dcp import METADATA_FILE, read_dcp
from .files import FileHandle, Root, check_name
from .npz_file import is_npz, read_npz
from .optimizer_kinds import optimizer_shapes, with_optimizer_kinds
from .safetensors_file import read_safetensors
from .state_dict import describe, from_mapping, split_checkpoint, stored_tensors
from .text import load_json
from .torch_file import ZIP_MAGIC, load_torch_file, read_torch

__all__ = ["from_path", "load_checkpoint"]

_PICKLE_MAGIC = b"\x80"
_TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def _read_file(handle: FileHandle, trust: bool, key: str | None) -> tuple[list[StoredTensor], dict[str, Any], bool]:
    """(tensors, metadata, whether the file order should be sorted) of one open file."""
    path, where = handle.path, handle.where
    head = handle.pread(0, min(9, handle.size))
    if not head:
        raise CheckpointError(f"{where}: empty file")
    if head[8:9] == b"{":  # safetensors: 8-byte header length, then JSON (checked first: a length can start with 0x80)
        stored, meta = read_safetensors(handle)
        return stored, {"format": "safetensors", **meta}, True
    if head.startswith(ZIP_MAGIC) and is_npz(handle):  # numpy.savez / mlx.core.savez: a zip of .npy arrays
        stored, meta = read_npz(handle)
        return stored, {"format": "npz", **meta}, True
    if head.startswith((ZIP_MAGIC, _PICKLE_MAGIC)):
        if path.suffix == ".safetensors":  # torch.load would hand the file to the safetensors library by its name
            raise CheckpointError(f"{where}: named .safetensors but holds a torch.save pickle; rename it to .pt")
        records = None
        if trust:  # the user chose to run the file's code
            obj, _ = load_torch_file(path, trust=True)
        else:
            obj, ctx = read_torch(handle)
            records = ctx.records
        if isinstance(obj, nn.Module):  # a whole pickled model (trusted): its weights
            obj = {"state_dict": obj, "model_class": type(obj).__name__}
        if not isinstance(obj, Mapping):
            raise CheckpointError(f"{where}: holds a {type(obj).__name__}, not a state_dict or checkpoint dict")
        weights, meta = split_checkpoint(obj, key, where)
        if isinstance(weights, nn.Module):  # a pickled model inside a (trusted) checkpoint
            weights, meta["model_class"] = weights.state_dict(), type(weights).__name__
        if not isinstance(weights, Mapping):
            raise CheckpointError(
                f"{where}: entry {shown(str(meta.get('weights_key')))!r} holds a {type(weights).__name__}, "
                "not a state_dict"
            )
        stored = stored_tensors(weights, meta, where, None, stored=True, records=records)
        stored, kinds = with_optimizer_kinds(stored, *optimizer_shapes(obj))
        if kinds:
            meta["kinds"] = kinds
        return stored, {"format": "torch", **meta}, False
    raise CheckpointError(
        f"{where}: not a checkpoint format nbinspect reads (torch.save zip or pickle, safetensors, npz, "
        "*.index.json of shards, or a folder of these)"
    )


def _weight_map(handle: FileHandle) -> tuple[dict[str, str], dict[str, Any]]:
    """(tensor name -> shard file name, the index's metadata), checked: a map of strings."""
    where = handle.where
    doc = load_json(handle, MAX_INDEX_BYTES, "shard index")
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict):
        raise CheckpointError(f"{where}: not a shard index with a 'weight_map' of tensor names to shard files")
    if len(weight_map) > MAX_TENSORS:
        raise CheckpointError(f"{where}: {len(weight_map):,} tensors, over the limit of {MAX_TENSORS:,}")
    for name, shard in weight_map.items():
        check_tensor_name(name, where)
        if not isinstance(shard, str):
            raise CheckpointError(
                f"{where}: tensor {shown(name)!r} is mapped to {shown(repr(shard), 60)}, not a shard file name"
            )
        if not shard:
            raise CheckpointError(f"{where}: tensor {shown(name)!r}: shard name '' is not a file name")
        check_name(shard, f"{where}: tensor {shown(name)!r}")
    metadata = doc.get("metadata")
    return weight_map, metadata if isinstance(metadata, dict) else {}


def _from_index(
    handle: FileHandle, root: Root, trust: bool, key: str | None
) -> tuple[list[StoredTensor], dict[str, Any], bool]:
    where = handle.where
    weight_map, metadata = _weight_map(handle)
    shards: dict[str, dict[str, StoredTensor]] = {}
    for shard in dict.fromkeys(weight_map.values()):
        if not root.exists(shard):
            raise CheckpointError(f"{where}: shard {shown(shard)!r} is missing")
        shards[shard] = {t.name: t for t in _read_file(root.open(shard, where), trust, key)[0]}
    stored = []
    for name, shard in weight_map.items():
        if name not in shards[shard]:
            raise CheckpointError(f"{where}: tensor {shown(name)!r} is not in its shard {shown(shard)!r}")
        stored.append(shards[shard][name])
    meta = {"format": f"sharded ({len(shards)} files)", **{str(k): describe(v) for k, v in metadata.items()}}
    return stored, meta, True


def _listing(root: Root) -> list[str]:
    try:
        with os.scandir(root.real) as it:
            return [e.name for e in it]
    except OSError as exc:
        raise CheckpointError(f"{shown(root.folder)}: cannot list ({exc.strerror})") from None


def _from_folder(folder: Path, trust: bool, key: str | None) -> tuple[list[StoredTensor], dict[str, Any], bool]:
    root = Root(folder)
    names = _listing(root)
    if METADATA_FILE in names:  # torch.distributed.checkpoint: .metadata + *.distcp
        return (*read_dcp(root, trust), True)
    indexes = sorted(n for n in names if n.endswith(".safetensors.index.json")) or sorted(
        n for n in names if n.endswith(".index.json")
    )
    if len(indexes) == 1:
        return _from_index(root.open(indexes[0], shown(folder)), root, trust, key)
    if len(indexes) > 1:
        raise CheckpointError(f"{shown(folder)}: several shard indexes ({shown(', '.join(indexes))}); pass one")
    files = sorted((n for n in names if n.endswith(".safetensors")), key=natural_key)
    if not files:
        files = sorted((n for n in names if n.endswith(_TORCH_SUFFIXES)), key=natural_key)
    if not files:
        raise CheckpointError(
            f"{shown(folder)}: no checkpoint files (*.safetensors, *.index.json, *.pt, *.pth, *.bin, *.ckpt)"
        )
    stored, meta = [], {"format": f"folder ({len(files)} files)"}
    for name in files:
        stored += _read_file(root.open(name, shown(folder)), trust, key)[0]
    return stored, meta, True


def from_path(
    path: str | os.PathLike, *, trust: bool = False, key: str | None = None, name: str | None = None
) -> ModelSource:
    """The source for a checkpoint file, shard index or folder (tensor values stay lazy)."""
    path = Path(path).expanduser()
    if not os.path.lexists(path):
        raise CheckpointError(f"{shown(path)}: no such file or folder")
    try:
        is_dir = path.is_dir()
    except OSError as exc:
        raise CheckpointError(f"{shown(path)}: cannot open ({exc.strerror})") from None
    if is_dir:
        stored, meta, sort = _from_folder(path, trust, key)
    else:
        handle = FileHandle.open(path)
        if path.name.endswith(".json"):
            stored, meta, sort = _from_index(handle, Root.of(path), trust, key)
        else:
            stored, meta, sort = _read_file(handle, trust, key)
    if len(stored) > MAX_TENSORS:
        raise CheckpointError(f"{shown(path)}: {len(stored):,} tensors, over the limit of {MAX_TENSORS:,}")
    counts = Counter(t.name for t in stored)
    if len(counts) != len(stored):
        dup = next(n for n, c in counts.items() if c > 1)
        raise CheckpointError(f"{shown(path)}: tensor {shown(dup)!r} appears in more than one file")
    check_module_paths([t.name for t in stored], shown(path))
    return build_source(name or shown(path.name), stored, metadata={"file": shown(path), **meta}, sort=sort)


def load_checkpoint(
    checkpoint: Any,
    *,
    model: str | type | Callable[..., Any] | None = None,
    config: Mapping[str, Any] | str | os.PathLike | None = None,
    trust: bool = False,
    key: str | None = None,
    name: str | None = None,
) -> ModelSource:
    """A checkpoint as a source every analyzer accepts.

    `checkpoint`: a path (.pt/.pth/.bin/.ckpt, .safetensors, *.index.json, or a folder) or
    an in-memory state_dict / training checkpoint dict. Files load with
    ``weights_only=True`` and mmap; `trust=True` allows a pickle that runs code.
    `key` picks the weights entry of a training checkpoint (default: the first of
    ``model_state_dict``, ``state_dict``, ``model``, ``ema``, ``module``).

    With `model` (a class, a factory, or ``"pkg.module:factory"``) called with `config` (a
    dict, or a YAML/JSON file of keyword arguments; default the config the checkpoint
    carries), the weights are loaded into a fresh model and ``metadata["load_report"]``
    lists missing, unexpected and mismatched keys. Without `model`, a checkpoint that knows
    its model (a Hugging Face ``config.json`` beside it, or a recorded factory and config,
    followed with `trust=True`) gets that model built on meta with the file's tensors
    attached lazily (see :mod:`.known_model`); otherwise the tree comes from the dotted
    names (types unknown).
    """
    path = checkpoint if isinstance(checkpoint, (str, os.PathLike)) else None
    if isinstance(checkpoint, Mapping):
        source = from_mapping(checkpoint, name, key=key)
    elif path is not None:
        source = from_path(path, trust=trust, key=key, name=name)
    else:
        raise TypeError(f"load_checkpoint expected a path or a state_dict, got {type(checkpoint).__name__}")
    return with_model(source, path, model=model, config=config, trust=trust)
