"""W_new − W_old between a snapshot and the model now: :class:`ParameterDelta`.

A delta is a comparison of two moments of one model, so it is stored as the comparison
engine's ``compare`` frame (schema.COMPARE: one row per tensor, with the same roll-ups per
module, component and layer) plus a mergeable :class:`~nbinspect.core.moments.Moments`
of the change of each tensor (mean, std, L1, L2, min, max, exact zeros).

The delta streams (never the whole model's delta, never a full-size temporary). Where the
fused kernel applies (numba installed, no NaN/Inf in the change;
:func:`nbinspect.analyze.fused.kernels` with ``recurring=True``: from 64 MiB of weights),
one read of each tensor computes every statistic in blocks that stay in registers and L1
(``fused.pair_sums``, the comparison's kernel compiled without the norms of W_old and
W_new), tensors spread over the threads, fp16/bf16 widened by numpy on each thread.
Otherwise (and as the fallback) one tensor at a time, in chunks that stay
in cache, into reused buffers: each chunk is read once from memory, every statistic a torch
or numpy pass over the chunk already in cache: the difference, its min/max, sum, sum of
squares, the dot with W_old (for the norm of W_new and the cosine), then |Δ|, its sum, its
non-zeros and the counts above each threshold (a threshold above the chunk's largest |Δ|
costs nothing).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..analyze import compare, fused
from ..analyze.components import component, layer_index
from ..analyze.scratch import Scratch
from ..core.moments import Moments, merge
from ..core.source import parent_path
from ..dtypes import dtype_name
from ..schema import COMPARE
from .snapshot import CHUNK, ParameterSnapshot, trainable_parameters

__all__ = ["ArchitectureChanged", "ParameterDelta"]


class ArchitectureChanged(ValueError):
    """The model's trainable parameters are not those of the snapshot."""


def _check_same(snapshot: ParameterSnapshot, live: Mapping[str, torch.Tensor]) -> None:
    added = [n for n in live if n not in snapshot._flat]
    removed = [n for n in snapshot._flat if n not in live]
    reshaped = [n for n, p in live.items() if n in snapshot.shapes and p.shape != snapshot.shapes[n]]
    if added or removed or reshaped:
        found = (("added", added), ("removed", removed), ("reshaped", reshaped))
        parts = [f"{what}: {', '.join(names[:3])}{' …' if len(names) > 3 else ''}" for what, names in found if names]
        raise ArchitectureChanged(
            f"the model's trainable parameters changed since the snapshot of step {snapshot.step} "
            f"({'; '.join(parts)}): call reset() after changing the architecture or what is trainable"
        )


def _tensor_change(
    a: torch.Tensor, b: torch.Tensor, limits: list, scratch: Scratch
) -> tuple[Moments, float, list[int]]:
    """Moments of b − a (flat tensors), the sum of a·(b − a) in float64, and how many |b − a|
    exceed each limit (ascending). Sums and dots run in torch (BLAS, cascade summation);
    min/max and the counts in numpy, which does them in fewer passes than torch here."""
    work = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
    buf_a, buf_b, buf_d = scratch.chunks(work, "a", "b", "d")
    n = a.numel()
    count = nan = inf = nonzero = 0
    s = q = ad = abs_sum = 0.0
    lo, hi = math.inf, -math.inf
    above = [0] * len(limits)
    zero = np.zeros((), dtype=np.float64 if work == torch.float64 else np.float32)
    for start in range(0, n, CHUNK):
        ca, cb = a[start : start + CHUNK], b[start : start + CHUNK]
        m = ca.numel()
        ca = ca if ca.dtype == work and ca.device.type == "cpu" else buf_a[:m].copy_(ca)
        cb = cb if cb.dtype == work and cb.device.type == "cpu" else buf_b[:m].copy_(cb)
        d = torch.sub(cb, ca, out=buf_d[:m])
        values = d.numpy()
        c_lo, c_hi = float(values.min()), float(values.max())
        if not (math.isfinite(c_lo) and math.isfinite(c_hi)):
            finite = torch.isfinite(d)
            c_nan = int(torch.isnan(d).sum())
            nan, inf = nan + c_nan, inf + m - int(finite.sum()) - c_nan
            d, ca = d[finite], ca[finite]
            if d.numel() == 0:
                continue
            values = d.numpy()
            c_lo, c_hi = float(values.min()), float(values.max())
        lo, hi = min(lo, c_lo), max(hi, c_hi)
        count += d.numel()
        s += float(d.sum())
        q += float(torch.dot(d, d))
        ad += float(torch.dot(ca, d))
        np.abs(values, out=values)
        abs_sum += float(d.sum())
        # Counts only where the chunk straddles a threshold: above its largest |Δ| none pass,
        # below its smallest all do (in training most elements move: one min saves passes).
        mask, largest, smallest = scratch.mask[: d.numel()], max(-c_lo, c_hi), float(values.min())
        for k, limit in enumerate([zero, *limits]):
            if not largest > limit:  # ascending: no element passes this or a larger one
                break
            n_above = d.numel() if smallest > limit else int(np.count_nonzero(np.greater(values, limit, out=mask)))
            if k:
                above[k - 1] += n_above
            else:
                nonzero += n_above
    if count == 0:
        return Moments.empty(1, n, nan, inf), 0.0, above
    return _moments(n, count, s, q, abs_sum, lo, hi, count - nonzero, nan, inf), ad, above


def _fused_changes(
    k: ModuleType, pairs: dict[str, tuple[torch.Tensor, torch.Tensor]], limits: list, scratch: Scratch
) -> dict[str, tuple[Moments, float, list[int]]]:
    """What :func:`_tensor_change` gives, from the fused kernel in one read of each a and b
    (d exact in float64; fp16/bf16 widened by numpy on each thread), for the pairs with
    no NaN/Inf in the change (the torch path counts those)."""
    out = {}
    # |d| > 0 counts the elements that moved
    for name, sums in zip(pairs, fused.pair_sums(k, list(pairs.values()), (0.0, *limits), scratch, norms=False)):
        if sums.finite:
            n = sums.n
            zeros, above = n - sums.above[0], sums.above[1:]
            out[name] = _moments(n, n, sums.d, sums.dd, sums.abs_sum, sums.lo, sums.hi, zeros, 0, 0), sums.ad, above
    return out


def _moments(
    n: int, count: int, s: float, q: float, abs_sum: float, lo: float, hi: float, zeros: int, nan: int, inf: int
) -> Moments:
    """Moments of the change from its sums over the `count` finite elements of `n`."""
    mean = s / count
    hist = np.array([count], np.int64)
    return Moments(
        numel=n, count=count, mean=mean, m2=max(q - s * mean, 0.0), abs_sum=abs_sum, min=lo, max=hi, zeros=zeros,
        nan=nan, inf=inf, hist=hist, hist_lo=lo, hist_hi=hi, hist_sample=count,
    )  # fmt: skip


def _row(name: str, snapshot: ParameterSnapshot, p: torch.Tensor, m: Moments, ad: float, above: list[int]) -> dict:
    aa = snapshot.norms_sq[name]
    dd = m.m2 + m.count * m.mean**2 if m.count else 0.0
    # ‖W_new‖² and W_old·W_new follow from ‖W_old‖² (taken with the snapshot), W_old·Δ and ‖Δ‖².
    sums = compare._Sums(above, n=m.numel, aa=aa, bb=max(aa + 2 * ad + dd, 0.0), ab=aa + ad, dd=dd)
    if m.count:
        sums.d, sums.max_abs = m.mean * m.count, max(-m.min, m.max)
    same = m.count == m.numel and m.zeros == m.numel
    return {
        "name": name,
        "module": parent_path(name) or "",
        "component": component(name),
        "layer": layer_index(name),
        "status": "same" if same else "changed",
        "shape_a": tuple(snapshot.shapes[name]),
        "shape_b": tuple(p.shape),
        "dtype_a": dtype_name(snapshot.dtype),
        "dtype_b": dtype_name(p.dtype),
        **sums.columns(),
    }


@dataclass(frozen=True)
class ParameterDelta:
    """The change of every trainable parameter from a snapshot to the model (or a later
    snapshot): its statistics are computed once, when the delta is made, and never change."""

    old_step: int
    new_step: int
    thresholds: tuple[float, ...]
    frame: pd.DataFrame  # schema.COMPARE, one row per tensor (a = the snapshot, b = now)
    moments: Mapping[str, Moments]  # name -> Moments of the change (finite values)
    scratch_bytes: int  # the largest scratch memory the streaming held
    _old: ParameterSnapshot = field(repr=False, compare=False)
    _new: Mapping[str, torch.Tensor] = field(repr=False, compare=False)

    @classmethod
    def between(
        cls,
        old: ParameterSnapshot,
        new: nn.Module | ParameterSnapshot,
        step: int | None = None,
        thresholds: Iterable[float] = compare.DEFAULT_THRESHOLDS,
    ) -> ParameterDelta:
        """The delta from snapshot `old` to `new` (a model as it is now, or a later snapshot)."""
        if isinstance(new, ParameterSnapshot):
            live: dict[str, torch.Tensor] = {n: new.stored(n).view(new.shapes[n]) for n in new._flat}
            step = new.step if step is None else step
        else:
            live = dict(trainable_parameters(new))
        _check_same(old, live)
        limits = sorted(float(t) for t in thresholds)
        scratch = Scratch(CHUNK)
        # A tracker measures again every interval: loading the kernels once pays off.
        k = fused.kernels(sum(old._flat[n].nbytes + p.nbytes for n, p in live.items()), recurring=True)
        rows, moments = [], {}
        with torch.no_grad():
            pairs = {name: (old._flat[name], p.detach().reshape(-1)) for name, p in live.items()}
            done = _fused_changes(k, pairs, limits, scratch) if k is not None else {}
            for name, p in live.items():
                a, b = pairs[name]
                change = done.get(name)
                if change is None:
                    work = torch.float64 if torch.float64 in (a.dtype, b.dtype) else torch.float32
                    work_limits = [np.float64(t) if work == torch.float64 else np.float32(t) for t in limits]
                    change = _tensor_change(a, b, work_limits, scratch)
                m, ad, above = change
                moments[name] = m
                rows.append(_row(name, old, p, m, ad, above))
        frame = COMPARE.build(rows)
        frame.attrs["thresholds"] = tuple(limits)
        step = old.step if step is None else step
        return cls(old.step, step, tuple(limits), frame, MappingProxyType(moments), scratch.nbytes, old, live)

    # ------------------------------------------------------------ the whole model at once

    @property
    def numel(self) -> int:
        return int(self.frame["numel"].sum())

    @functools.cached_property
    def total(self) -> Moments:
        """Moments of every element of the change, all tensors merged (once: read by several metrics)."""
        return merge(list(self.moments.values())) if self.moments else Moments.empty(1)

    @property
    def weight_norm(self) -> float:
        """‖W_old‖ over all tensors."""
        return math.sqrt(math.fsum(self._old.norms_sq.values()))

    @property
    def rel_change(self) -> float:
        """‖Δ‖ / ‖W_old‖ over all tensors (0 when nothing moved, inf when W_old is all zeros)."""
        l2, w = self.total.l2, self.weight_norm
        return l2 / w if w > 0 else (0.0 if l2 == 0 else math.inf)

    @property
    def max_abs(self) -> float:
        t = self.total
        return max(-t.min, t.max) if t.count else 0.0

    def changed_ratio(self, threshold: float) -> float:
        """Fraction of all elements with |Δ| > threshold (one of `thresholds`)."""
        return self._above(threshold) / self.numel if self.numel else 0.0

    def sparsity(self, threshold: float) -> float:
        """Fraction of all elements with |Δ| ≤ threshold."""
        return (self.numel - self._above(threshold)) / self.numel if self.numel else 1.0

    def _above(self, threshold: float) -> int:
        k = self._index(threshold)
        return sum(round(f[k] * n) for f, n in zip(self.frame["frac_above"], self.frame["numel"]))

    def _index(self, threshold: float) -> int:
        for k, t in enumerate(self.thresholds):
            if math.isclose(t, threshold, rel_tol=1e-12, abs_tol=0.0):
                return k
        raise ValueError(
            f"threshold {threshold:g} was not measured; this delta has {[f'{t:g}' for t in self.thresholds]}"
        )

    # ------------------------------------------------------------ roll-ups (the compare engine's)

    def by_module(self) -> pd.DataFrame:
        return compare.by_module(self.frame)

    def by_component(self, per_layer: bool = False) -> pd.DataFrame:
        return compare.by_component(self.frame, per_layer)

    def by_layer(self) -> pd.DataFrame:
        return compare.by_layer(self.frame)

    def group_moments(self, key: Mapping[str, Any]) -> dict[Any, Moments]:
        """Moments of the change merged per group; `key` maps tensor names to a group
        (names it leaves out, or maps to None, belong to no group)."""
        groups: dict[Any, list[Moments]] = {}
        for name, m in self.moments.items():
            g = key.get(name)
            if g is not None:
                groups.setdefault(g, []).append(m)
        return {g: merge(parts) for g, parts in groups.items()}

    # ------------------------------------------------------------ the values, one tensor at a time

    def tensors(self, dtype: torch.dtype = torch.float32) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, W_new − W_old in the parameter's shape), one tensor at a time. Read from
        the model as it is when iterated: iterate before the next optimizer step."""
        with torch.no_grad():
            for name, p in self._new.items():
                old = self._old._flat[name].to(device=p.device, dtype=dtype)
                yield name, (p.detach().reshape(-1).to(dtype) - old).view(p.shape)

    def old(self, name: str) -> torch.Tensor:
        """W_old of one tensor (the snapshot's read-only copy, in the parameter's shape)."""
        return self._old[name]

    def __repr__(self) -> str:
        what = f"{len(self.moments)} tensors, ‖Δ‖={self.total.l2:.4g}, ‖Δ‖/‖W‖={self.rel_change:.4g}"
        return f"<ParameterDelta steps {self.old_step}→{self.new_step}: {what}>"
