"""nbinspect on a real vLLM engine running in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0):
the served model's frames, engine facts, sample generation, checkpoint match, renders."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from tests.vllm.require import require_vllm

require_vllm()

import torch  # noqa: E402  (after the vLLM check: the module is skipped without it)
from safetensors import safe_open  # noqa: E402

import nbinspect  # noqa: E402
from nbinspect.ui.vllm_worker import InspectWorkerExtension  # noqa: E402
from tests.vllm.tiny_llama import (  # noqa: E402
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    KV_CACHE_BYTES,
    KV_HEADS,
    VOCAB,
    engine_kwargs,
    kv_block_bytes,
    save_tiny_llama,
)

EXTENSION = f"{InspectWorkerExtension.__module__}.{InspectWorkerExtension.__qualname__}"
PROMPT = "the cat sat on"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="module")
def llm(folder):
    import vllm.envs
    from vllm import LLM

    vllm.envs.disable_envs_cache()  # an engine made earlier in this process froze the settings

    with pytest.MonkeyPatch.context() as env:
        env.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        yield LLM(**engine_kwargs(folder), worker_extension_cls=EXTENSION)


@pytest.fixture(scope="module")
def insp(llm):
    return nbinspect.inspect(llm, sample_input=PROMPT)


def _checkpoint(folder) -> dict[str, torch.Tensor]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118  (safe_open is not a dict)


def test_served_tree_has_vllms_fused_layers(insp):
    assert insp.framework == "vllm" and insp.totals["architecture"] == "LlamaForCausalLM"
    types = dict(zip(insp.layers["name"], insp.layers["type"]))
    assert types["model.layers.0.self_attn.qkv_proj"] == "QKVParallelLinear"
    assert types["model.layers.0.mlp.gate_up_proj"] == "MergedColumnParallelLinear"
    shapes = dict(zip(insp.params["name"], insp.params["shape"]))
    head_dim = HIDDEN // HEADS
    # the CPU kernel holds these weights; nbinspect reports their logical shapes
    assert shapes["model.layers.0.self_attn.qkv_proj.weight"] == ((HEADS + 2 * KV_HEADS) * head_dim, HIDDEN)
    assert shapes["model.layers.1.mlp.gate_up_proj.weight"] == (2 * INTERMEDIATE, HIDDEN)


def test_parameter_count_is_the_checkpoints(insp, folder):
    assert insp.totals["total_params"] == sum(t.numel() for t in _checkpoint(folder).values())


def test_weights_match_the_folder_through_the_fused_names(insp):
    compare = insp.frames["compare"]
    assert set(compare["status"]) == {"same"}
    assert "model.layers.0.self_attn.qkv_proj.weight" in set(compare["name"])
    assert not any(".q_proj." in n or ".gate_proj." in n for n in compare["name"])
    assert "15 weights compared with the folder: 15 same" in insp.summary()


def test_stats_of_a_packed_fused_weight_match_a_float64_reference(insp, folder):
    ckpt = _checkpoint(folder)
    prefix = "model.layers.1.self_attn."
    ref = torch.cat([ckpt[prefix + p + ".weight"] for p in ("q_proj", "k_proj", "v_proj")]).double()
    row = insp.stats.set_index("name").loc[prefix + "qkv_proj.weight"]
    assert row["numel"] == ref.numel()
    assert math.isclose(row["mean"], ref.mean().item(), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(row["std"], ref.std(unbiased=False).item(), rel_tol=1e-9)
    assert (row["min"], row["max"]) == (ref.min().item(), ref.max().item())


def test_engine_facts(insp, llm):
    t = insp.totals
    block = t["kv_cache_block_size"]
    assert t["kv_cache_blocks"] == KV_CACHE_BYTES // kv_block_bytes(block)
    assert t["kv_cache_bytes"] == t["kv_cache_blocks"] * kv_block_bytes(block)
    assert (t["tensor_parallel_size"], t["pipeline_parallel_size"]) == (1, 1)
    assert (t["dtype"], t["quantization"], t["max_model_len"]) == ("float32", None, 128)
    assert t["vocab_size"] == VOCAB and t["multiprocessing"] is False
    assert t["kv_cache_memory_bytes"] == KV_CACHE_BYTES
    components = insp.frames["components"].set_index("component")
    assert components.loc["engine core", "type"] == "EngineCore"
    assert components.loc["executor", "type"] == "UniProcExecutor"
    assert components.loc["model", "type"] == "LlamaForCausalLM"


def test_sample_generation_is_the_engines_greedy_output(insp, llm):
    from vllm import SamplingParams

    (direct,) = llm.generate([PROMPT], SamplingParams(temperature=0.0, max_tokens=8), use_tqdm=False)
    (prompt,), (output,) = insp.io["input"], insp.io["output"]
    assert prompt["value"] == PROMPT and prompt["num_tokens"] == len(direct.prompt_token_ids) == 4
    assert output["token_ids"] == list(direct.outputs[0].token_ids) and output["num_tokens"] == 8
    assert output["value"] == direct.outputs[0].text


def test_model_info_document(insp):
    doc = json.loads(json.dumps(insp.to_model_info()))
    assert (doc["framework"], doc["model_type"]) == ("vllm", "LlamaForCausalLM")
    assert doc["input_info"]["type"] == "text_or_sampling_params" and doc["input_info"]["sample_input"] == PROMPT
    assert doc["output_info"]["type"] == "generated_text"
    assert doc["output_info"]["sample_output"] == insp.io["output"][0]["value"]
    assert doc["output_info"]["num_outputs"] == 1
    assert [c["name"] for c in doc["components"]][-3:] == ["workers", "model runner", "model"]
    assert all({"name", "type", "description"} <= set(c) for c in doc["components"])
    qkv = next(layer for layer in doc["layers"] if layer["name"] == "model.layers.0.self_attn.qkv_proj")
    assert qkv["parameter_shapes"] == [[256, HIDDEN]] and qkv["parameters"] == 256 * HIDDEN
    assert doc["parameters"] == insp.totals["total_params"] and doc["engine"]["kv_cache_blocks"] > 0
    assert len(doc["layers"]) == insp.totals["num_modules"] - 1  # the root owns no tensor
    assert sum(r["parameters"] for r in doc["layers"]) == doc["parameters"]


def test_text_and_widget_show_the_engine_header(insp):
    text = insp.summary(depth=2)
    assert text.startswith(f"{insp.name}: vLLM engine\n")
    assert f"KV cache          {insp.totals['kv_cache_blocks']:,} blocks" in text
    assert "Sample prompt     'the cat sat on' (4 tokens)" in text
    assert "Memory setting    kv_cache_memory_bytes 32.0 MiB (overrides gpu_memory_utilization)" in text
    assert "workers             CPUWorker          in process  1 (tensor parallel 1" in text
    label = insp.widget().payload["model"]["framework"]
    assert label.startswith("vLLM ") and "LlamaForCausalLM · float32 · KV cache" in label and "TP 1 · PP 1" in label
    assert insp.to_dict()["model"]["framework"] == "vllm"


def test_worker_extension_answers_by_method_name(llm, insp):
    (raw,) = llm.collective_rpc(
        "nbinspect_report", args=({"backend": "vllm", "stats": False, "bins": 8, "folder": None},)
    )
    report = pickle.loads(raw)
    assert report["totals"]["total_params"] == insp.totals["total_params"] and "stats" not in report["frames"]
    assert report["totals"]["param_bytes"] == insp.totals["param_bytes"]


def test_magic_shows_the_engine(llm):
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbinspect")
    ip.user_ns["llm"] = llm
    result = ip.run_line_magic("inspect_model", "llm --no-stats --sample-input 'a dog' -o seen")
    assert ip.user_ns["seen"] is result and result.framework == "vllm"
    assert result.io["input"][0]["value"] == "a dog" and "compare" not in result.frames


def test_torch_input_is_refused_and_the_engine_still_generates(llm):
    with pytest.raises(TypeError, match="sample_input="):
        nbinspect.inspect(llm, input=(1, 4))
    assert len(llm.generate(["a dog"], use_tqdm=False)[0].outputs[0].token_ids) > 0
