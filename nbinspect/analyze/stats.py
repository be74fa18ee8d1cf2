"""Weight statistics: the `stats` frame (schema.STATS), per tensor or rolled up per module.

``stats(model)`` reads every tensor once, tensor by tensor (a lazy source loads one at a
time and the reference is dropped before the next), computes mergeable
:class:`~nbinspect.core.moments.Moments` and turns them into rows. Tied storage is
computed once; module roll-ups merge each module subtree's *parameters*, shared storage
once. Nothing in the model changes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
import torch

from ..backends import ModelSource, TensorEntry, as_source, on_receiving_rank
from ..backends.torch.source import compact
from ..core.gc_pause import gc_paused
from ..core.moments import Moments, histogram_edges, merge, merge_groups, spread
from ..errors import CheckpointError, UnsupportedTensorError
from ..schema import PARAMETER, STATS
from . import fused
from .parallel import WholeTensors
from .reduce import CHUNK, SAMPLE, batch_moments, large_moments, streamable, streamed_moments
from .scratch import Scratch

__all__ = ["frames_of", "stats", "stats_frames", "tensor_stats"]

BY = ("tensor", "module")
PROGRESS_DELAY = 2.0  # seconds before the progress bar appears (progress=None)
_BATCH_ELEMENTS = 1 << 14  # small tensors reduced together: float64 temporaries of 128 KB stay in L2 (2 MB: 10% slower)
_BATCH_TENSORS = 16384
_TENSORS = (torch.Tensor, torch.nn.Parameter)  # exactly these types: subclasses take the general path
_PROGRESS_STEP = 1 << 24  # bytes between progress bar updates
_PLAIN = {
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


@on_receiving_rank(0)
def stats(
    obj: Any, bins: int = 64, by: str = "tensor", progress: bool | None = None, workers: int | None = None
) -> pd.DataFrame:
    """Weight statistics of `obj` (schema.STATS): a torch module, a ModelSource, a dict of
    name -> tensor, or one tensor.

    ``by="tensor"`` gives one row per parameter and buffer path; ``by="module"`` one row
    per module path, merging the parameters of its subtree (shared storage once).
    Moments ignore NaN/Inf and count them; histograms have `bins` bins over each row's
    finite range (``hist_sample`` says how many elements were binned: all of them up to
    65,536 per tensor, a strided sample of that size above). A progress bar (tqdm;
    in a notebook one text output, emptied at the end) shows after two seconds;
    ``progress=False`` hides it, ``True`` shows it at once.
    Large tensors are reduced one per kernel thread (a tensor too large to share out
    evenly is split across them), as many threads as torch's thread count (one per core at
    most), or ``workers=N`` of them (``workers=1``: none but the calling thread's).
    """
    if by not in BY:
        raise ValueError(f"stats(by={by!r}): choose one of {BY}")
    return stats_frames(obj, bins, progress, (by,), workers)[by]


@gc_paused()
def stats_frames(
    obj: Any, bins: int = 64, progress: bool | None = None, by: tuple[str, ...] = BY, workers: int | None = None
) -> dict[str, pd.DataFrame]:
    """The stats frame for each way in `by` ("tensor", "module"), reading the tensors once."""
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"stats(bins={bins!r}): need a positive integer number of bins")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise ValueError(f"stats(workers={workers!r}): need a positive number of workers")
    source = _stats_source(obj)
    with fused.using_threads(workers):  # None: torch's thread count
        results = tensor_stats(source, bins, progress)
    if source.collective is not None:  # each rank read its share: combine them
        results = source.collective.combine(results, bins)
    return frames_of(source, results, bins, by)


def frames_of(
    source: ModelSource, results: Mapping[Any, tuple[Moments | None, str | None]], bins: int, by: tuple[str, ...] = BY
) -> dict[str, pd.DataFrame]:
    """The stats frames of `source` from Moments already computed per storage key."""
    frames = {}
    if "tensor" in by:
        rows = [(t.name, t.module, t.kind, t.dtype, t.numel, *results[t.storage_key]) for t in source.tensors]
        frames["tensor"] = _frame(rows, bins)
    if "module" in by:
        frames["module"] = _frame(list(_module_rows(source, results)), bins)
    return frames


def tensor_stats(
    source: ModelSource, bins: int = 64, progress: bool | None = None
) -> dict[Any, tuple[Moments | None, str | None]]:
    """Moments and a note for each distinct storage of `source` (None when it has no values)."""
    unique = source.unique_tensors()
    results: dict[Any, tuple[Moments | None, str | None]] = {}
    pending: list[tuple[Any, torch.Tensor, str | None, int]] = []
    pending_elements = unreported = 0

    def flush() -> None:
        try:
            done = batch_moments([p[1] for p in pending], bins, workspace.kernels)
        except Exception:  # one bad tensor: reduce them one by one to keep the others
            done = None
        for i, (key, values, note, implicit) in enumerate(pending):
            if done is not None:
                results[key] = (_with_zeros(done[i], implicit, bins), note)
            else:
                results[key] = _guarded(
                    partial(_one, lambda v: batch_moments([v], bins)[0], values, implicit, note, bins)
                )
        pending.clear()

    sizes = [t.nbytes for t in unique.values() if t.numel > SAMPLE]
    workspace = Scratch(CHUNK, fused.kernels(sum(sizes)))
    whole = WholeTensors(sizes if workspace.kernels is not None else [])
    with _progress(sum(t.nbytes for t in unique.values()), progress) as bar, torch.no_grad(), workspace, whole:
        for key, entry in unique.items():
            values, note, implicit, n = entry.tensor, None, 0, entry.numel
            # The common case without _real_values' checks: a small plain tensor in memory (10,000s of them).
            plain = type(values) in _TENSORS and values.dtype in _PLAIN and values.is_cpu
            if not plain and streamable(values, workspace):  # a large tensor in a file: read a piece at a time
                if whole.takes(entry.nbytes):  # on a thread of its own; counted in the bar when done
                    whole.submit(key, entry.nbytes, _streamed, values, bins, Scratch(CHUNK, workspace.kernels))
                    continue
                results[key] = _streamed(values, bins, workspace)
                values = None
            elif not (n <= SAMPLE and plain and values.layout == torch.strided):
                try:
                    values, note, implicit = _real_values(entry)
                except UnsupportedTensorError as exc:  # sparse, nested: listed, named, not read
                    values, note, implicit = None, f"no values: {str(exc).rpartition(': ')[2]}", 0
                except CheckpointError:  # the file changed or lies: one line for the whole call
                    raise
                except Exception as exc:
                    values, note, implicit = None, _skipped(exc), 0
                n = 0 if values is None else values.numel()
            if values is None:
                results.setdefault(key, (None, note))
            elif n <= SAMPLE:
                pending.append((key, values, note, implicit))
                pending_elements += n
                if len(pending) >= _BATCH_TENSORS or pending_elements >= _BATCH_ELEMENTS:
                    flush()
                    pending_elements = 0
            elif plain and values is entry.tensor and entry.release_hook is None and whole.takes(entry.nbytes):
                # in memory as it is (no copy held, no pages to give back): on a thread of its own
                reduce = partial(_large_alone, bins=bins, kernels=workspace.kernels)
                whole.submit(key, entry.nbytes, _guarded, partial(_one, reduce, values, implicit, note, bins))
                continue
            else:
                results[key] = _guarded(
                    partial(_one, lambda v: large_moments(v, bins, workspace), values, implicit, note, bins)
                )
            values = None  # drop the reference; a memory-mapped source frees the pages
            entry.release()
            unreported += entry.nbytes
            if unreported >= _PROGRESS_STEP:
                bar.update(unreported)
                unreported = 0
        flush()
        bar.update(unreported)
        for key, nbytes, result in whole.results():
            results[key] = result
            bar.update(nbytes)
    return results


def _large_alone(values: torch.Tensor, bins: int, kernels: Any) -> Moments:
    """:func:`large_moments` on a pool thread (its own buffers; grad mode is per thread)."""
    with torch.no_grad(), Scratch(CHUNK, kernels) as workspace:
        return large_moments(values, bins, workspace)


def _streamed(values: Any, bins: int, workspace: Scratch) -> tuple[Moments | None, str | None]:
    try:
        return streamed_moments(values, bins, workspace), None
    except CheckpointError:  # the file changed or lies: one line for the whole call
        raise
    except Exception as exc:
        return None, _skipped(exc)


def _one(reduce: Callable[[torch.Tensor], Moments], values: torch.Tensor, implicit: int, note: Any, bins: int) -> tuple:
    return _with_zeros(reduce(values), implicit, bins), note


def _guarded(compute: Callable[[], tuple]) -> tuple:
    """compute(), or (None, "skipped: <error>"): one odd tensor must not sink the table."""
    try:
        return compute()
    except Exception as exc:
        return None, _skipped(exc)


def _skipped(exc: Exception) -> str:
    return f"skipped: {type(exc).__name__}: {exc}"


def _watched() -> bool:
    """Whether someone watches a progress bar: a terminal on stderr, or a notebook (one text
    output updated in place, emptied at the end: core/progress.py). Redirected output (logs,
    pipes, the CLI's captured stderr) gets no bar, nor anything run with NBINSPECT_PROGRESS=0
    (executed notebooks whose outputs are compared: a bar appears only when the work is slow)."""
    if os.environ.get("NBINSPECT_PROGRESS") == "0":
        return False
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def _progress(total: int, progress: bool | None):
    from ..core.progress import progress_bar

    return progress_bar(
        total=total,
        desc="weight stats",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=progress is False or (progress is None and not _watched()),
        delay=0 if progress else PROGRESS_DELAY,
        leave=False,
    )


_BROADCAST_READ = 2**28  # elements of a broadcast view read as they repeat; larger: its stored elements


def _real_values(entry: TensorEntry) -> tuple[torch.Tensor | None, str | None, int]:
    """The entry's values as a dense real tensor, a note on what was done to them, and how
    many implicit zeros a sparse tensor adds."""
    if entry.shape is None:
        return None, "no values: uninitialized (lazy) parameter", 0
    if entry.device == "meta":
        return None, "no values: meta tensor", 0
    t = entry.values()
    if not isinstance(t, torch.Tensor):
        return None, f"no values: {type(t).__name__} is not a tensor", 0
    if t.layout == torch.strided and not t.is_meta and t.numel() > _BROADCAST_READ and 0 in t.stride():
        # a broadcast view (``zeros(1).expand(3 * 10**11)``): its stored elements, not 10**11 repeats
        stored = compact(t)
        values, note, implicit = _real_values_of(stored)
        return (
            values,
            "; ".join(filter(None, [f"broadcast view: its {stored.numel():,} stored elements", note])),
            implicit,
        )
    return _real_values_of(t)


def _real_values_of(t: torch.Tensor) -> tuple[torch.Tensor | None, str | None, int]:
    if t.dtype in _PLAIN and t.layout == torch.strided and not t.is_meta:
        return t, None, 0
    if t.is_meta:
        return None, "no values: meta tensor", 0
    notes, implicit = [], 0
    if t.is_quantized:
        t = t.dequantize()
        notes.append("dequantized")
    if t.layout != torch.strided:
        stored = t.coalesce().values() if t.layout == torch.sparse_coo else t.values()
        implicit = t.numel() - stored.numel()
        notes.append(f"sparse ({str(t.layout).removeprefix('torch.')}): {implicit:,} implicit zeros")
        t = stored
    if t.is_complex():
        t = t.abs()
        notes.append("magnitude of complex values")
    return t, "; ".join(notes) or None, implicit


def _with_zeros(m: Moments, zeros: int, bins: int) -> Moments:
    """`m` plus `zeros` elements equal to 0 (a sparse tensor's implicit zeros)."""
    if not zeros:
        return m
    hist = np.zeros(bins, np.int64)
    hist[bins // 2] = zeros  # a point mass sits in the middle bin, as numpy.histogram puts it
    point = Moments(
        numel=zeros, count=zeros, mean=0.0, m2=0.0, abs_sum=0.0, min=0.0, max=0.0, zeros=zeros, nan=0, inf=0,
        hist=hist, hist_lo=0.0, hist_hi=0.0, hist_sample=zeros,
    )  # fmt: skip
    return merge([m, point])


_Row = tuple  # (name, module, kind, dtype, numel, Moments | None, note)
_FIELDS = (
    "numel",
    "count",
    "mean",
    "m2",
    "abs_sum",
    "min",
    "max",
    "zeros",
    "nan",
    "inf",
    "hist_sample",
    "hist_lo",
    "hist_hi",
)


def _frame(rows: list[_Row], bins: int) -> pd.DataFrame:
    """The stats frame, built column by column in numpy (thousands of rows stay cheap)."""
    names, modules, kinds, dtypes, numels, moments, notes = zip(*rows) if rows else ((),) * 7
    present = np.array([m is not None for m in moments], dtype=bool)
    having = [m for m in moments if m is not None]
    # Moments is a tuple: transposing the rows gives every field's column at C speed.
    columns_of = dict(zip(Moments._fields, zip(*having))) if having else dict.fromkeys(Moments._fields, ())
    numel, count, mean, m2, abs_sum, low, high, zeros, nan, inf, sample, hist_lo, hist_hi = (
        np.array(columns_of[f], dtype=np.float64) for f in _FIELDS
    )
    std, l2, abs_mean = spread(count, mean, m2, abs_sum)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero_share = zeros / numel

    index = np.flatnonzero(present)

    def floats(values: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), np.nan)
        out[index] = values
        return out

    def ints(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
        out = np.zeros(len(rows), dtype=np.int64)
        out[index] = values
        return pd.arrays.IntegerArray(out, ~present)

    def objects(values: Iterable) -> list:
        if len(index) == len(rows):
            return list(values)
        out = [None] * len(rows)
        for i, value in zip(index.tolist(), values):
            out[i] = value
        return out

    columns = {
        "name": names,
        "module": modules,
        "kind": kinds,
        "dtype": dtypes,
        "numel": numels,
        **{
            k: floats(v)
            for k, v in {
                "mean": mean,
                "std": std,
                "min": low,
                "max": high,
                "abs_mean": abs_mean,
                "l2": l2,
                "zeros": zero_share,
            }.items()
        },
        **{k: ints(v) for k, v in {"nan": nan, "inf": inf, "hist_sample": sample}.items()},
        "hist_counts": objects(columns_of["hist"]),
        "hist_edges": objects(histogram_edges(hist_lo, hist_hi, bins).reshape(-1, bins + 1)),
        "note": notes,
    }
    return STATS.from_columns(columns, len(rows))


def _module_rows(source: ModelSource, results: Mapping) -> Iterable[_Row]:
    subtree = source.subtree_tensors(PARAMETER)
    position = {key: i for i, key in enumerate(k for k, (m, _) in results.items() if m is not None)}
    parts = [m for m, _ in results.values() if m is not None]
    groups = [[position[k] for k in subtree[module.name] if k in position] for module in source.modules]
    merged = merge_groups(parts, groups)  # every module's subtree at once
    for module, group, total in zip(source.modules, groups, merged):
        entries = subtree[module.name]
        left_out = len(entries) - len(group)
        note = None
        if not entries:
            note = "no parameters"
        elif left_out:
            reasons = "; ".join(sorted({results[k][1] for k in entries if results[k][0] is None}))
            note = reasons if not group else f"{left_out} of {len(entries)} tensors left out ({reasons})"
        dtypes = ", ".join(sorted({t.dtype for t in entries.values()}))
        numel = sum(t.numel for t in entries.values())
        yield module.name, module.name, "module", dtypes, numel, total, note


def _stats_source(obj: Any) -> ModelSource:
    """A ModelSource for anything as_source takes (model, state_dict, checkpoint path,
    ModelSource) or for a single tensor."""
    if isinstance(obj, torch.Tensor):
        obj = {"tensor": obj}
    return as_source(obj)
