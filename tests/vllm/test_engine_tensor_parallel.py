"""Tensor parallelism over 2 CPU workers: every rank holds a shard, and the frames are the
whole model's: global shapes and counts, and statistics merged from each rank's share
(key/value heads replicated over ranks count once), checked against a float64 reference
computed from the checkpoint the engine loaded.

Opt-in (NBINSPECT_VLLM_TP=1 make test-vllm): two workers take minutes to start on a
2-core machine."""

from __future__ import annotations

import math
import os

import pytest

from tests.vllm.require import require_vllm

require_vllm()

import numpy as np  # noqa: E402  (after the vLLM check: the module is skipped without it)
import torch  # noqa: E402

import nbinspect  # noqa: E402
from tests.vllm.tiny_llama import engine_kwargs, save_tiny_llama  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("NBINSPECT_VLLM_TP") != "1", reason="2 tensor-parallel workers are slow: NBINSPECT_VLLM_TP=1 runs it"
)
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
BINS = 16


def _reference(folder) -> dict[str, torch.Tensor]:
    """The checkpoint in float64 under the served names: q/k/v and gate/up concatenated."""
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        ckpt = {k: f.get_tensor(k).double() for k in f.keys()}  # noqa: SIM118  (safe_open is not a dict)
    out = dict(ckpt)
    for name in ckpt:
        head, part, leaf = (["", *name.rsplit(".", 2)])[-3:]
        for fused, parts in FUSED.items():
            if part == parts[0]:
                out[f"{head}.{fused}.{leaf}"] = torch.cat([ckpt[f"{head}.{p}.{leaf}"] for p in parts])
                for p in parts:
                    out.pop(f"{head}.{p}.{leaf}")
    return out


def _check(row, ref: torch.Tensor, histogram: bool = True) -> None:
    assert row["numel"] == ref.numel()
    assert math.isclose(row["mean"], ref.mean().item(), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(row["std"], ref.std(unbiased=False).item(), rel_tol=1e-9)
    assert math.isclose(row["abs_mean"], ref.abs().mean().item(), rel_tol=1e-9)
    assert math.isclose(row["l2"], ref.norm().item(), rel_tol=1e-9)
    assert (row["min"], row["max"]) == (ref.min().item(), ref.max().item())
    if not histogram:  # a module row merges histograms of different ranges (re-binned)
        return
    lo, hi = ref.min().item(), ref.max().item()
    expected = np.histogram(ref.numpy(), BINS, range=(lo, hi) if lo < hi else (lo - 0.5, hi + 0.5))[0]
    assert list(row["hist_counts"]) == expected.tolist() and row["hist_sample"] == ref.numel()


def test_frames_and_statistics_are_the_whole_models(tmp_path, monkeypatch):
    import vllm.envs
    from vllm import LLM

    folder = save_tiny_llama(tmp_path)
    vllm.envs.disable_envs_cache()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")  # one core per worker on one NUMA node
    llm = LLM(**engine_kwargs(folder), tensor_parallel_size=2, distributed_executor_backend="mp")
    try:
        insp = nbinspect.inspect(llm, bins=BINS)
        ref = _reference(folder)
        assert insp.totals["tensor_parallel_size"] == 2
        assert insp.totals["total_params"] == sum(t.numel() for t in ref.values())
        params = insp.params[insp.params["kind"] == "parameter"].set_index("name")
        assert {n: tuple(s) for n, s in params["shape"].items()} == {n: tuple(t.shape) for n, t in ref.items()}
        assert insp.totals["total_params"] == insp.params.loc[insp.params["kind"] == "parameter", "numel"].sum()
        stats = insp.stats.set_index("name")
        for name, tensor in ref.items():  # split, replicated and partly replicated (qkv: 1 kv head, 2 ranks)
            _check(stats.loc[name], tensor)
        layer = insp.frames["stats_by_module"].set_index("name").loc["model.layers.1"]
        _check(layer, torch.cat([t.reshape(-1) for n, t in ref.items() if n.startswith("model.layers.1.")]), False)
        assert len(llm.generate(["a dog"], use_tqdm=False)[0].outputs[0].token_ids) > 0
    finally:
        llm.llm_engine.engine_core.shutdown()
