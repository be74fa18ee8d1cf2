"""Statistics with large tensors reduced whole, one per kernel thread (``parallel.WholeTensors``):
the same numbers as the tensors split across the threads and as float64, for tensors in a
file and in memory; which tensors go whole; and no read outlives the call."""

from __future__ import annotations

import os
import threading
import time

import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect.analyze.parallel import WholeTensors
from nbinspect.analyze.reduce import SAMPLE
from tests.analyze.test_stats import check_row


@pytest.fixture
def two_threads(monkeypatch):
    """The kernels loaded for any size, two threads to spread tensors over (as on this
    2-core machine, whatever the machine the tests run on)."""
    fused = pytest.importorskip("nbinspect.analyze.fused")
    if fused.kernels(fused.FUSED_ABOVE) is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    submitted: list = []
    submit = WholeTensors.submit

    def recorded(self, *args):
        submit(self, *args)
        submitted.append(self._queued[-1][2])

    monkeypatch.setattr(WholeTensors, "submit", recorded)
    return submitted


def _file_of(tmp_path, tensors: dict[str, torch.Tensor]):
    from safetensors.torch import save_file

    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    return path


def _large(seed: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = (0.5 + torch.randn(n, generator=g, dtype=torch.float64) * 0.02 * (seed + 1)).to(dtype)
    t[:: 31 + seed] = 0
    return t


def test_large_tensors_of_a_file_reduced_whole_on_the_threads_match_float64_and_the_split_path(
    tmp_path, monkeypatch, two_threads
):
    dtypes = (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.float32, torch.bfloat16) * 2
    tensors = {f"layers.{i}.weight": _large(i, 3 * SAMPLE + i, d) for i, d in enumerate(dtypes)}
    tensors["layers.2.weight"][SAMPLE + 5] = float("nan")  # the careful kernel, on a thread of its own
    tensors["layers.4.weight"][7] = float("-inf")
    tensors["norm.weight"] = torch.ones(100)  # small: reduced here, in a batch
    path = _file_of(tmp_path, tensors)
    whole = nbinspect.stats(str(path)).set_index("name")
    large = [t.numel() * t.element_size() for t in tensors.values() if t.numel() > SAMPLE]
    # every large tensor up to a quarter of a thread's share goes whole to a thread: all but the float64 ones
    assert len(two_threads) == sum(n <= sum(large) // 8 for n in large) == 10
    for name, t in tensors.items():
        check_row(whole.loc[name], t.double().numpy(), rel=1e-7)

    monkeypatch.setattr(WholeTensors, "takes", lambda self, nbytes: False)
    split = nbinspect.stats(str(path)).set_index("name")
    assert len(two_threads) == 10
    exact = ["numel", "nan", "inf", "zeros", "min", "max", "hist_sample"]
    pd.testing.assert_frame_equal(whole[exact], split[exact])
    for name in tensors:
        assert whole.loc[name, "hist_counts"].tolist() == split.loc[name, "hist_counts"].tolist()
        for column in ("mean", "std", "abs_mean", "l2"):
            assert whole.loc[name, column] == pytest.approx(split.loc[name, column], rel=1e-12, nan_ok=True)


def test_a_tensor_larger_than_a_quarter_of_a_threads_share_is_split_across_the_threads(tmp_path, two_threads):

    tensors = {"embed": _large(0, 16 * SAMPLE, torch.float32)}
    tensors |= {f"layers.{i}": _large(i + 1, 2 * SAMPLE, torch.float32) for i in range(4)}
    frame = nbinspect.stats(str(_file_of(tmp_path, tensors)))
    # 24 SAMPLE of float32 over 2 threads: whole up to 3 SAMPLE; the embedding is split
    assert len(two_threads) == 4
    assert frame.set_index("name").loc["embed", "numel"] == 16 * SAMPLE


def test_one_large_tensor_is_split_and_one_thread_takes_no_tensor_whole(tmp_path, monkeypatch, two_threads):

    path = _file_of(tmp_path, {"w": _large(0, 4 * SAMPLE, torch.float32)})
    nbinspect.stats(str(path))
    assert two_threads == []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    nbinspect.stats(str(_file_of(tmp_path, {f"w{i}": _large(i, 2 * SAMPLE, torch.float32) for i in range(4)})))
    assert two_threads == []


@pytest.mark.parametrize("at", [0, 3])
def test_a_file_truncated_while_the_threads_read_it_is_one_line_and_no_read_outlives_the_call(
    tmp_path, monkeypatch, two_threads, at
):
    """The file shrinks when the kernel is given the `at`-th tensor's place, while the other
    thread is in a long read: the call raises the one-line error naming the file, and
    returns only once no thread still reads it (its descriptor could otherwise be closed and
    reused under a running read)."""
    from nbinspect.io.safetensors_file import FileTensor

    path = _file_of(tmp_path, {f"layers.{i}": _large(i, 4 * SAMPLE, torch.float32) for i in range(10)})
    span, calls = FileTensor.span, []

    reading = threading.Event()

    def shrinking(self, nbytes):
        calls.append(self.offset)
        if len(calls) == at + 1:
            assert reading.wait(10)
            os.truncate(path, path.stat().st_size // 3)
        elif len(calls) == at + 2:  # a long read on the other thread, still going when the error is raised
            reading.set()
            time.sleep(1.0)
        return span(self, nbytes)

    monkeypatch.setattr(FileTensor, "span", shrinking)
    with pytest.raises(nbinspect.CheckpointError, match="changed while it was read") as caught:
        nbinspect.stats(str(path))
    assert "model.safetensors" in str(caught.value) and "\n" not in str(caught.value)
    assert len(two_threads) == 10
    assert all(future.done() for future in two_threads)


def test_large_tensors_in_memory_reduced_whole_on_the_threads_match_float64_and_the_split_path(
    monkeypatch, two_threads
):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(300, 300), nn.LayerNorm(300), *(nn.Linear(300, 300) for _ in range(11)))
    with torch.no_grad():
        model[2].weight[5, 7] = float("nan")
        model[3].weight.mul_(40).add_(3)
    model.half_copy = nn.Parameter(model[0].weight.detach().bfloat16(), requires_grad=False)
    frame = nbinspect.stats(model).set_index("name")
    large = [p for p in model.parameters() if p.numel() > SAMPLE]
    sizes = [p.numel() * p.element_size() for p in large]
    assert len(two_threads) == sum(n <= sum(sizes) // 8 for n in sizes) == 13
    for name, p in model.named_parameters():
        check_row(frame.loc[name], p.detach().double().numpy().reshape(-1), rel=1e-7)
    assert all(p.grad is None and p.grad_fn is None for p in model.parameters())

    monkeypatch.setattr(WholeTensors, "takes", lambda self, nbytes: False)
    split = nbinspect.stats(model).set_index("name")
    assert len(two_threads) == 13
    exact = ["numel", "nan", "inf", "zeros", "min", "max", "hist_sample"]
    pd.testing.assert_frame_equal(frame[exact], split[exact])
    for name in frame.index:
        assert frame.loc[name, "hist_counts"].tolist() == split.loc[name, "hist_counts"].tolist()
        for column in ("mean", "std", "abs_mean", "l2"):
            assert frame.loc[name, column] == pytest.approx(split.loc[name, column], rel=1e-12, nan_ok=True)


def test_as_many_threads_as_torch_may_use_not_one_per_core(tmp_path, monkeypatch, two_threads):
    from nbinspect.analyze import stats

    monkeypatch.setattr(os, "cpu_count", lambda: 8)  # torch keeps 2 (the fixture): 2 threads, not 8
    names, streamed = set(), stats._streamed

    def where(*args):
        names.add(threading.current_thread().name)
        time.sleep(0.02)  # long enough for every idle thread to take a tensor
        return streamed(*args)

    monkeypatch.setattr(stats, "_streamed", where)
    nbinspect.stats(str(_file_of(tmp_path, {f"w{i}": _large(i, 2 * SAMPLE, torch.float32) for i in range(12)})))
    assert len(two_threads) == 12
    assert len(names) == 2 and all(name.startswith("nbinspect-tensors") for name in names)


def test_workers_is_the_number_of_threads_and_one_worker_reads_on_the_calling_thread(
    tmp_path, monkeypatch, two_threads
):
    from nbinspect.analyze import fused, stats

    names, streamed = [], stats._streamed

    def where(*args):
        names.append(threading.current_thread().name)
        time.sleep(0.02)  # long enough for every idle thread to take a tensor
        return streamed(*args)

    monkeypatch.setattr(stats, "_streamed", where)
    path = _file_of(tmp_path, {f"w{i}": _large(i, 2 * SAMPLE, torch.float32) for i in range(12)})
    default = nbinspect.stats(str(path)).drop(columns=["hist_counts", "hist_edges"])
    assert len(set(names)) == 2  # torch's 2 threads (the fixture)
    names.clear()
    three = nbinspect.stats(str(path), workers=3).drop(columns=["hist_counts", "hist_edges"])
    assert len(set(names)) == 3 and all(name.startswith("nbinspect-tensors") for name in names)
    pd.testing.assert_frame_equal(three, default)

    # one worker: every tensor on the calling thread, a large one not split across the kernels' pool
    names.clear()
    queued = len(two_threads)
    monkeypatch.setattr(fused, "_the_pool", lambda: pytest.fail("workers=1 split a tensor across threads"))
    tensors = {f"w{i}": _large(i, 2 * SAMPLE, torch.float32) for i in range(3)} | {
        "big": _large(9, 64 * SAMPLE, torch.float32)
    }
    one = nbinspect.stats(str(_file_of(tmp_path, tensors)), workers=1).set_index("name")
    assert len(two_threads) == queued and set(names) == {threading.current_thread().name}
    for name, t in tensors.items():
        check_row(one.loc[name], t.double().numpy(), rel=1e-7)
    assert fused.threads() == 2  # the caller's thread count comes back after the call
