"""Statistics of tensors the kernel reads from their file itself (``fused.stream_sums`` and
``kernels.stream_moments``: ``pread`` a piece at a time inside the kernel) against plain
float64 numpy: every dtype it reads, sizes around the piece and thread boundaries, odd
byte offsets in the file, NaN/±Inf/zeros planted at the edges of pieces, neighbours that
must not be read; and files that shrink or change under the reader (a one-line error
naming the file, never a wrong number or a crash)."""

from __future__ import annotations

import json
import math
import os
import platform
import struct
import sys

import numpy as np
import pytest
import torch

import nbinspect
from nbinspect.analyze.reduce import SAMPLE
from nbinspect.io import mapping
from nbinspect.io.files import FileHandle
from nbinspect.io.safetensors_file import FileTensor
from tests.analyze.test_stats import check_row

fused = pytest.importorskip("nbinspect.analyze.fused")
KERNELS = fused.kernels(fused.FUSED_ABOVE)
if KERNELS is None:
    pytest.skip("numba is not installed", allow_module_level=True)

PIECE = 4096  # bytes per piece in these tests: pieces of 1024 float32, 2048 bf16/fp16, 512 float64
DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)


@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(fused, "STREAM_BYTES", PIECE)
    monkeypatch.setattr(fused, "WINDOW_BYTES", WINDOW)
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)


WINDOW = 6000  # bytes mapped at a time in these tests: windows start inside pages and pieces


@pytest.fixture
def windows(monkeypatch) -> list[int]:
    """Counts the mappings the statistics open (one per thread's share): [count]."""
    opened = [0]
    window = FileTensor.window

    def counting(self):
        opened[0] += 1
        return window(self)

    monkeypatch.setattr(FileTensor, "window", counting)
    return opened


MAPPABLE = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")


def _values(n: int, dtype: torch.dtype, planted: bool, seed: int) -> torch.Tensor:
    """Values around 1.0 (a LayerNorm-like offset: the shift matters), zeros, and with
    `planted` NaN at the first element of the second piece, +Inf at the last, -Inf at the
    last of the first piece, the minimum in a clean piece and the maximum beside the NaN."""
    g = torch.Generator().manual_seed(seed)
    t = (1.0 + torch.randn(n, generator=g, dtype=torch.float64) * 0.05).to(dtype)
    t[::97] = 0
    if n > 5:
        t[3] = -0.0
    piece = PIECE // t.element_size()
    if n > 2 * piece:
        t[piece + piece // 2] = -7.5  # a piece without NaN/Inf: read by the fast kernel
    if planted and n:
        t[min(piece, n - 1)] = math.nan
        t[n - 1] = math.inf
        if n > 2:
            t[min(piece - 1, n - 2)] = -math.inf
        if n > piece + 1:
            t[piece + 1] = 9.25  # beside the NaN: read by the careful kernel
    return t


def _file_tensor(tmp_path, t: torch.Tensor, pad: int) -> FileTensor:
    """`t`'s bytes at an odd offset `pad` + one element in a file, between neighbours of NaN
    (bits all ones): a read outside the tensor would show in every number."""
    raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
    fence = b"\xff" * t.element_size()
    path = tmp_path / f"values-{t.dtype}-{t.numel()}-{pad}.bin"
    path.write_bytes(b"\x00" * pad + fence + raw + fence * 3)
    return FileTensor(FileHandle.open(path), pad + len(fence), len(raw), tuple(t.shape), t.dtype)


def _check(sums, sample: np.ndarray, t: torch.Tensor, stride: int) -> None:
    """Counts, min, max and the sample exact; the moments as close as the kernel's float32
    block sums allow (each lane adds up to 64 rounded squares: a few 1e-7 of M2)."""
    x = t.double().numpy()
    finite = x[np.isfinite(x)]
    assert sums.n == x.size
    assert sums.count == finite.size
    assert sums.nan == int(np.isnan(x).sum())
    assert sums.zeros == int((finite == 0).sum())
    np.testing.assert_array_equal(sample, x[::stride])  # NaN where NaN was sampled
    if not finite.size:
        return
    assert (sums.lo, sums.hi) == (finite.min(), finite.max())
    mean, m2 = sums.mean_m2()
    scale = np.abs(finite).mean()
    assert abs(mean - finite.mean()) <= 1e-8 * max(scale, 1e-300)
    assert m2 == pytest.approx(((finite - finite.mean()) ** 2).sum(), rel=1e-6, abs=1e-12 * finite.size * scale**2)
    assert sums.abs_sum == pytest.approx(np.abs(finite).sum(), rel=1e-7)


def _same_as_in_memory(sums, t: torch.Tensor, shift: float, stride: int) -> None:
    """What the kernel gives for the same values in memory (the path that loads them whole):
    counts, min and max equal, sums equal up to the order the pieces were added in (or,
    with NaN/Inf, to float32 block sums: the whole array in memory is summed in float64 then,
    only the pieces that hold them when streamed)."""
    sample = np.zeros(-(-t.numel() // stride))
    whole = fused.moment_sums(KERNELS, t, shift, lambda dtype: torch.empty(0, dtype=dtype), sample, stride)
    assert (sums.n, sums.count, sums.nan, sums.zeros) == (whole.n, whole.count, whole.nan, whole.zeros)
    assert (sums.shift, sums.lo, sums.hi) == (whole.shift, whole.lo, whole.hi)
    for a, b in ((sums.s, whole.s), (sums.sq, whole.sq), (sums.abs_sum, whole.abs_sum)):
        rel = 1e-12 if sums.count == sums.n else 1e-7
        assert a == pytest.approx(b, rel=rel, abs=rel * sums.abs_sum)


def _shift(t: torch.Tensor) -> float:
    """Near the mean, as ``reduce.streamed_moments`` takes it: from a few spread elements."""
    x = t.double().numpy()[:: max(1, t.numel() // 256)]
    x = x[np.isfinite(x)]
    return float(x.mean()) if x.size else 0.0


@pytest.mark.parametrize("read", ["pread", "mapped"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("planted", [False, True], ids=["clean", "nan-inf"])
@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
def test_streamed_sums_match_float64_around_piece_boundaries(
    tmp_path, monkeypatch, small_pieces, windows, dtype, planted, threads, read
):
    """pread: the tensors at odd bytes (a mapping is read only where elements are aligned);
    mapped: at aligned bytes that are not page boundaries, windows cut inside pages."""
    if read == "mapped" and not MAPPABLE:
        pytest.skip("mappings are guarded on Linux (x86-64, arm64) only")
    monkeypatch.setattr(fused, "MAPPED", read == "mapped")
    piece = PIECE // dtype.itemsize
    monkeypatch.setattr(fused, "PART", piece // 2)  # tensors of a piece and up split across threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    for i, n in enumerate((0, 1, 2, piece - 1, piece, piece + 1, 2 * piece - 1, 2 * piece + 1, 5 * piece + 3)):
        t = _values(n, dtype, planted, seed=i)
        values = _file_tensor(tmp_path, t, pad=(2 * i + 1) * (dtype.itemsize if read == "mapped" else 1))
        for stride in (1, 7):
            sample = np.full(-(-n // stride), -1.0)
            sums = fused.stream_sums(KERNELS, values, n, dtype, _shift(t), sample, stride)
            _check(sums, sample, t, stride)
            if n:
                _same_as_in_memory(sums, t, _shift(t), stride)
    assert (windows[0] > 0) == (read == "mapped")


def _safetensors_with_odd_offset(path, tensors: dict[str, torch.Tensor]) -> None:
    """A safetensors file whose header length is odd, so every tensor starts at an odd byte
    of the file (the format aligns offsets within the data only)."""
    header, data, at = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.uint8).numpy().tobytes()
        dtype = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64"}[t.dtype]
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        data.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    if len(text) % 2 == 0:
        text += b" "
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(data))


@pytest.mark.parametrize("threads", [1, 2])
def test_stats_of_a_file_with_tensors_at_odd_offsets_match_float64(tmp_path, monkeypatch, small_pieces, threads):
    monkeypatch.setattr(fused, "PART", 1 << 12)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    tensors = {}
    for i, dtype in enumerate(DTYPES):
        piece = PIECE // dtype.itemsize
        n = SAMPLE + piece + 1  # streamed (over SAMPLE elements), ending one past a piece
        tensors[f"t{i}"] = _values(n, dtype, planted=True, seed=10 + i)
        tensors[f"u{i}"] = _values(SAMPLE * 2 - 1, dtype, planted=False, seed=20 + i).view(-1, 1)
    path = tmp_path / "model.safetensors"
    _safetensors_with_odd_offset(path, tensors)
    frame = nbinspect.stats(str(path)).set_index("name")
    for name, t in tensors.items():
        check_row(frame.loc[name], t.double().numpy().reshape(-1), rel=1e-8)


@pytest.mark.skipif(not MAPPABLE, reason="mappings are guarded on Linux (x86-64, arm64) only")
@pytest.mark.parametrize("threads", [1, 2])
def test_stats_of_a_safetensors_file_read_through_mappings_match_float64(tmp_path, monkeypatch, windows, threads):
    """The safetensors library's own file (aligned tensors), mapped WINDOW bytes at a time."""
    from safetensors.torch import save_file

    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    monkeypatch.setattr(fused, "MAPPED", True)
    monkeypatch.setattr(fused, "WINDOW_BYTES", 3 * 4096 + WINDOW)
    monkeypatch.setattr(fused, "PART", 1 << 12)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    tensors = {}
    for i, dtype in enumerate(DTYPES):
        tensors[f"t{i}"] = _values(SAMPLE + 3 * PIECE + 1, dtype, planted=True, seed=30 + i)
        tensors[f"u{i}"] = _values(4 * SAMPLE - 1, dtype, planted=False, seed=40 + i).view(-1, 3)[:, :2].contiguous()
    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    frame = nbinspect.stats(str(path)).set_index("name")
    for name, t in tensors.items():
        check_row(frame.loc[name], t.double().numpy().reshape(-1), rel=1e-8)
    assert windows[0] >= len(tensors)


@pytest.mark.skipif(not MAPPABLE, reason="mappings are guarded on Linux (x86-64, arm64) only")
@pytest.mark.parametrize("refused", [1, 3], ids=["first-window", "third-window"])
def test_where_the_system_refuses_a_mapping_the_rest_is_read_with_pread(tmp_path, monkeypatch, small_pieces, refused):
    """A file system without mappings, or the process's map count reached: pread from there on."""
    calls = [0]
    map_window = mapping.Window.map

    def refusing(self, offset, nbytes):
        calls[0] += 1
        return None if calls[0] >= refused else map_window(self, offset, nbytes)

    monkeypatch.setattr(mapping.Window, "map", refusing)
    monkeypatch.setattr(fused, "MAPPED", True)
    dtype = torch.float32
    n = 7 * (WINDOW // 4) + 5
    t = _values(n, dtype, planted=True, seed=5)
    values = _file_tensor(tmp_path, t, pad=4 * 3)
    sample = np.zeros(-(-n // 3))
    sums = fused.stream_sums(KERNELS, values, n, dtype, _shift(t), sample, 3)
    _check(sums, sample, t, 3)
    assert calls[0] == refused


def _shrinking(monkeypatch, path, size: int, before_check: bool) -> None:
    """Truncate `path` to `size` bytes when the kernel is given the tensor's place: before
    the file's identity is checked, or after (then the kernel's own reads come up short)."""
    span = FileTensor.span

    def truncating(self, nbytes):
        if not before_check:
            place = span(self, nbytes)
        os.truncate(path, size)
        return span(self, nbytes) if before_check else place

    monkeypatch.setattr(FileTensor, "span", truncating)


def _reading(monkeypatch, read: str) -> None:
    if read == "mapped" and not MAPPABLE:
        pytest.skip("mappings are guarded on Linux (x86-64, arm64) only")
    monkeypatch.setattr(fused, "MAPPED", read == "mapped")


READS = ["pread", "mapped"]


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("when", ["before-check", "mid-read"])
def test_a_file_truncated_after_its_header_was_read_is_a_one_line_error(tmp_path, monkeypatch, threads, when, read):
    """Mapped and truncated mid-read: the handler covers the bus error (this process lives)."""
    _reading(monkeypatch, read)
    faults = mapping.faults()
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    path = tmp_path / "shrinks.safetensors"
    from safetensors.torch import save_file

    save_file({"w": torch.randn(8 * SAMPLE)}, path)
    _shrinking(monkeypatch, path, path.stat().st_size // 2, before_check=when == "before-check")
    with pytest.raises(nbinspect.CheckpointError, match="changed while it was read") as caught:
        nbinspect.stats(str(path))
    message = str(caught.value)
    assert "shrinks.safetensors" in message and "\n" not in message
    assert mapping.faults() > faults if read == "mapped" and when == "mid-read" else mapping.faults() == faults


@pytest.mark.parametrize("read", READS)
def test_a_file_rewritten_in_place_while_it_is_read_is_an_error_not_a_number(tmp_path, monkeypatch, read):
    """Same size, other bytes, read by the kernel in full: the identity check after it."""
    _reading(monkeypatch, read)
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    path = tmp_path / "rewritten.safetensors"
    from safetensors.torch import save_file

    save_file({"w": torch.randn(8 * SAMPLE)}, path)
    span = FileTensor.span

    def rewriting(self, nbytes):
        place = span(self, nbytes)
        stat = path.stat()
        with open(path, "r+b") as f:
            f.seek(stat.st_size - 4096)
            f.write(b"\x7f" * 4096)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        return place

    monkeypatch.setattr(FileTensor, "span", rewriting)
    with pytest.raises(nbinspect.CheckpointError, match="rewritten.safetensors: changed while it was read"):
        nbinspect.stats(str(path))


def test_the_kernel_is_not_given_bytes_outside_the_tensor(tmp_path):
    t = torch.randn(100)
    values = _file_tensor(tmp_path, t, pad=1)
    with pytest.raises(nbinspect.CheckpointError, match="outside the tensor"):
        values.span(t.numel() * 4 + 1)


class _Stopping:
    """The kernels, with a stream kernel that stops early as an interrupted ``pread`` does
    (EINTR): after `pieces` pieces of a call, or at once when `pieces` is 0."""

    def __init__(self, pieces: int):
        self.pieces = pieces
        self.calls = 0

    def __getattr__(self, name):
        return getattr(KERNELS, name)

    def stream_moments(self, fd, base, start, end, x, *rest):
        self.calls += 1
        stop = min(end, start + self.pieces * x.size)
        return KERNELS.stream_moments(fd, base, start, stop, x, *rest) if stop > start else start


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
def test_a_read_the_kernel_stops_early_is_resumed_to_the_same_numbers(tmp_path, small_pieces, dtype):
    n = 7 * (PIECE // dtype.itemsize) + 5
    t = _values(n, dtype, planted=True, seed=3)
    values = _file_tensor(tmp_path, t, pad=5)
    whole = np.zeros(-(-n // 3))
    once = fused.stream_sums(KERNELS, values, n, dtype, _shift(t), whole, 3)
    stopping = _Stopping(pieces=2)
    sample = np.zeros_like(whole)
    resumed = fused.stream_sums(stopping, values, n, dtype, _shift(t), sample, 3)
    assert stopping.calls == 4  # 8 pieces, 2 a call
    assert (resumed.n, resumed.count, resumed.nan, resumed.zeros) == (once.n, once.count, once.nan, once.zeros)
    assert (resumed.lo, resumed.hi, resumed.s, resumed.sq, resumed.abs_sum) == (
        once.lo, once.hi, once.s, once.sq, once.abs_sum
    )  # fmt: skip
    np.testing.assert_array_equal(sample, whole)
    _check(resumed, sample, t, 3)


def test_a_read_that_keeps_failing_where_python_reads_is_an_error_not_a_loop(tmp_path, small_pieces):
    t = torch.randn(3 * PIECE)
    values = _file_tensor(tmp_path, t, pad=1)
    with pytest.raises(nbinspect.CheckpointError, match=r"values-torch.float32-12288-1.bin: cannot read byte 0"):
        fused.stream_sums(_Stopping(pieces=0), values, t.numel(), t.dtype, 0.0, np.zeros(t.numel()), 1)
