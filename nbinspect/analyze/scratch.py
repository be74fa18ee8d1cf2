"""Buffers reused from tensor to tensor within one run of the statistics (:mod:`.reduce`),
the comparison (:mod:`.compare`) or the training-dynamics delta
(:mod:`nbinspect.track.delta`): chunks not already in the working dtype on the CPU are
copied into them, so no path allocates per chunk or makes a full-size temporary."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import torch

__all__ = ["Scratch"]


class Scratch:
    """A buffer per (dtype, role), made when first asked for and grown when a longer one is
    asked for, and a boolean mask of one chunk for numpy's counts (made on first use).
    `kernels`: the fused kernels the run uses (:func:`.fused.kernels`), or None for the
    torch path. As a context manager it lets go of the buffers at the end."""

    def __init__(self, chunk: int, kernels: ModuleType | None = None) -> None:
        self.chunk = chunk  # elements of the chunks the paths stream
        self.kernels = kernels
        self._held: dict[tuple[torch.dtype, str], torch.Tensor] = {}
        self._mask: np.ndarray | None = None

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._held.clear()
        self._mask = None

    def get(self, dtype: torch.dtype, role: str, n: int | None = None, *, exact: bool = False) -> torch.Tensor:
        """`n` elements (default: a chunk) of the buffer of `dtype` for `role`, which is a
        chunk long at least (so varying `n` does not regrow it), or `n` long if `exact` (a
        small buffer that should stay small)."""
        n = self.chunk if n is None else n
        buf = self._held.get((dtype, role))
        if buf is None or buf.numel() < n:
            buf = self._held[dtype, role] = torch.empty(n if exact else max(n, self.chunk), dtype=dtype)
        return buf[:n]

    def chunks(self, dtype: torch.dtype, *roles: str) -> tuple[torch.Tensor, ...]:
        """A chunk of `dtype` for each role (paths that share a role share its buffer)."""
        return tuple(self.get(dtype, role) for role in roles)

    @property
    def mask(self) -> np.ndarray:
        """A chunk of booleans, the `out=` of numpy's comparisons that the paths count."""
        if self._mask is None:
            self._mask = np.empty(self.chunk, dtype=bool)
        return self._mask

    @property
    def nbytes(self) -> int:
        """The bytes of the buffers held now."""
        mask = 0 if self._mask is None else self._mask.nbytes
        return mask + sum(t.nbytes for t in self._held.values())
