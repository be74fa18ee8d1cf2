"""Weight statistics on several threads.

Without ``workers=``, :class:`WholeTensors` gives each large tensor (in a file, or in
memory as it is) to one thread of a pool as large as torch's thread count, which reduces
it whole, when there are enough of them to keep every thread busy: each thread's Python between tensors (the
probes of the shift, the sample's histogram: ~0.5-1.5 ms a tensor) then runs while the
other threads are in the kernel, where a tensor split across the threads left every core
waiting for it (measured on a 2 GB fp32 folder of 64 MB tensors at low load: 0.233 s
median against 0.281 s split, bf16 0.323 against 0.361 s).

With ``workers=N``, :func:`parallel_tensor_stats` spreads whole files over N threads.

Each worker takes whole shard files (largest first, one file at a time) and reduces their
tensors with the ordinary streaming code on its own thread (``fused.on_this_thread``: a
tensor is not split again across the pool, so one worker's Python between tensors runs
while the other is in the kernel): a large tensor of a safetensors file is one call of the
fused kernel, which reads it 1 MiB at a time (``fused.stream_sums``), so each worker holds a
buffer, whatever the checkpoint's size. Threads, not processes: the kernels and
``pread`` release the GIL, and a spawned process pays for importing torch and loading the
kernels (seconds; measured 17 s for two workers on the shared 2-core machine under load)
before reading anything, which a folder of a few GB never earns back. Tensors that are not
in a safetensors file (a torch.save shard, a state_dict in memory) are reduced on the
calling thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..backends import ModelSource, TensorEntry
from ..core.moments import Moments
from . import fused

__all__ = ["WholeTensors", "parallel_tensor_stats"]

_Results = dict[Any, tuple[Moments | None, str | None]]
_Result = tuple[Moments | None, str | None]


class WholeTensors:
    """Large tensors reduced each whole on a thread of their own (``fused.on_this_thread``),
    as many threads as the kernels may use (``fused.threads``: torch's thread count, at
    most one per core), when the work spreads evenly: at least two of them, each at most
    ``limit`` bytes (a quarter of a thread's share of every large tensor's bytes: queued in
    the order met, the last one may run alone, 1/8 longer than a split at worst on 2
    threads); larger ones are split across the threads as before. As a context manager it
    does not return while a thread still reads: files stay open and tensors alive until
    every read has ended, even when the loop that queues them raises (tensors not started
    are cancelled)."""

    def __init__(self, sizes: list[int]) -> None:
        self._threads = fused.threads()
        self.limit = sum(sizes) // (4 * self._threads) if self._threads > 1 and len(sizes) > 1 else -1
        self._pool: ThreadPoolExecutor | None = None
        self._queued: list[tuple[Any, int, Future[_Result]]] = []

    def takes(self, nbytes: int) -> bool:
        return nbytes <= self.limit

    def submit(self, key: Any, nbytes: int, reduce: Callable[..., _Result], *args: Any) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="nbinspect-tensors")
        self._queued.append((key, nbytes, self._pool.submit(_on_this_thread, reduce, *args)))

    def results(self) -> Iterator[tuple[Any, int, _Result]]:
        """(key, bytes, result) of each tensor, in the order queued."""
        for key, nbytes, done in self._queued:
            yield key, nbytes, done.result()

    def __enter__(self) -> WholeTensors:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._queued.clear()


def _on_this_thread(reduce: Callable[..., _Result], *args: Any) -> _Result:
    with fused.on_this_thread():  # a tensor is not split again across the kernels' pool
        return reduce(*args)


def parallel_tensor_stats(source: ModelSource, bins: int, workers: int) -> _Results:
    """Moments per storage key of `source`, as :func:`~nbinspect.analyze.stats.tensor_stats`
    gives them, with the safetensors shards reduced by `workers` threads."""
    from .stats import tensor_stats

    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"stats(workers={workers!r}): need a positive number of workers")
    by_file: dict[str, list[TensorEntry]] = {}
    rest: list[TensorEntry] = []
    for key, t in source.unique_tensors().items():
        if isinstance(key, tuple) and len(key) == 3 and key[0] == "file" and str(key[1]).endswith(".safetensors"):
            by_file.setdefault(key[1], []).append(t)
        else:
            rest.append(t)
    results: _Results = {}
    if by_file:
        size = {file: sum(t.nbytes for t in tensors) for file, tensors in by_file.items()}
        fused.kernels(sum(size.values()))  # the whole run decides, as one call over every file would
        files = sorted(by_file, key=lambda f: -size[f])  # largest first: the workers end together

        def file_stats(file: str) -> _Results:
            with fused.on_this_thread():
                return tensor_stats(_subset(source, by_file[file]), bins, progress=False)

        with ThreadPoolExecutor(workers, thread_name_prefix="nbinspect-files") as pool:
            for part in pool.map(file_stats, files):
                results.update(part)
    if rest:
        results.update(tensor_stats(_subset(source, rest), bins, progress=False))
    return {t.storage_key: results[t.storage_key] for t in source.tensors if t.storage_key in results}


def _subset(source: ModelSource, tensors: list[TensorEntry]) -> ModelSource:
    import dataclasses

    return dataclasses.replace(source, tensors=tuple(tensors))
