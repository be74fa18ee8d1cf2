"""Weight statistics of a sharded checkpoint spread over local worker processes.

Each worker opens whole shard files itself (largest first, one file at a time), reduces
their tensors with the ordinary streaming code (one tensor resident at a time, its pages
released after) and sends back only the Moments. So each process holds about one tensor
plus scratch, whatever the checkpoint's size. Tensors that are not in a safetensors file
(a torch.save shard, a state_dict in memory) are reduced in this process.

Workers are spawned (not forked: torch's thread pools do not survive a fork) and each
uses ``cpu_count // workers`` torch threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ..backends import ModelSource, TensorEntry
from ..core.moments import Moments

__all__ = ["parallel_tensor_stats"]

_Results = dict[Any, tuple[Moments | None, str | None]]


def _start_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _file_stats(path: str, bins: int) -> _Results:
    from ..core.tree import build_source
    from ..io.files import FileHandle
    from ..io.safetensors_file import read_safetensors
    from .stats import tensor_stats

    stored, _ = read_safetensors(FileHandle.open(Path(path)))
    return tensor_stats(build_source(path, stored), bins, progress=False)


def parallel_tensor_stats(source: ModelSource, bins: int, workers: int) -> _Results:
    """Moments per storage key of `source`, as :func:`~nbinspect.analyze.stats.tensor_stats`
    gives them, with safetensors shards reduced by `workers` processes."""
    from .stats import tensor_stats

    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"stats(workers={workers!r}): need a positive number of worker processes")
    by_file: dict[str, int] = {}
    rest: list[TensorEntry] = []
    for key, t in source.unique_tensors().items():
        if isinstance(key, tuple) and len(key) == 3 and key[0] == "file" and str(key[1]).endswith(".safetensors"):
            by_file[key[1]] = by_file.get(key[1], 0) + t.nbytes
        else:
            rest.append(t)
    results: _Results = {}
    if by_file:
        threads = max(1, (os.cpu_count() or 1) // workers)
        files = sorted(by_file, key=lambda f: -by_file[f])  # largest first: the pool ends together
        with ProcessPoolExecutor(
            workers, mp_context=get_context("spawn"), initializer=_start_worker, initargs=(threads,)
        ) as pool:
            for part in pool.map(_file_stats, files, [bins] * len(files)):
                results.update(part)
    if rest:
        results.update(tensor_stats(_subset(source, rest), bins, progress=False))
    return {t.storage_key: results[t.storage_key] for t in source.tensors if t.storage_key in results}


def _subset(source: ModelSource, tensors: list[TensorEntry]) -> ModelSource:
    import dataclasses

    return dataclasses.replace(source, tensors=tuple(tensors))
