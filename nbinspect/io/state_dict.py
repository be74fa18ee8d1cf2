"""A state_dict, or a whole training checkpoint, as a source.

A training checkpoint keeps its weights under a key (``model_state_dict``, ``state_dict``,
``model``, ``ema``, ``module``) next to optimizer state, epoch counters and the like. The
weights become the tensors; everything else is summarised in ``ModelSource.metadata``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import torch
from torch import nn

from ..backends.torch.source import compact, from_module, quantization_bytes, storage_key, stored_numel
from ..core.limits import MAX_DEPTH, MAX_EXPANDED_ITEMS, MAX_METADATA_ITEMS, MAX_TENSORS, shown
from ..core.source import ModelSource
from ..core.tree import PACKED_KEY, StoredTensor, build_source
from ..dtypes import dtype_name
from ..errors import CheckpointError, UnsupportedTensorError

__all__ = [
    "CONFIG_KEYS",
    "WEIGHT_KEYS",
    "describe",
    "from_mapping",
    "packed_weight_bias",
    "split_checkpoint",
    "stored_tensors",
    "unpacked",
]

WEIGHT_KEYS = ("model_state_dict", "state_dict", "model", "ema", "module")
# entries holding the model's constructor arguments (Lightning saves ``hyper_parameters``):
# kept as plain data in the metadata, so the model can be rebuilt from them
CONFIG_KEYS = ("config", "hparams", "hyper_parameters")


def _is_weights(value: Any) -> bool:
    if isinstance(value, nn.Module):
        return True
    return isinstance(value, Mapping) and any(isinstance(v, (torch.Tensor, Mapping)) for v in value.values())


def _contents(value: Any) -> tuple[int, int, str]:
    """(tensors, bytes, what was cut) inside nested dicts/lists/tuples: each container and
    each storage once (a shared or self-containing container is not walked again), at most
    MAX_DEPTH deep and MAX_METADATA_ITEMS items, so a crafted file cannot make this hang."""
    tensors, storages, seen = 0, {}, set()
    cut = ""
    stack = [(value, 0)]
    walked = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            tensors += 1
            key = storage_key(item)
            storages[key] = stored_numel(item) * item.element_size()
            continue
        if not isinstance(item, (Mapping, list, tuple)) or id(item) in seen:
            continue
        seen.add(id(item))
        if depth >= MAX_DEPTH:
            cut = f"nested deeper than {MAX_DEPTH} levels, not walked further"
            continue
        walked += len(item)
        if walked > MAX_METADATA_ITEMS:
            cut = f"over {MAX_METADATA_ITEMS:,} items, not walked further"
            break
        stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, Mapping) else item))
    return tensors, sum(storages.values()), cut


def expanded_size(value: Any, cap: int = MAX_EXPANDED_ITEMS) -> int:
    """Items of `value` once every shared reference is expanded (what a JSON dump or a
    recursive walk would visit), by dynamic programming over object ids: a list shared at
    each of 28 levels costs 28 steps to find 2**28 items. Stops counting past `cap`; a
    container inside itself counts as over `cap`."""
    sizes: dict[int, int] = {}
    active: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        if not isinstance(item, (Mapping, list, tuple, set)) or (not done and id(item) in sizes):
            continue
        children = list(item.values()) if isinstance(item, Mapping) else list(item)
        if not done:
            if id(item) in active:
                return cap + 1  # a cycle: endless when walked
            active.add(id(item))
            stack.append((item, True))
            stack.extend((c, False) for c in children if isinstance(c, (Mapping, list, tuple, set)))
            continue
        active.discard(id(item))
        total = 1 + sum(sizes.get(id(c), 0) if isinstance(c, (Mapping, list, tuple, set)) else 1 for c in children)
        sizes[id(item)] = min(total, cap + 1)
        if len(sizes) > cap:
            return cap + 1
    return sizes.get(id(value), 1)


def _plain(value: Any, depth: int = 0) -> bool:
    """JSON-like data (a config) at most 32 deep and MAX_EXPANDED_ITEMS items when shared
    references are expanded: a file cannot make this, or anything printing it, run long."""
    if expanded_size(value) > MAX_EXPANDED_ITEMS:
        return False
    stack = [(value, depth)]
    while stack:
        item, d = stack.pop()
        if d > 32:
            return False
        if isinstance(item, Mapping):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, d + 1) for v in item)
        elif not (isinstance(item, (bool, int, float, str)) or item is None):
            return False
    return True


# plain data beside the weights (normalisation statistics, class names, a schedule) is shown
# as it is up to this many items; a longer list (a loss history) is summarised
MAX_SHOWN_ITEMS = 1_000


def _is_config(key: Any, value: Any) -> bool:
    return key in CONFIG_KEYS and isinstance(value, Mapping) and _plain(value)


def _is_small_data(value: Any) -> bool:
    return (
        isinstance(value, (Mapping, list, tuple))
        and expanded_size(value, MAX_SHOWN_ITEMS) <= MAX_SHOWN_ITEMS
        and _plain(value)
    )


def describe(value: Any, key: Any = None) -> Any:
    """A short, JSON-friendly description of a non-weight checkpoint entry (a config entry
    of plain data, and any other plain data of at most MAX_SHOWN_ITEMS items, is kept as it is)."""
    if _is_config(key, value):
        return dict(value)
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.layout == torch.strided and not value.is_meta:
        return value.item()
    if isinstance(value, Mapping) and "param_groups" in value and "state" in value:
        n, nbytes, cut = _contents(value["state"])
        groups = value["param_groups"]
        first = groups[0] if isinstance(groups, (list, tuple)) and groups and isinstance(groups[0], Mapping) else {}
        hyper = {k: v for k, v in first.items() if isinstance(v, (int, float, str)) and k != "params"}
        count = len(groups) if isinstance(groups, (list, tuple)) else "?"
        return f"optimizer state: {count} param group(s), {n} tensors, {nbytes:,} bytes; {hyper}" + _cut(cut)
    if _is_small_data(value):
        return dict(value) if isinstance(value, Mapping) else list(value)
    if isinstance(value, (Mapping, list, tuple)):
        n, nbytes, cut = _contents(value)
        kind = "dict" if isinstance(value, Mapping) else type(value).__name__
        return f"{kind} of {len(value)} entries ({n} tensors, {nbytes:,} bytes)" + _cut(cut)
    if isinstance(value, torch.Tensor):
        return f"tensor {list(value.shape)} {dtype_name(value.dtype)}"
    return type(value).__name__


def _cut(cut: str) -> str:
    return f"; {cut}" if cut else ""


def packed_weight_bias(name: str, value: Any) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """(weight, bias) of a quantized Linear's packed state_dict entry, else None."""
    if not (name.rpartition(".")[2] == PACKED_KEY and isinstance(value, tuple) and len(value) == 2):
        return None
    weight, bias = value
    if not isinstance(weight, torch.Tensor) or not (bias is None or isinstance(bias, torch.Tensor)):
        return None
    return weight, bias


def unpacked(name: str, value: Any) -> dict[str, torch.Tensor] | None:
    """A quantized Linear's packed state_dict entry as the packed module's `weight` and
    `bias` by name (no bias if it has none), else None."""
    packed = packed_weight_bias(name, value)
    if packed is None:
        return None
    base = name.removesuffix(PACKED_KEY)
    return {base + local: t for local, t in zip(("weight", "bias"), packed) if t is not None}


def split_checkpoint(obj: Mapping, key: str | None = None, origin: str = "state_dict") -> tuple[Any, dict[str, Any]]:
    """(weights, metadata) of a state_dict or a training checkpoint; `key` picks the entry
    holding the weights (default: the first of WEIGHT_KEYS present)."""
    if key is not None:
        if key not in obj:
            raise CheckpointError(f"{origin}: no entry {key!r}; top-level keys: {sorted(map(str, obj))}")
        chosen: str | None = key
    else:
        chosen = next((k for k in WEIGHT_KEYS if k in obj and _is_weights(obj[k])), None)
    if chosen is not None:
        meta = {"weights_key": chosen}
        meta.update({str(k): describe(v, k) for k, v in obj.items() if k != chosen})
        return obj[chosen], meta
    meta = {
        str(k): describe(v, k)
        for k, v in obj.items()
        if (not isinstance(v, (torch.Tensor, Mapping)) and packed_weight_bias(str(k), v) is None) or _is_config(k, v)
    }
    return {k: v for k, v in obj.items() if k not in meta}, meta


def _flatten(weights: Mapping, origin: str, meta: dict[str, Any]) -> dict[str, torch.Tensor]:
    """name -> tensor of a nested state_dict, walked without recursion. A dict met a second
    time (shared, or containing itself) is not expanded again: its names would repeat, or
    double at each level; `meta` says where. More than MAX_TENSORS names is refused."""
    out: dict[str, torch.Tensor] = {}
    first: dict[int, str] = {id(weights): ""}
    stack: list[tuple[str, Mapping, int]] = [("", weights, 0)]
    while stack:
        prefix, mapping, depth = stack.pop()
        items = []
        for k, v in mapping.items():
            name = f"{prefix}{k}"
            if isinstance(v, torch.Tensor):
                if name in out:
                    raise CheckpointError(
                        f"{origin}: two tensors are named {shown(name)!r} (a dotted key and a nested dict); refused"
                    )
                out[name] = v
                if len(out) > MAX_TENSORS:
                    raise CheckpointError(f"{origin}: more than {MAX_TENSORS:,} tensors, over the limit")
            elif (pair := unpacked(name, v)) is not None:
                if any(p in out for p in pair):
                    raise CheckpointError(f"{origin}: two tensors are named {shown(name)!r}; refused")
                out.update(pair)
                if len(out) > MAX_TENSORS:
                    raise CheckpointError(f"{origin}: more than {MAX_TENSORS:,} tensors, over the limit")
            elif isinstance(v, Mapping):
                if id(v) in first:
                    meta[name] = f"the same dict as {first[id(v)] or 'the whole state_dict'!r}, not expanded again"
                    continue
                if depth + 1 >= MAX_DEPTH:
                    raise CheckpointError(f"{origin}: entry {name!r} is nested more than {MAX_DEPTH} levels deep")
                first[id(v)] = name
                items.append((name + ".", v, depth + 1))
            else:
                meta[name] = describe(v)
        stack.extend(reversed(items))  # depth first, in the file's order
    return out


def _from_record(name: str, t: torch.Tensor, record: Any, origin: str) -> StoredTensor:
    """A file's tensor known by its record (io/torch_records.py): `t` is a meta tensor with its
    shape and strides; values are read from the file when asked for."""
    from .torch_records import NoValues

    if isinstance(record, NoValues):

        def refuse() -> Any:
            raise UnsupportedTensorError(
                f"{origin}: tensor {shown(name)!r} is a {record.kind} tensor; "
                "nbinspect lists it but does not read its values"
            )

        return StoredTensor(name, tuple(t.shape), dtype_name(t.dtype), 0, ("id", id(t)), refuse, numel=0)
    view = compact(t)
    numel = view.numel()
    dims = tuple(sorted((n, s) for n, s in zip(record.shape, record.stride) if n > 1))
    key = ("file", origin, record.storage.key, record.offset, dims, t.dtype) if numel else ("id", id(t))
    narrow = [(0 if s == 0 else None) for s in record.stride]

    def load() -> torch.Tensor:
        values = record.values()
        if any(n is not None for n in narrow):
            values = values[tuple(slice(0, 1) if n == 0 else slice(None) for n in narrow)]
        return values

    return StoredTensor(
        name=name,
        shape=tuple(t.shape),
        dtype=dtype_name(t.dtype),
        nbytes=numel * t.element_size(),
        storage_key=key,
        tensor=load,
        numel=numel,
        rows=record.rows if record.shape and record.dtype == t.dtype and all(n is None for n in narrow) else None,
    )


def _stored(name: str, t: torch.Tensor, release: Callable[[torch.Tensor], None] | None, stored: bool) -> StoredTensor:
    """One state_dict tensor. With `stored` (a file's tensor) a broadcast view counts, and
    is read as, the elements the file holds: ``zeros(1).expand(10**10)`` in a 1.6 KB file is
    4 bytes, not 40 GB, and its statistics read one element, not ten billion."""
    values = compact(t.detach()) if stored else t.detach()
    numel = values.numel()
    return StoredTensor(
        name=name,
        shape=tuple(t.shape),
        dtype=dtype_name(t.dtype),
        nbytes=numel * t.element_size() + quantization_bytes(t),
        storage_key=storage_key(t),
        tensor=values,
        release_hook=None if release is None or t.layout != torch.strided else partial(release, values),
        numel=numel,
    )


def stored_tensors(
    weights: Mapping,
    meta: dict[str, Any],
    origin: str,
    release: Callable[[torch.Tensor], None] | None = None,
    *,
    stored: bool = False,
    records: Mapping[int, tuple[torch.Tensor, Any]] | None = None,
) -> list[StoredTensor]:
    """The tensors of a (possibly nested) state_dict; non-tensor entries go to `meta`.
    `release(tensor)`, if given, drops a memory-mapped tensor's pages after use; `stored`
    counts a file's broadcast views by the elements the file holds."""
    tensors = _flatten(weights, origin, meta)
    if not tensors:
        raise CheckpointError(f"{origin}: no tensors found; top-level keys: {sorted(map(str, weights))[:20]}")
    if records is not None:
        return [
            _from_record(n, t, records[id(t)][1], origin) if id(t) in records else _stored(n, t, release, stored)
            for n, t in tensors.items()
        ]
    return [_stored(n, t, release, stored) for n, t in tensors.items()]


def from_mapping(
    obj: Mapping,
    name: str | None = None,
    *,
    key: str | None = None,
    origin: str = "state_dict",
    release: Callable[[torch.Tensor], None] | None = None,
) -> ModelSource:
    """The source for a state_dict or training checkpoint held in `obj`."""
    weights, meta = split_checkpoint(obj, key, origin)
    if isinstance(weights, nn.Module):
        return dataclasses.replace(from_module(weights, name), metadata=meta)
    if not isinstance(weights, Mapping):
        raise CheckpointError(f"{origin}: entry {key!r} holds a {type(weights).__name__}, not a state_dict")
    return build_source(name or origin, stored_tensors(weights, meta, origin, release), metadata=meta)
