"""An engine whose core runs in another process: the frames are built inside the worker and
come back through collective_rpc; when the worker cannot be reached the error is one line
and the engine keeps generating."""

from __future__ import annotations

import pytest

from tests.vllm.require import require_vllm

require_vllm()

import nbinspect  # noqa: E402  (after the vLLM check: the module is skipped without it)
from nbinspect import EngineError  # noqa: E402
from tests.vllm.tiny_llama import engine_kwargs, save_tiny_llama  # noqa: E402


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    import vllm.envs
    from vllm import LLM

    vllm.envs.disable_envs_cache()  # an engine made earlier in this process froze the settings

    folder = save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
        env.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # lets collective_rpc carry a function
        engine = LLM(**engine_kwargs(folder))
        yield engine
        engine.llm_engine.engine_core.shutdown()


def _tokens(llm) -> list[int]:
    from vllm import SamplingParams

    return list(
        llm.generate(["the dog"], SamplingParams(temperature=0.0, max_tokens=6), use_tqdm=False)[0].outputs[0].token_ids
    )


def test_frames_come_back_from_the_worker(llm):
    insp = nbinspect.inspect(llm, sample_input="a cat")
    assert insp.totals["multiprocessing"] is True
    assert insp.totals["total_params"] == 311_936 and insp.totals["kv_cache_blocks"] > 0
    assert set(insp.frames["compare"]["status"]) == {"same"}
    assert set(insp.stats["name"]) == set(insp.params["name"])
    assert insp.stats.set_index("name").loc["model.layers.0.mlp.gate_up_proj.weight", "numel"] == 512 * 128
    components = insp.frames["components"].set_index("component")
    assert components.loc["engine core", "process"] == "engine core process"
    assert components.loc["engine core client", "type"] == "SyncMPClient"
    assert insp.io["output"][0]["num_tokens"] == 8
    assert "engine core in another process" in insp.summary()


def test_unreachable_workers_are_one_line_and_the_engine_still_generates(llm, monkeypatch):
    before = _tokens(llm)
    monkeypatch.delenv("VLLM_ALLOW_INSECURE_SERIALIZATION")
    with pytest.raises(EngineError) as err:
        nbinspect.inspect(llm)
    message = str(err.value)
    assert "\n" not in message and "runs in another process" in message
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION=1" in message and "worker_extension_cls=" in message
    assert _tokens(llm) == before
