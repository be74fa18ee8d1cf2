"""Running a function on 2 gloo processes on 127.0.0.1 from a test, with a deadline."""

from __future__ import annotations

import os
import pickle
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, fn: Callable[[int], Any], port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # two processes on a shared 2-core machine
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        result = fn(rank)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(out, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))


def run_on_ranks(fn: Callable[[int], Any], tmp: Path, timeout: float = 240.0) -> list[Any]:
    """fn(rank) on each of 2 spawned processes in one gloo group; their return values."""
    context = mp.spawn(_entry, args=(fn, free_port(), str(tmp)), nprocs=WORLD, join=False)
    deadline = time.monotonic() + timeout
    while not context.join(timeout=2):
        if time.monotonic() > deadline:
            for p in context.processes:
                p.kill()
            raise TimeoutError(f"distributed run did not finish in {timeout:.0f} s")
    return [pickle.loads(Path(tmp, f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
