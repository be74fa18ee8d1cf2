"""The served model inside a vLLM worker, read where the weights are (the frames are built
beside it by :func:`nbinspect.pipeline.worker_report`, so only frames cross a process boundary).

vLLM's CPU build packs unquantized linear weights into its GEMM kernel's own layout and
leaves an empty Parameter behind; such a weight is read back through the layer's kernel
(its product with identity columns, exact: one nonzero term per output) with its logical
shape. Checkpoint weights vLLM fuses (q/k/v into ``qkv_proj``, gate/up into
``gate_up_proj``, as the model's ``packed_modules_mapping`` says) are concatenated from
the folder the engine loaded before comparing, so they match the served names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import torch
from torch import nn

from ...core.source import ModelSource, TensorEntry
from ...schema import PARAMETER
from ..torch.source import from_module
from .shards import from_plain, rank_histograms, rank_source

__all__ = ["ServedModel", "fused_checkpoint", "served_model", "served_source"]

_DEFAULT_FUSED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}
_PROBE_COLUMNS = 1024  # identity columns per kernel call when reading a packed weight


def _packed_shape(module: nn.Module, weight: torch.Tensor) -> tuple[int, int] | None:
    """(out, in) of a linear weight vLLM moved into its CPU kernel, else None."""
    if weight.numel() or not callable(getattr(module, "cpu_linear", None)):
        return None
    n, k = getattr(module, "output_size_per_partition", None), getattr(module, "input_size_per_partition", None)
    return (n, k) if isinstance(n, int) and isinstance(k, int) else None


def _read_packed(module: nn.Module, n: int, k: int, dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    kernel = cast(Callable[..., torch.Tensor], module.cpu_linear)

    def load() -> torch.Tensor:
        out = torch.empty(n, k, dtype=dtype)
        with torch.inference_mode():
            for start in range(0, k, _PROBE_COLUMNS):
                rows = min(_PROBE_COLUMNS, k - start)
                probe = torch.zeros(rows, k, dtype=dtype)
                probe[:, start : start + rows].fill_diagonal_(1)
                out[:, start : start + rows] = kernel(probe, module.weight, None).t()
        return out

    return load


def served_source(model: nn.Module, name: str | None = None) -> ModelSource:
    """The served torch model as a source, packed CPU weights at their logical shapes."""
    source = from_module(model, name)
    tensors = []
    for t in source.tensors:
        module = model.get_submodule(t.module)
        shape = _packed_shape(module, t.tensor) if t.kind == PARAMETER and t.name.endswith(".weight") else None
        if shape is not None:
            numel = shape[0] * shape[1]
            t = replace(
                t,
                shape=shape,
                numel=numel,
                nbytes=numel * t.tensor.element_size(),
                storage_key=("packed", id(module)),
                tensor=_read_packed(module, *shape, t.tensor.dtype),
            )
        tensors.append(t)
    return replace(source, tensors=tuple(tensors))


def _concat(parts: list[TensorEntry]) -> Any:
    return lambda: torch.cat([p.values() for p in parts], dim=0)


def fused_checkpoint(folder: str, served: ModelSource, mapping: dict[str, list[str]] | None) -> ModelSource:
    """The checkpoint in `folder` with the parts of each fused served weight concatenated
    under the served name; parts whose fusion is unknown keep their own names."""
    from ...io.checkpoint import load_checkpoint

    ckpt = load_checkpoint(folder)
    by_name = {t.name: t for t in ckpt.tensors}
    used: set[str] = set()
    fused: list[TensorEntry] = []
    for t in served.tensors:
        head, _, leaf = t.name.rpartition(".")
        prefix, _, fused_module = head.rpartition(".")
        names = [f"{prefix}.{part}.{leaf}" for part in (mapping or _DEFAULT_FUSED).get(fused_module, ())]
        if t.name in by_name or not names or not all(n in by_name for n in names):
            continue
        parts = [by_name[n] for n in names]
        shapes = [p.shape for p in parts if p.shape]
        shape = (sum(s[0] for s in shapes), *shapes[0][1:]) if len(shapes) == len(parts) else None
        numel, nbytes = sum(p.numel for p in parts), sum(p.nbytes for p in parts)
        fused.append(
            replace(
                parts[0],
                name=t.name,
                module=t.module,
                shape=shape,
                numel=numel,
                nbytes=nbytes,
                storage_key=("fused", t.name),
                tensor=_concat(parts),
                release_hook=None,
            )
        )
        used.update(names)
    # the served side is weights only; buffers a known architecture derives from config.json
    # (rotary inv_freq) are in no file
    kept = tuple(t for t in ckpt.tensors if t.name not in used and t.kind == PARAMETER)
    return replace(ckpt, tensors=kept + tuple(fused))


def _kv_cache_bytes(runner: Any) -> int:
    caches = getattr(runner, "kv_caches", None) or []
    seen: dict[Any, int] = {}
    for c in caches if isinstance(caches, (list, tuple)) else caches.values():
        for t in c if isinstance(c, (list, tuple)) else [c]:
            if isinstance(t, torch.Tensor):
                seen[(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _runner_model(worker: Any) -> nn.Module:
    runner = getattr(worker, "model_runner", None)
    get_model = getattr(runner, "get_model", None)
    model = get_model() if callable(get_model) else getattr(runner, "model", None)
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"the vLLM worker {type(worker).__name__} holds no torch model at model_runner.get_model() "
            f"(found {type(model).__name__})"
        )
    return model


def _tp_rank(worker: Any) -> int:
    size = int(getattr(worker.parallel_config, "tensor_parallel_size", 1))
    if size == 1:
        return 0
    from vllm.distributed import get_tensor_model_parallel_rank

    return int(get_tensor_model_parallel_rank())


class ServedModel:
    """What a worker serves, as sources: `source` has global shapes and counts and this
    tensor-parallel rank's share of the values; `weights` are the served parameters (packed
    ones at their logical shapes) and `checkpoint(folder)` the folder's tensors fused to match
    them, for a comparison (None under tensor parallelism: a shard is not compared)."""

    def __init__(self, worker: Any):
        self.model = _runner_model(worker)
        served = served_source(self.model)
        self.source = rank_source(self.model, served, _tp_rank(worker))
        self.weights = replace(served, tensors=tuple(t for t in served.tensors if t.kind == PARAMETER))
        self.sharded = getattr(worker.parallel_config, "tensor_parallel_size", 1) != 1
        runner = worker.model_runner
        cache = getattr(worker, "cache_config", None)
        self.facts = {
            "rank": getattr(worker, "rank", 0),
            "worker": type(worker).__name__,
            "model_runner": type(runner).__name__,
            "model": type(self.model).__name__,
            "device": str(getattr(worker, "device", "")),
            "kv_cache_blocks": getattr(cache, "num_gpu_blocks", None),
            "kv_cache_block_size": getattr(cache, "block_size", None),
            "kv_cache_bytes": _kv_cache_bytes(runner),
        }

    def histograms(self, ranges: dict[str, tuple[float, float]], bins: int) -> dict[str, Any]:
        """Exact counts of this rank's share of each tensor on the agreed ranges."""
        return rank_histograms(self.source, ranges, bins)

    def moments(self, plain: dict[str, Any]) -> dict[Any, Any]:
        """The merged global Moments the engine sent (plain lists), by storage key."""
        merged = from_plain(plain)
        return {t.storage_key: merged[t.name] for t in self.source.tensors}

    def checkpoint(self, folder: str | None) -> ModelSource | None:
        if not folder or self.sharded:
            return None
        return fused_checkpoint(folder, self.weights, getattr(type(self.model), "packed_modules_mapping", None))


def served_model(worker: Any) -> ServedModel:
    """The model `worker` (a vLLM worker) serves, as sources."""
    return ServedModel(worker)
