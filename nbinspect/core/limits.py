"""The limits a file must stay within, and how paths from the file system are checked and shown.

A crafted file is small but can describe something huge: a header listing millions of
tensors, containers shared so that their expansion doubles at each level, metadata nested
thousands deep. Every reader stops at these documented limits with a one-line
:class:`CheckpointError` (or, for metadata, a summary saying what was cut) instead of
hanging or filling memory. The README lists them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import CheckpointError
from ..terminal import safe_text

__all__ = [
    "MAX_BUILT_BUFFER_BYTES",
    "MAX_BUILT_MODULES",
    "MAX_CHUNKS_PER_TENSOR",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_LAYERS",
    "MAX_CONFIG_POSITIONS",
    "MAX_DEPTH",
    "MAX_DIMS",
    "MAX_ERROR_LINE",
    "MAX_EXPANDED_ITEMS",
    "MAX_FILE_MODULE_PATHS",
    "MAX_HEADER_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_INT_DIGITS",
    "MAX_METADATA_ITEMS",
    "MAX_MODULE_PATHS",
    "MAX_NAME_CHARS",
    "MAX_NAME_DEPTH",
    "MAX_NPY_HEADER",
    "MAX_PATH_BYTES",
    "MAX_PICKLE_BYTES",
    "MAX_PICKLE_MEMO",
    "MAX_PICKLE_STRING",
    "MAX_TENSORS",
    "MAX_TENSOR_ELEMENTS",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "MAX_ZIP_MEMBERS",
    "check_module_paths",
    "check_tensor_name",
    "inside",
    "regular_file",
    "shown",
]

MAX_HEADER_BYTES = 64 * 2**20  # a safetensors JSON header (250k tensors take ~30 MB; JSON parsing costs ~24x)
MAX_TENSORS = 250_000  # tensors in one source (DeepSeek-V3's checkpoint holds ~92,000; ~4 KB of memory each)
MAX_MODULE_PATHS = 1_000_000  # module paths of a live model (a module shared at n places shows n times)
MAX_DEPTH = 64  # nesting of containers holding weights or metadata
MAX_METADATA_ITEMS = 100_000  # container items walked to describe one metadata entry
# --- issue 25: every size, count, depth, name length and digit count a file can claim ---
MAX_INDEX_BYTES = 32 * 2**20  # a *.index.json shard index (92k entries are ~8 MB)
MAX_CONFIG_BYTES = 4 * 2**20  # a config.json (real ones are < 100 KB)
MAX_YAML_BYTES = 2**20  # a --config YAML/JSON file of keyword arguments
MAX_YAML_NODES = 100_000  # YAML nodes after expanding aliases (billion laughs)
MAX_PICKLE_BYTES = 256 * 2**20  # data.pkl / DCP .metadata, decompressed
MAX_PICKLE_STRING = 64 * 2**20  # one string or bytes object inside a pickle
MAX_PICKLE_MEMO = 1_000_000  # pickle memo entries (torch writes ~2 per tensor)
MAX_NPY_HEADER = 64 * 2**10  # a .npy header, decompressed
MAX_ZIP_MEMBERS = 2 * 250_000 + 16  # members of a zip (.pt, .npz)
MAX_EXPANDED_ITEMS = 100_000  # items of a shared structure after expanding every shared reference
MAX_FILE_MODULE_PATHS = 200_000  # module paths the tensor names of a file imply
MAX_BUILT_MODULES = 200_000  # modules one model build from a config may create (DeepSeek-V3 unfused: ~63k)
MAX_BUILT_BUFFER_BYTES = 256 * 2**20  # buffers a build computes for real (rotary/sinusoid tables: a few MB)
MAX_NAME_CHARS = 1024  # characters of one tensor name
MAX_NAME_DEPTH = 64  # dotted components of one tensor name
MAX_DIMS = 64  # dimensions of one shape
MAX_TENSOR_ELEMENTS = 2**50  # elements one tensor may claim, even without values (a meta tensor); real: ~2**34
MAX_INT_DIGITS = 20  # digits of an integer in JSON, YAML or a shape (2**63 has 19)
MAX_PATH_BYTES = 1024  # a file name read from a file (255 per component)
MAX_CHUNKS_PER_TENSOR = 65_536  # DCP chunks of one tensor
MAX_CONFIG_LAYERS = 1024  # num_hidden_layers & co. of a config.json (Llama 405B has 126)
MAX_CONFIG_POSITIONS = 2**24  # max_position_embeddings & co. (Llama 4 Scout: 10.5M)
MAX_ERROR_LINE = 300  # characters of a shown name inside one error line


def shown(path: str | os.PathLike, limit: int | None = MAX_ERROR_LINE // 2) -> str:
    """`path` as text that prints anywhere, on one line: bytes that are not valid UTF-8 in
    the name are shown as ``\\xNN`` escapes, control characters escaped, a very long path
    cut in the middle."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return safe_text(path, limit)


def regular_file(path: Path) -> None:
    """Refuse what is not a regular file (a FIFO, a device, a socket): reading one blocks
    or never ends. ``stat`` does not open the file, so it cannot block."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise CheckpointError(f"{shown(path)}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO (named pipe)"
            if stat.S_ISFIFO(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        raise CheckpointError(f"{shown(path)}: is {kind}, not a checkpoint file")


def inside(folder: Path, name: object, what: str) -> Path:
    """``folder / name`` for a file name read from an index or a folder listing, refused
    unless it is a string naming a path inside `folder` (no absolute path, no ``..``
    leaving it, no symlink out). `what` (already shown) names the index or folder."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{what}: shard name {name!r} is not a file name")
    path = folder / name
    if Path(name).is_absolute() or not path.resolve().is_relative_to(folder.resolve()):
        raise CheckpointError(f"{what}: {shown(name)!r} lies outside the folder {shown(folder)}; refused")
    return path


def check_tensor_name(name: object, where: str) -> str:
    """A tensor name read from a file, within MAX_NAME_CHARS characters and MAX_NAME_DEPTH
    dotted components (the module tree is built from its prefixes)."""
    if not isinstance(name, str):
        raise CheckpointError(f"{where}: a tensor name that is not a string ({type(name).__name__})")
    if len(name) > MAX_NAME_CHARS:
        raise CheckpointError(
            f"{where}: tensor {safe_text(name, 80)!r} has a name of {len(name):,} characters, over {MAX_NAME_CHARS:,}"
        )
    if name.count(".") >= MAX_NAME_DEPTH:
        raise CheckpointError(
            f"{where}: tensor {safe_text(name, 80)!r} is nested {name.count('.') + 1:,} levels deep, "
            f"over {MAX_NAME_DEPTH}"
        )
    return name


def check_module_paths(names: list[str], where: str, limit: int = MAX_FILE_MODULE_PATHS) -> None:
    """Refuse names implying more than `limit` module paths (each prefix once)."""
    seen: set[str] = set()
    for name in names:
        check_tensor_name(name, where)
        prefix = name
        while "." in prefix:
            prefix = prefix.rpartition(".")[0]
            if prefix in seen:
                break
            seen.add(prefix)
        if len(seen) > limit:
            raise CheckpointError(f"{where}: the tensor names imply over {limit:,} modules, over the limit; refused")
