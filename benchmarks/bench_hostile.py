"""Worst case time and memory of reading a file of at most ~10 MB, per format (issue 25).

    PYTHONPATH=. python benchmarks/bench_hostile.py [--out DIR]

For each format, files built to cost the most within the limits of ``core/limits.py`` (the
most opcodes a 10 MB pickle holds, the most tensors and deepest names a 10 MB safetensors
header holds, the most members of a 10 MB npz, a 10 MB shard index and DCP metadata, the
corpus' bombs) are read in a fresh process (``load_checkpoint`` then statistics), and the
wall time and peak resident memory are reported next to a baseline measured in the same run:
a small valid safetensors read the same way (the imports dominate it). The machine's load
average is printed with the results, since the machine is shared.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

CHILD = r"""
import sys, time
import nbinspect
start = time.perf_counter()
try:
    source = nbinspect.load_checkpoint(sys.argv[1])
    nbinspect.stats(source)
    outcome = f"read {len(source.tensors)} tensors"
except nbinspect.CheckpointError as exc:
    outcome = "refused: " + str(exc).split(": ", 1)[-1][:70]
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(time.perf_counter() - start, hwm, outcome, sep="\t")  # VmHWM: peak RSS of this process image
"""


def _torch_zip(path: Path, data_pkl: bytes) -> None:
    buf = io.BytesIO()
    torch.save({"w": torch.ones(4)}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(path, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, data_pkl if info.filename.endswith("data.pkl") else src.read(info))


def build(folder: Path) -> dict[str, Path]:
    files: dict[str, Path] = {}
    save_file({"w": torch.ones(4)}, folder / "baseline.safetensors")
    files["baseline (small safetensors)"] = folder / "baseline.safetensors"

    state = {f"layers.{i}.weight": torch.randn(256, 256) for i in range(38)}  # ~10 MB
    torch.save(state, folder / "legit.pt")
    files["torch: legitimate 10 MB state_dict"] = folder / "legit.pt"
    save_file(state, folder / "legit.safetensors")
    files["safetensors: legitimate 10 MB"] = folder / "legit.safetensors"
    np.savez(folder / "legit.npz", **{k: v.numpy() for k, v in state.items()})
    files["npz: legitimate 10 MB"] = folder / "legit.npz"

    # torch: 10 MB of pickle opcodes (a list of ~2.5M small ints, the most work per byte)
    n = 2_500_000
    program = b"\x80\x02}X\x04\x00\x00\x00metaq\x00](" + b"K\x01" * n + b"es."
    _torch_zip(folder / "opcodes.pt", program)
    files["torch: 10 MB data.pkl of opcodes"] = folder / "opcodes.pt"
    # torch: 90,000 tensors in one file (the pickle and the records)
    many = {f"m{i}.w": torch.ones(1) for i in range(90_000)}
    torch.save(many, folder / "many.pt")
    files["torch: 90,000 one-element tensors"] = folder / "many.pt"

    # safetensors: a ~10 MB header of 100,000 empty tensors with deep distinct names
    header = {f"a{i}." + ".".join(f"b{j}" for j in range(8)) + ".w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(100_000)}  # fmt: skip  # noqa: E501
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    (folder / "wide.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    files["safetensors: 10 MB header, 100k tensors, 900k modules"] = folder / "wide.safetensors"
    header = {".".join(f"n{i}_{j}" for j in range(63)): {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(20_000)}  # fmt: skip  # noqa: E501
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    (folder / "deep.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    files["safetensors: 20k names 63 levels deep"] = folder / "deep.safetensors"

    # npz: the most members 10 MB holds
    with zipfile.ZipFile(folder / "members.npz", "w") as zf:
        buf = io.BytesIO()
        np.save(buf, np.ones(1, np.float32))
        for i in range(40_000):
            zf.writestr(f"a{i}.npy", buf.getvalue())
    files["npz: 40,000 members"] = folder / "members.npz"
    # npz: a bzip2 member as large as the ratio cap allows
    with zipfile.ZipFile(folder / "bz.npz", "w") as zf:
        buf = io.BytesIO()
        np.save(buf, np.zeros(2**26, np.float32))
        zf.writestr("w.npy", buf.getvalue(), zipfile.ZIP_BZIP2)
    files["npz: bzip2 member claiming 256 MiB (bomb)"] = folder / "bz.npz"

    # shard index: ~10 MB weight map
    shard = folder / "idx"
    shard.mkdir()
    save_file({"t0": torch.ones(1)}, shard / "a.safetensors")
    (shard / "m.safetensors.index.json").write_text(
        json.dumps({"weight_map": {f"t{i}" if i else "t0": "a.safetensors" for i in range(240_000)}})
    )
    files["index: 10 MB weight_map (240k names)"] = shard / "m.safetensors.index.json"

    # DCP: metadata of 20,000 tensors
    import torch.distributed.checkpoint as dcp

    dcp.save({f"t{i}": torch.ones(1) for i in range(20_000)}, checkpoint_id=str(folder / "dcp"), no_dist=True)
    files[f"dcp: {(folder / 'dcp' / '.metadata').stat().st_size / 2**20:.1f} MB .metadata, 20k tensors"] = (
        folder / "dcp"
    )
    # a pickle bomb for DCP: shared lists 2**60 paths
    level: list = [1]
    for _ in range(60):
        level = [level, level]
    (folder / "dcp2").mkdir()
    (folder / "dcp2" / ".metadata").write_bytes(pickle.dumps(level))
    files["dcp: .metadata of 2**60 shared paths"] = folder / "dcp2"
    return files


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.out) as tmp:
        files = build(Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        rows = []
        for label, path in files.items():
            size = sum(p.stat().st_size for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, env=env)
            wall = time.perf_counter() - start
            if out.returncode:
                rows.append((label, size, wall, float("nan"), 0, f"CRASH rc={out.returncode} {out.stderr[-200:]}"))
                continue
            seconds, rss_kb, outcome = out.stdout.strip().splitlines()[-1].split("\t")
            rows.append((label, size, wall, float(seconds), int(rss_kb) / 1024, outcome))
    base = rows[0]
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; baseline process {base[4]:.0f} MiB peak")
    print(f"{'file':56s} {'size':>9s} {'read s':>7s} {'RSS MiB':>8s} {'vs base':>8s}  outcome")
    for label, size, _wall, seconds, rss, outcome in rows:
        print(f"{label:56s} {size / 2**20:8.1f}M {seconds:7.2f} {rss:8.0f} {rss - base[4]:+8.0f}  {outcome}")


if __name__ == "__main__":
    main()
