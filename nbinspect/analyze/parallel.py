"""Weight statistics on several threads.

:class:`WholeTensors` gives each large tensor (in a file, or in memory as it is) to one
thread of a pool, which reduces it whole, when there are enough of them to keep every
thread busy: each thread's Python between tensors (the probes of the shift, the sample's
histogram: ~0.5-1.5 ms a tensor) then runs while the other threads are in the kernel, where
a tensor split across the threads left every core waiting for it (measured on a 2 GB fp32
folder of 64 MB tensors at low load: 0.233 s median against 0.281 s split, bf16 0.323
against 0.361 s). The pool has as many threads as torch's thread count (one per core at
most), or ``stats(workers=N)``'s N.

Threads, not processes: the kernels and ``pread`` release the GIL, and a spawned process
pays for importing torch and loading the kernels (seconds; measured 17 s for two workers on
the shared 2-core machine under load) before reading anything, which a folder of a few GB
never earns back. ``workers=N`` once spread whole shard files over N threads instead; with
the tensors already spread over every core that was the same speed (2 GB of bf16 shards,
alternating in one process: 0.146 s both) and a second path to keep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ..core.moments import Moments
from . import fused

__all__ = ["WholeTensors"]

_Result = tuple[Moments | None, str | None]


class WholeTensors:
    """Large tensors reduced each whole on a thread of their own, as many threads as the
    kernels may use (``fused.threads``: torch's thread count, at most one per core, or
    ``stats(workers=N)``'s N), when the work spreads evenly: at least two of them, each at most
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
    with fused.using_threads(1):  # a tensor is not split again across the kernels' pool
        return reduce(*args)
