"""Tensor parallelism over 2 CPU workers: every rank holds a shard, the totals are the whole
model's (the checkpoint's count: key/value heads replicated over ranks count once).

Opt-in (NBINSPECT_VLLM_TP=1 make test-vllm): two workers take minutes to start on a
2-core machine. Measured here: 311,936 parameters on 2 ranks, as in the checkpoint."""

from __future__ import annotations

import os

import pytest

from tests.vllm.require import require_vllm

require_vllm()

import nbinspect  # noqa: E402  (after the vLLM check: the module is skipped without it)
from tests.vllm.tiny_llama import engine_kwargs, save_tiny_llama  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("NBINSPECT_VLLM_TP") != "1", reason="2 tensor-parallel workers are slow: NBINSPECT_VLLM_TP=1 runs it"
)


def test_totals_are_the_whole_models(tmp_path, monkeypatch):
    import vllm.envs
    from safetensors import safe_open
    from vllm import LLM

    folder = save_tiny_llama(tmp_path)
    vllm.envs.disable_envs_cache()
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0|1")  # one core per worker on one NUMA node
    llm = LLM(**engine_kwargs(folder), tensor_parallel_size=2, distributed_executor_backend="mp")
    try:
        insp = nbinspect.inspect(llm)
        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            expected = sum(f.get_tensor(k).numel() for k in f.keys())  # noqa: SIM118  (safe_open is not a dict)
        assert insp.totals["tensor_parallel_size"] == 2
        assert insp.totals["total_params"] == expected
        assert dict(zip(insp.params["name"], insp.params["shape"]))["model.layers.0.mlp.gate_up_proj.weight"] == (
            256,
            128,
        )
        assert len(llm.generate(["a dog"], use_tqdm=False)[0].outputs[0].token_ids) > 0
    finally:
        llm.llm_engine.engine_core.shutdown()
