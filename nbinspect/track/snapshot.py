"""An immutable copy of a model's trainable parameters at one step: :class:`ParameterSnapshot`.

The copies never alias the live tensors (they are new storage, on the chosen device and in
the chosen dtype) and cannot be changed from outside: ``snapshot[name]`` and
``snapshot.tensors[name]`` hand out a fresh copy each time (one tensor at a time), so an
in-place write (``add_``, ``copy_``, ``.data.add_``) changes that copy, never the snapshot.
The stored copies (inference tensors) are private to the delta and sparse-quality code. The
squared L2 norm of each copy is taken while its chunks are still in cache, so relative
changes later cost no extra pass.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn

__all__ = ["CHUNK", "ParameterSnapshot", "trainable_parameters"]

CHUNK = 1 << 18  # elements per chunk: 1 MB of float32 stays in the per-core L2 cache


def trainable_parameters(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, parameter) of every trainable floating parameter, shared storage once."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"nbinspect.track needs a torch.nn.Module, got {type(model).__name__}")
    for name, p in model.named_parameters():
        if p.requires_grad and p.is_floating_point():
            yield name, p


def _copy(p: torch.Tensor, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, float]:
    """A flat copy of `p` and its squared norm, summed chunk by chunk in float64."""
    flat = p.detach().reshape(-1)
    out = torch.empty(flat.numel(), device=device, dtype=dtype)
    # fp16/bf16 values: a float32 dot of them rounds with a bias (-6e-6 over a chunk of bf16);
    # their squares are exact in float32 and summed pairwise stay within 2e-8
    short = {p.dtype, dtype} & {torch.float16, torch.bfloat16}
    squares = torch.empty(min(CHUNK, flat.numel()), device=device) if short else None
    norm_sq = 0.0
    for start in range(0, flat.numel(), CHUNK):
        chunk = out[start : start + CHUNK]
        chunk.copy_(flat[start : start + CHUNK])
        if squares is None:
            norm_sq += float(torch.dot(chunk, chunk))
        else:
            norm_sq += float(squares[: chunk.numel()].copy_(chunk).square_().sum())
    return out, norm_sq


class _Copies(Mapping[str, torch.Tensor]):
    """A read-only view of the stored flat copies that hands out a copy of each on access."""

    def __init__(self, flat: Mapping[str, torch.Tensor]):
        self._flat = flat

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._flat[name].clone()

    def __iter__(self) -> Iterator[str]:
        return iter(self._flat)

    def __len__(self) -> int:
        return len(self._flat)

    def __contains__(self, name: object) -> bool:
        return name in self._flat


@dataclass(frozen=True)
class ParameterSnapshot:
    """The trainable parameters of a model at `step`, copied flat (1-D) to `device` in `dtype`."""

    step: int
    _flat: Mapping[str, torch.Tensor]  # name -> the stored flat copy (private: delta.py, sparse.py)
    shapes: Mapping[str, torch.Size]
    norms_sq: Mapping[str, float]  # name -> squared L2 norm of the copy, in float64
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def take(
        cls, model: nn.Module, step: int = 0, *, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> ParameterSnapshot:
        """Copy the trainable parameters of `model` (nothing about the model changes)."""
        if not dtype.is_floating_point:
            raise ValueError(f"ParameterSnapshot: dtype must be floating point, got {dtype}")
        device = torch.device(device)
        tensors, shapes, norms = {}, {}, {}
        with torch.inference_mode():
            for name, p in trainable_parameters(model):
                tensors[name], norms[name] = _copy(p, device, dtype)
                shapes[name] = p.shape
        return cls(step, MappingProxyType(tensors), MappingProxyType(shapes), MappingProxyType(norms), dtype, device)

    @property
    def tensors(self) -> Mapping[str, torch.Tensor]:
        """name -> flat (1-D) values; each access returns a new copy, so writing into it
        leaves the snapshot as it was."""
        return _Copies(self._flat)

    @property
    def names(self) -> list[str]:
        return list(self._flat)

    @property
    def numel(self) -> int:
        return sum(t.numel() for t in self._flat.values())

    @property
    def nbytes(self) -> int:
        """Memory the snapshot holds: elements times the snapshot dtype's size."""
        return sum(t.nbytes for t in self._flat.values())

    def __getitem__(self, name: str) -> torch.Tensor:
        """A copy of one parameter's stored values in its original shape (writing into it
        does not change the snapshot)."""
        return self._flat[name].clone().view(self.shapes[name])

    def stored(self, name: str) -> torch.Tensor:
        """The stored flat copy itself, without copying (read-only use inside nbinspect)."""
        return self._flat[name]

    def __repr__(self) -> str:
        size = self.nbytes / 2**20
        what = f"{len(self._flat)} tensors, {self.numel:,} values, {size:.1f} MiB {self.dtype}"
        return f"<ParameterSnapshot step {self.step}: {what}>"
