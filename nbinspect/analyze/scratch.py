"""Chunk buffers reused from tensor to tensor by the streaming paths of the comparison
(:mod:`.compare`) and the training-dynamics delta (:mod:`nbinspect.track.delta`): chunks
not already in the working dtype on the CPU are copied into them, so no path makes a
full-size temporary."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["Scratch"]


@dataclass
class Scratch:
    """Buffers of `chunk` elements per working dtype (as many as a path asks for), and a
    boolean mask of one chunk for numpy's counts."""

    chunk: int
    by_dtype: dict[torch.dtype, tuple[torch.Tensor, ...]] = field(default_factory=dict)
    mask: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.mask = np.empty(self.chunk, dtype=bool)

    def get(self, dtype: torch.dtype, count: int) -> tuple[torch.Tensor, ...]:
        """`count` buffers of `dtype`, made the first time they are asked for."""
        held = self.by_dtype.get(dtype, ())
        if len(held) < count:
            held += tuple(torch.empty(self.chunk, dtype=dtype) for _ in range(count - len(held)))
            self.by_dtype[dtype] = held
        return held[:count]

    @property
    def nbytes(self) -> int:
        return self.mask.nbytes + sum(t.nbytes for held in self.by_dtype.values() for t in held)
