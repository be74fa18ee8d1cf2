"""Every key an Inspection's ``totals`` may hold, with its meaning: the one place they are written."""

from __future__ import annotations

__all__ = ["ENGINE_TOTALS", "MOE_TOTALS", "STRUCTURE_TOTALS", "TOTALS", "TRACE_TOTALS"]

# A test checks that every key any analysis produces is listed here.
STRUCTURE_TOTALS: dict[str, str] = {  # structure.totals: every Inspection has these
    "total_params": "unique parameter elements (shared storage counted once)",
    "trainable_params": "unique parameter elements with requires_grad",
    "non_trainable_params": "unique parameter elements without requires_grad",
    "total_params_by_path": "parameter elements counted at every path, as naive counters do",
    "buffer_numel": "unique buffer elements",
    "param_bytes": "bytes of the unique parameters",
    "buffer_bytes": "bytes of the unique buffers",
    "num_modules": "distinct module objects, root included",
}
TRACE_TOTALS: dict[str, str] = {  # after a traced forward pass (trace, inspect(input=...), %%inspect_model)
    "flops": "forward FLOPs of the whole model (a multiply-add is 2); None when not counted",
    "backward_flops": "backward FLOPs (trace(backward=True)); None when not counted",
    "activation_bytes": "bytes autograd saved for backward, each storage once (MLX: arrays the calls returned)",
    "input_bytes": "bytes of the input tensors",
    "flops_note": "which floating-point ops ran but are not counted",
    "fake_tensors": "True when the pass ran on fake tensors (meta models): shapes and sizes only",
    "model_calls": "how many times the watched cell called the model (%%inspect_model)",
    "measured_active_bytes": "MLX: get_active_memory() growth over the evaluated pass (temporaries included)",
    "measured_peak_bytes": "MLX: get_peak_memory() over the evaluated pass",
}
MOE_TOTALS: dict[str, str] = {  # inspect() of a mixture of experts
    "activated_params": "parameters one token uses: top-k routed experts and all the rest; None when top-k is unknown",
    "routed_params": "parameters of all routed experts",
}
ENGINE_TOTALS: dict[str, str] = {  # a vLLM engine (inspect(llm)): None when the engine does not say
    "engine": "the serving engine and its version as people read it, e.g. 'vLLM 0.32.0'",
    "vllm_version": "version of the vllm package",
    "model_path": "what LLM(model=...) was given: a folder or a hub name",
    "architecture": "the served model class, e.g. LlamaForCausalLM",
    "dtype": "the served weights' dtype, e.g. float32",
    "quantization": "the quantization method; None when the weights are not quantized",
    "max_model_len": "longest sequence the engine accepts, in tokens",
    "tensor_parallel_size": "tensor-parallel ranks (parameter counts are the whole model's, frames rank 0's shard)",
    "pipeline_parallel_size": "pipeline-parallel stages",
    "kv_cache_block_size": "tokens per KV-cache block",
    "kv_cache_blocks": "KV-cache blocks the engine allocated",
    "kv_cache_bytes": "bytes of the KV-cache tensors on the first worker",
    "gpu_memory_utilization": "the memory-utilisation setting (on CPU: the share of RAM for the KV cache)",
    "kv_cache_memory_bytes": "the KV-cache size the LLM was given, which overrides gpu_memory_utilization; or None",
    "tokenizer": "tokenizer class",
    "vocab_size": "tokens the tokenizer knows",
    "multiprocessing": "True when the engine core runs in another process",
}
TOTALS: dict[str, str] = {**STRUCTURE_TOTALS, **TRACE_TOTALS, **ENGINE_TOTALS, **MOE_TOTALS}
