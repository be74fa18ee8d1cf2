"""One training-dynamics measurement on a ~124M-parameter model (GPT-2 small shapes, fp32 unless asked).

    flock /tmp/nbinspect-bench.lock .venv/bin/python benchmarks/bench_track.py [--repeat 5] [--threads N]
        [--dtype bfloat16] [--snapshot-dtype float16]

What is timed, all in this process, best of `repeat` (the machine is shared: the best run
is the least disturbed one):

- the floor: one streaming pass that reads the snapshot and the weights once (a float32
  ``dot`` of each pair of chunks, the chunks nbinspect.track uses; a ``sum`` of each chunk
  when either is not float32);
- ``ParameterChangeMetrics``: the delta (W_new − W_old streamed, every statistic) and the
  metric dict made from it; the issue asks for at most 1.5× the floor;
- taking the next snapshot (a copy of the weights, with its norms);
- one ``torch.optim.AdamW`` step on the same model (gradients set to random values).

Memory held: the snapshot (float32 and float16) and the scratch buffers of the delta;
and the peak resident memory the measurement added above what was resident before it
(the kernel's high-water mark, reset through /proc/self/clear_refs).
"""

from __future__ import annotations

import argparse

import torch
from _measure import FLOAT_DTYPES, best_of, reset_peak, status
from torch import nn

from nbinspect.track import AnalysisContext, ParameterChangeMetrics, ParameterDelta, ParameterSnapshot
from nbinspect.track.snapshot import CHUNK

THRESHOLDS = (1e-8, 1e-6, 1e-4)


class GPT2Small(nn.Module):
    """The parameter shapes of GPT-2 small (124,439,808 parameters, head tied to the embedding)."""

    def __init__(self) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(50257, 768), nn.Embedding(1024, 768)
        self.h = nn.ModuleList(
            nn.ModuleDict(
                {
                    "ln_1": nn.LayerNorm(768),
                    "c_attn": nn.Linear(768, 2304),
                    "c_proj": nn.Linear(768, 768),
                    "ln_2": nn.LayerNorm(768),
                    "c_fc": nn.Linear(768, 3072),
                    "mlp_proj": nn.Linear(3072, 768),
                }
            )
            for _ in range(12)
        )
        self.ln_f = nn.LayerNorm(768)


def floor(snapshot: ParameterSnapshot, model: nn.Module) -> float:
    total = 0.0
    with torch.no_grad():
        for name, p in model.named_parameters():
            a, b = snapshot.tensors[name], p.detach().view(-1)
            for start in range(0, a.numel(), CHUNK):
                x, y = a[start : start + CHUNK], b[start : start + CHUNK]
                total += float(torch.dot(x, y)) if x.dtype == y.dtype == torch.float32 else float(x.sum() + y.sum())
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--dtype", default="float32", choices=FLOAT_DTYPES, help="the model's dtype (default float32)")
    parser.add_argument(
        "--snapshot-dtype", default="float32", choices=FLOAT_DTYPES, help="the snapshot's (default float32)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT2Small().to(getattr(torch, args.dtype))
    n = sum(p.numel() for p in model.parameters())
    snapshot = ParameterSnapshot.take(model, dtype=getattr(torch, args.snapshot_dtype))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    optimizer.step()  # the model has moved once; AdamW's state exists
    metric = ParameterChangeMetrics(THRESHOLDS)
    context = AnalysisContext(model, 1)

    def measure() -> dict:
        delta = ParameterDelta.between(snapshot, model, 1, THRESHOLDS)
        return metric.compute(delta, snapshot, context)

    t_floor = best_of(lambda: floor(snapshot, model), args.repeat)
    t_measure = best_of(measure, args.repeat)
    t_snapshot = best_of(lambda: ParameterSnapshot.take(model), max(2, args.repeat // 2))
    t_adamw = best_of(optimizer.step, max(2, args.repeat // 2))

    before = status("VmRSS")
    if reset_peak():  # the high-water mark restarts from what is resident now
        measure()
        added = f"{(status('VmHWM') - before) / 2**20:.1f} MiB"
    else:
        added = "unavailable (no /proc/self/clear_refs)"
    delta = ParameterDelta.between(snapshot, model, 1, THRESHOLDS)
    half = ParameterSnapshot.take(model, dtype=torch.float16)
    read = sum(snapshot.tensors[name].nbytes + p.nbytes for name, p in model.named_parameters()) / 1e9
    print(f"model: {n:,} parameters (GPT-2 small shapes, {args.dtype}; snapshot {args.snapshot_dtype}), ", end="")
    print(f"torch threads {torch.get_num_threads()}")
    print("machine shared with other work: best of", args.repeat, "runs")
    print(f"floor (read snapshot + weights once): {t_floor * 1e3:7.1f} ms  ({read / t_floor:.1f} GB/s)")
    print(f"ParameterChangeMetrics measurement:   {t_measure * 1e3:7.1f} ms  = {t_measure / t_floor:.2f}x the floor")
    print(f"next snapshot (copy + norms):         {t_snapshot * 1e3:7.1f} ms  = {t_snapshot / t_floor:.2f}x the floor")
    print(f"one AdamW step:                       {t_adamw * 1e3:7.1f} ms  (measurement = {t_measure / t_adamw:.2f}x)")
    print(
        f"snapshot held: {snapshot.nbytes / 2**20:.1f} MiB {args.snapshot_dtype}, {half.nbytes / 2**20:.1f} MiB float16"
    )
    print(f"scratch buffers of the delta: {delta.scratch_bytes / 2**20:.2f} MiB (bound: 64 MiB)")
    print(f"peak resident memory added by one measurement: {added}")


if __name__ == "__main__":
    main()
