# DOC: 001_07  seed 001_e5325f17af369d35.txt lines 133-175, under "ğŸ”„ vLLM Framework Support"
# ---- placeholders (not in the document) ----
import json
import torch
from torch import nn
import nbinspect
import nbi_check as check
DOCUMENTED = json.loads(check.block(r"""
# ---- document block (as written; only the substitutions above) ----
{
  "framework": "vllm",
  "model_name": "vllm_model",
  "model_type": "vLLM",
  "parameters": "N/A",
  "input_info": {
    "type": "text_or_sampling_params",
    "sample_input": "Test prompt..."
  },
  "output_info": {
    "type": "generated_text",
    "sample_output": "Generated text...",
    "num_outputs": 1
  },
  "layers": [
    {
      "layer_index": 0,
      "name": "vllm_model",
      "type": "vLLM",
      "parameters": "N/A",
      "description": "vLLM language model with internal transformer architecture",
      "components": [
        {
          "name": "tokenizer",
          "type": "Tokenizer",
          "description": "Text tokenization component"
        },
        {
          "name": "model_engine",
          "type": "ModelEngine",
          "description": "Core model execution engine"
        },
        {
          "name": "scheduler",
          "type": "Scheduler",
          "description": "Request scheduling component"
        }
      ]
    }
  ]
}
# ---- end of document block ----
"""))
# ---- checks (not in the document) ----
import importlib.util, sys
# A vLLM engine needs vLLM (its own venv, `make test-vllm`); without it, the document's
# layout is checked on what the model_info builder makes of an engine's frames and totals.
if importlib.util.find_spec("vllm") is not None:
    from vllm import LLM
    print("vLLM present: run the engine path here")  # not reached in .venv
document = None
for where in ("nbinspect.render.model_info_json",):
    try:
        build = importlib.import_module(where).model_info_dict
    except Exception as exc:
        print(f"no builder at {where}: {exc}")
        continue
    base = nbinspect.inspect(nn.Sequential(nn.Linear(4, 4)), stats=False)
    totals = {**base.totals, "architecture": "LlamaForCausalLM", "version": "0.x"}
    io = {"input": [{"path": "prompt", "type": "str", "value": "the cat sat on"}],
          "output": [{"path": "text", "type": "str", "value": " the mat"}]}
    import pandas as pd
    components = pd.DataFrame(  # an engine's components frame (schema.ENGINE_COMPONENTS)
        [{"component": "tokenizer", "type": "CachedTokenizer", "process": "in process", "detail": "vocabulary 64"},
         {"component": "engine core", "type": "EngineCore", "process": "in process", "detail": None},
         {"component": "model", "type": "LlamaForCausalLM", "process": "worker", "detail": "cpu"}])
    io = {"input": [{"path": "prompt", "type": "str", "value": "the cat sat on", "num_tokens": 4,
                     "sampling_params": {"temperature": 0.0, "max_tokens": 8}}],
          "output": [{"path": "outputs.0", "type": "str", "value": " the mat", "num_tokens": 8}]}
    document = build("tiny-llama", "vllm", totals, {**base.frames, "components": components}, io)
if document is None:
    print("SKIP: no vLLM and no model_info builder found"); sys.exit(77)
check.keys(document, DOCUMENTED.keys(), "vLLM document top-level keys (builder only)")
check.equal((document.get("input_info") or {}).get("type"), "text_or_sampling_params", "input_info.type as the document names it")
check.equal((document.get("output_info") or {}).get("type"), "generated_text", "output_info.type as the document names it")
check.keys(document.get("input_info"), ["sample_input"], "input_info.sample_input")
check.keys(document.get("output_info"), ["sample_output", "num_outputs"], "output_info.sample_output, num_outputs")
comps = [c for layer in document.get("layers", []) for c in layer.get("components", [])] or document.get("components", [])
check.true(any(isinstance(c, dict) and {"name", "type", "description"} <= set(c) for c in comps), "components with name/type/description", f"got {comps[:2]}")
print("SKIP: vLLM is not installed in this venv (checked the builder's layout only)")
sys.exit(77)
