"""Comparing two sources tensor by tensor (the ``compare`` frame), and rolling it up.

Deltas stream chunk by chunk (a quarter million elements at a time, into reused buffers,
so no full-size temporaries). Each chunk is reduced with torch's cascade summation (a
float32 BLAS dot over a chunk is off by ~1e-6; squares summed this way by ~1e-9) and the
partial sums are accumulated in float64. Files release their pages after each tensor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..backends import ModelSource, TensorEntry, ancestors, as_source
from ..core.gc_pause import gc_paused
from ..core.tree import module_paths
from ..errors import CheckpointError, UnsupportedTensorError, first_line
from ..schema import COMPARE, COMPARE_GROUPS, DELTA_HIST
from . import fused
from .components import component, layer_index
from .scratch import Scratch

__all__ = [
    "DEFAULT_THRESHOLDS",
    "by_component",
    "by_layer",
    "by_module",
    "by_subtrees",
    "compare_frame",
    "delta_histograms",
]

DEFAULT_THRESHOLDS = (1e-8, 1e-6, 1e-4)
CHUNK = 1 << 18


@dataclass
class _Sums:
    """Mergeable sufficient statistics of a delta: everything the delta columns need."""

    above: list[int]
    n: int = 0
    aa: float = 0.0  # sum a^2
    bb: float = 0.0  # sum b^2
    ab: float = 0.0  # sum a*b
    dd: float = 0.0  # sum (b - a)^2
    d: float = 0.0  # sum (b - a)
    max_abs: float = 0.0

    def columns(self) -> dict[str, Any]:
        l2_a, l2_b, l2_d = math.sqrt(self.aa), math.sqrt(self.bb), math.sqrt(self.dd)
        cosine = max(-1.0, min(1.0, self.ab / (l2_a * l2_b))) if l2_a > 0 and l2_b > 0 else None
        rel = l2_d / l2_a if l2_a > 0 else (0.0 if l2_d == 0 else math.inf)
        larger = max(l2_a, l2_b)
        return {
            "numel": self.n,
            "l2_a": l2_a,
            "l2_b": l2_b,
            "l2_delta": l2_d,
            "rel_change": rel,
            # bounded and defined for a zero start (a zero-initialised bias): what rankings use
            "change": l2_d / larger if larger > 0 else 0.0,
            "max_abs_delta": self.max_abs,
            "cosine": cosine,
            "mean_drift": self.d / self.n if self.n else None,
            "frac_above": tuple(c / self.n if self.n else 0.0 for c in self.above),
        }


def _group_sums(frame: pd.DataFrame, rows: list[int], groups: list[int], count: int, k: int) -> list[_Sums]:
    """The sums of each of `count` groups, row ``rows[j]`` of the compare `frame` belonging
    to group ``groups[j]``: back from each row's columns to its sums, then added up per
    group in the order of the pairs, as one merge after another would (the same float64
    additions, so the same numbers). A row that compared nothing adds nothing; a NaN
    largest change stays NaN in every group it is in."""
    compared = frame["numel"].notna().to_numpy(dtype=bool)
    n = frame["numel"].to_numpy(dtype=np.int64, na_value=0)

    def column(name: str) -> np.ndarray:
        return frame[name].to_numpy(dtype=np.float64, na_value=np.nan)

    l2_a, l2_b, l2_d = column("l2_a"), column("l2_b"), column("l2_delta")
    cosine, drift = column("cosine"), column("mean_drift")
    given = frame["frac_above"].tolist()
    # as many thresholds as the rows have (a frame's attrs, which name them, do not survive every copy)
    k = next((len(f) for f, c in zip(given, compared.tolist()) if c), k)
    fractions = [f if c else (0.0,) * k for f, c in zip(given, compared.tolist())]
    parts = {
        "aa": l2_a**2,
        "bb": l2_b**2,
        "ab": np.where(np.isnan(cosine), 0.0, cosine * l2_a * l2_b),
        "dd": l2_d**2,
        "d": np.where(np.isnan(drift), 0.0, drift * n),
    }
    at, where = np.asarray(groups, dtype=np.intp), np.asarray(rows, dtype=np.intp)
    totals = {}
    for name, values in parts.items():
        out = np.zeros(count)
        np.add.at(out, at, np.where(compared, values, 0.0)[where])
        totals[name] = out.tolist()
    elements = np.zeros(count, dtype=np.int64)
    np.add.at(elements, at, n[where])  # in int64: exact past 2**53 elements
    largest = np.zeros(count)
    with np.errstate(invalid="ignore"):  # a NaN largest change stays NaN in its groups: meant, not a warning
        np.maximum.at(largest, at, np.where(compared, column("max_abs_delta"), 0.0)[where])
    above = np.zeros((count, k), dtype=np.int64)
    if k:
        counted = np.rint(np.array(fractions, dtype=np.float64).reshape(-1, k) * n[:, None]).astype(np.int64)
        np.add.at(above, at, counted[where])
    fields = zip(
        above.tolist(), elements.tolist(), *(totals[f] for f in ("aa", "bb", "ab", "dd", "d")), largest.tolist()
    )
    return [_Sums(*values) for values in fields]


def _flat(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)


def _delta_sums(
    a: torch.Tensor, b: torch.Tensor, thresholds: tuple[float, ...], buffers: Scratch, kernels: ModuleType | None
) -> _Sums:
    """Sums of b - a over same-shape tensors, chunk by chunk. `thresholds` ascending.
    Chunks not already in the working dtype on the CPU are copied into reused buffers.
    With the fused `kernels` (fused.kernels), one read of each tensor."""
    a, b = _flat(a), _flat(b)
    if kernels is not None:
        (p,) = fused.pair_sums(kernels, [(a, b)], thresholds, buffers)
        return _Sums(p.above, p.n, p.aa, p.bb, p.aa + p.ad, p.dd, p.d, p.max_abs)
    wide = torch.float64 in (a.dtype, b.dtype) or not (a.is_floating_point() and b.is_floating_point())
    work = torch.float64 if wide else torch.float32
    buf_a, buf_b, buf_d, buf_sq = buffers.chunks(work, "a", "b", "d", "square")
    limits = [(np.float64 if wide else np.float32)(t) for t in thresholds]
    s = _Sums([0] * len(thresholds), n=a.numel())
    for start in range(0, a.numel(), CHUNK):
        ca, cb = a[start : start + CHUNK], b[start : start + CHUNK]
        m = ca.numel()
        ca = ca if ca.dtype == work and ca.device.type == "cpu" else buf_a[:m].copy_(ca)
        cb = cb if cb.dtype == work and cb.device.type == "cpu" else buf_b[:m].copy_(cb)
        d = torch.sub(cb, ca, out=buf_d[:m])
        s.aa += float(torch.mul(ca, ca, out=buf_sq[:m]).sum())
        s.bb += float(torch.mul(cb, cb, out=buf_sq[:m]).sum())
        s.ab += float(torch.mul(ca, cb, out=buf_sq[:m]).sum())
        s.dd += float(torch.mul(d, d, out=buf_sq[:m]).sum())
        s.d += float(d.sum())
        chunk_max = float(d.abs_().max())
        s.max_abs = chunk_max if math.isnan(chunk_max) else max(s.max_abs, chunk_max)
        values, mask = d.numpy(), buffers.mask[:m]
        for k, limit in enumerate(limits):
            if not chunk_max > limit:  # ascending: no element passes this or a larger one
                break
            s.above[k] += int(np.count_nonzero(np.greater(values, limit, out=mask)))
    return s


def _row(name: str, a: TensorEntry | None, b: TensorEntry | None) -> dict[str, Any]:
    either = a or b
    assert either is not None, name
    return {
        "name": name,
        "module": either.module,
        "component": component(name),
        "layer": layer_index(name),
        "shape_a": a.shape if a else None,
        "shape_b": b.shape if b else None,
        "dtype_a": a.dtype if a else None,
        "dtype_b": b.dtype if b else None,
    }


def _across_ranks(
    a: TensorEntry,
    b: TensorEntry,
    thresholds: tuple[float, ...],
    buffers: Scratch,
    kernels: ModuleType | None,
    sides: tuple[ModelSource, ModelSource],
) -> _Sums:
    """The delta sums of a pair spread over ranks: this rank's share of the elements, added over the ranks."""
    src_a, src_b = sides
    if src_a.collective is not None:
        ranks = src_a.collective
        va, vb = ranks.shares(a, b, src_b)
    else:
        ranks = src_b.collective
        vb, va = ranks.shares(b, a, src_a)
    s = _delta_sums(va, vb, thresholds, buffers, kernels)
    sums, (max_abs,) = ranks.add_up([s.n, s.aa, s.bb, s.ab, s.dd, s.d, *s.above], [s.max_abs])
    n, aa, bb, ab, dd, d, *above = sums
    return _Sums([round(x) for x in above], round(n), aa, bb, ab, dd, d, max_abs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def _identical(a: torch.Tensor, b: torch.Tensor, s: _Sums) -> _Sums:
    """`s` for two tensors holding the same bits (a file compared with itself), whose sums
    met NaN or infinity: no element changed, and the norms count the finite elements."""
    if a.shape != b.shape or a.dtype != b.dtype or a.layout != torch.strided or not torch.equal(_bits(a), _bits(b)):
        return s
    x = a.detach().reshape(-1).to(torch.float64) if a.is_floating_point() else a.detach().reshape(-1).double()
    x = x[torch.isfinite(x)]
    aa = float((x * x).sum())
    return _Sums([0] * len(s.above), s.n, aa, aa, aa, 0.0, 0.0, 0.0)


def _pair(
    a: TensorEntry,
    b: TensorEntry,
    thresholds: tuple[float, ...],
    buffers: Scratch,
    kernels: ModuleType | None,
    sides: tuple[ModelSource, ModelSource] | None = None,
) -> dict[str, Any]:
    if a.shape != b.shape:
        return {"status": "reshaped"}
    if "meta" in (a.device, b.device):
        raise ValueError(
            f"compare: tensor {a.name!r} is on the meta device in {'a' if a.device == 'meta' else 'b'}: "
            "it has no values"
        )
    try:
        if sides is None:
            s = _delta_sums(a.values(), b.values(), thresholds, buffers, kernels)
            if not (math.isfinite(s.dd) and math.isfinite(s.max_abs)) and a.dtype == b.dtype:
                s = _identical(a.values(), b.values(), s)  # NaN - NaN and inf - inf are no change
        else:
            s = _across_ranks(a, b, thresholds, buffers, kernels, sides)
    except UnsupportedTensorError as exc:
        raise ValueError(f"compare: {first_line(exc)}") from None
    except CheckpointError:
        raise
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"compare: tensor {a.name!r} ({a.dtype} vs {b.dtype}): {first_line(exc)}") from exc
    finally:
        a.release()
        b.release()
    same = s.max_abs == 0 and a.dtype == b.dtype
    status = "same" if same else "dtype_changed" if a.dtype != b.dtype else "changed"
    return {"status": status, **s.columns()}


@gc_paused()
def compare_frame(a: Any, b: Any, thresholds: Iterable[float] = DEFAULT_THRESHOLDS) -> pd.DataFrame:
    """One row per tensor name of `a` and `b` (schema.COMPARE): status and delta statistics.
    `a` and `b` are anything :func:`nbinspect.backends.as_source` accepts. A tied path that
    only one side has (the other stored the tie once) is left out, not reported as added."""
    thresholds = tuple(sorted(float(t) for t in thresholds))
    src_a, src_b = as_source(a), as_source(b)
    in_a = {t.name: t for t in src_a.tensors}
    in_b = {t.name: t for t in src_b.tensors}
    # A tied path one side lacks is not a difference when that side holds another path of
    # the tie: files store a tie once (safetensors refuses shared tensors), under either name.
    for one, other, source in ((in_a, in_b, src_a), (in_b, in_a, src_b)):
        groups: dict[str, list[str]] = {}
        for alias, owner in source.tied().items():
            groups.setdefault(owner, [owner]).append(alias)
        for paths in groups.values():
            if any(p in other for p in paths):
                for p in paths:
                    if p not in other:
                        del one[p]
    same_shape = [(ta, in_b[name]) for name, ta in in_a.items() if name in in_b and ta.shape == in_b[name].shape]
    buffers = Scratch(CHUNK)
    kernels = fused.kernels(sum(ta.nbytes + tb.nbytes for ta, tb in same_shape))
    spread = src_a.collective is not None or src_b.collective is not None  # each rank compares its share
    sides = (src_a, src_b) if spread else None
    rows = []
    with torch.no_grad():
        for name, ta in in_a.items():
            tb = in_b.get(name)
            try:
                extra = {"status": "removed"} if tb is None else _pair(ta, tb, thresholds, buffers, kernels, sides)
            except ValueError as exc:  # one line naming both sides and the tensor
                raise ValueError(f"{exc} ({src_a.name} vs {src_b.name})") from None
            rows.append({**_row(name, ta, tb), **extra})
    rows += [{**_row(name, None, tb), "status": "added"} for name, tb in in_b.items() if name not in in_a]
    frame = COMPARE.build(rows)
    frame.attrs["thresholds"] = thresholds
    return frame


def _groups(frame: pd.DataFrame, keys: list[list[tuple[str, Any]]]) -> pd.DataFrame:
    """Roll rows up into groups; `keys[i]` lists the (group, layer) pairs row i belongs to."""
    k = len(frame.attrs.get("thresholds", DEFAULT_THRESHOLDS))
    index: dict[tuple[str, Any], int] = {}  # group -> its number, in order of first appearance
    rows, groups = [], []
    for i, row_keys in enumerate(keys):
        for key in row_keys:
            rows.append(i)
            groups.append(index.setdefault(key, len(index)))
    sums = _group_sums(frame, rows, groups, len(index), k)
    at = np.asarray(groups, dtype=np.intp)
    tensors = np.bincount(at, minlength=len(index)).tolist()
    changed = (frame["status"] != "same").to_numpy(dtype=bool)[np.asarray(rows, dtype=np.intp)]
    differ = np.bincount(at, weights=changed, minlength=len(index)).astype(np.int64).tolist()
    records = [
        {
            "group": group,
            "layer": layer,
            "tensors": tensors[g],
            "differ": differ[g],
            **(sums[g].columns() if sums[g].n else {"numel": 0}),
        }
        for (group, layer), g in index.items()
    ]
    out = COMPARE_GROUPS.build(records)
    out.attrs.update(frame.attrs)
    return out


def by_module(frame: pd.DataFrame) -> pd.DataFrame:
    """The compare frame rolled up per module path (every ancestor included), pre-order."""
    order = {path: i for i, path in enumerate(module_paths(frame["name"]))}
    keys = [[(path, None) for path in ancestors(module)] for module in frame["module"]]
    out = _groups(frame, keys)
    return out.iloc[out["group"].map(order).argsort(kind="stable")].reset_index(drop=True)


def by_component(frame: pd.DataFrame, per_layer: bool = False) -> pd.DataFrame:
    """Rolled up per component (attn.q, mlp.up, norm, ...), or per (layer, component)."""
    keys = [
        [(c, layer if per_layer and not pd.isna(layer) else None)]
        for c, layer in zip(frame["component"], frame["layer"])
    ]
    return _groups(frame, keys)


def by_layer(frame: pd.DataFrame) -> pd.DataFrame:
    """Rolled up per layer index; tensors outside numbered layers form the group ''."""
    keys = [[("" if pd.isna(n) else str(n), None if pd.isna(n) else int(n))] for n in frame["layer"]]
    return _groups(frame, keys)


def by_subtrees(frame: pd.DataFrame, groups: dict[str, list[str]]) -> pd.DataFrame:
    """Rolled up per named group of module subtrees (a fold of repeated blocks: its members'
    paths): every tensor under one of a group's modules counts in that group, once."""
    under = {}
    for group, members in groups.items():
        for path in members:
            under[path] = group
    keys = []
    for module in frame["module"]:
        found = next((under[p] for p in ancestors(module) if p in under), None)
        keys.append([] if found is None else [(found, None)])
    return _groups(frame, keys)


def delta_histograms(a: Any, b: Any, frame: pd.DataFrame, bins: int = 64) -> pd.DataFrame:
    """The histogram of the change b - a of every changed tensor of the compare `frame`, on
    [-max |Δ|, +max |Δ|] (known from the frame: one chunked pass, no range pass), as a frame
    of ``name``, ``hist_counts`` and ``hist_edges``. Before/after histograms of a small update
    look identical; this one shows it."""
    src_a, src_b = as_source(a), as_source(b)
    in_a, in_b = {t.name: t for t in src_a.tensors}, {t.name: t for t in src_b.tensors}
    moved = frame[frame["status"].isin(["changed", "dtype_changed"])]
    rows = []
    with torch.no_grad():
        for name, largest in zip(moved["name"], moved["max_abs_delta"].astype(float)):
            ta, tb = in_a.get(name), in_b.get(name)
            if (
                ta is None
                or tb is None
                or not math.isfinite(largest)
                or largest <= 0
                or "meta" in (ta.device, tb.device)
            ):
                continue
            try:
                va, vb = _flat(ta.values()), _flat(tb.values())
                counts = torch.zeros(bins, dtype=torch.float64)
                for start in range(0, va.numel(), CHUNK):
                    d = vb[start : start + CHUNK].double() - va[start : start + CHUNK].double()
                    counts += torch.histc(d[torch.isfinite(d)], bins=bins, min=-largest, max=largest)
            finally:
                ta.release()
                tb.release()
            edges = np.linspace(-largest, largest, bins + 1)
            rows.append({"name": name, "hist_counts": counts.numpy().astype(np.int64), "hist_edges": edges})
    return DELTA_HIST.build(rows)
