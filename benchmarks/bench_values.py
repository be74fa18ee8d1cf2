"""The value view's screen reduction (issue 28): a 50,000 x 4,096 fp32 tensor (819 MB) to a
683 x 511 picture, as a ratio to one plain read of the tensor (``t.sum()``) in the same run;
peak extra memory; the kernel side of a zoomed 512 x 512 exact region.

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_values.py [--repeat 7]

Wall time (the reduction runs on two threads, as ``t.sum()`` does), interleaved rounds so
load from other processes falls on both alike; median and best reported. Memory: the peak
resident set above the tensor during the reduction (sampled every 2 ms) and what tracemalloc
sees numpy allocate. Targets (the issue): ratio <= 2, extra memory <= 64 MB, 512 x 512 <= 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import tracemalloc

import torch
from _measure import PeakRSS, interleaved_times

import nbinspect
from nbinspect.analyze import values as V
from nbinspect.backends.torch.values import plane_bands
from nbinspect.core.plane import default_plane

ROWS, COLS, HEIGHT, WIDTH = 50_000, 4_096, 511, 683


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()
    t = torch.randn(ROWS, COLS)
    t[31_337, 2_049] = float("nan")
    model = torch.nn.Linear(COLS, ROWS, bias=False)
    with torch.no_grad():
        model.weight.set_(t)
    insp = nbinspect.inspect(model, stats=False)
    entry = insp.values._sides[None].source().tensors[0]
    grid = V.block_plan((0, ROWS), (0, COLS), HEIGHT, WIDTH)
    plane = default_plane(t.shape)

    def reduce() -> V.ValueGrid:
        return V.reduce_bands(grid, plane_bands(entry, plane, grid.rows, grid.cols, V.band_rows(grid)))

    g = reduce()  # loads numba's kernel (cached on disk) once, as the first picture would
    assert int(g.nan.sum()) == 1
    times = interleaved_times({"sum": lambda: t.sum(), "reduce": reduce}, args.repeat, clock=time.perf_counter)
    ratios = [r / s for r, s in zip(times["reduce"], times["sum"])]
    with PeakRSS() as rss:
        reduce()
    tracemalloc.start()
    reduce()
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    kernel = []
    for k in range(args.repeat):
        header, _ = insp.values.region(
            {"tensor": "weight", "rows": [1_000 + k, 1_512 + k], "cols": [100, 612], "height": 512, "width": 512}
        )
        kernel.append(header["seconds"])
    result = {
        "shape": [ROWS, COLS],
        "grid": list(grid.shape),
        "block": list(grid.block),
        "sum_s": {"median": statistics.median(times["sum"]), "best": min(times["sum"])},
        "reduce_s": {"median": statistics.median(times["reduce"]), "best": min(times["reduce"])},
        "ratio": {"median": statistics.median(ratios), "best": min(ratios)},
        "peak_extra_rss_mb": (rss.peak - rss.base) / 2**20,
        "tracemalloc_peak_mb": traced / 2**20,
        "region_512_s": {"median": statistics.median(kernel), "best": min(kernel)},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "threads": torch.get_num_threads(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
