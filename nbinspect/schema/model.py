"""The core frames of one model: its tensors, modules, calls, memory plan, experts and engine."""

from __future__ import annotations

from .frame import Column, FrameSchema

__all__ = [
    "BUFFER",
    "BY_TYPE",
    "ENGINE_COMPONENTS",
    "FLOW",
    "LAYERS",
    "MEMORY",
    "MEMORY_COMPONENTS",
    "MOE",
    "PARAMETER",
    "PARAMS",
    "TRACE_COLUMNS",
    "UNKNOWN_TYPE",
]

UNKNOWN_TYPE = "unknown"  # the module type a tree built from tensor names alone has
PARAMETER = "parameter"
BUFFER = "buffer"

PARAMS = FrameSchema(
    "params",
    (
        Column("name", "string", "dotted path of the tensor"),
        Column("module", "string", "dotted path of the module that holds it ('' is the root)"),
        Column("kind", "string", "'parameter' or 'buffer'"),
        Column("shape", "object", "tuple of ints; None for an uninitialized (lazy) parameter"),
        Column("dtype", "string", "element type without the 'torch.' prefix, e.g. 'float32'"),
        Column("device", "string", "device the tensor lives on, e.g. 'cpu', 'meta'"),
        Column("numel", "Int64", "number of elements"),
        Column("bytes", "Int64", "numel times element size"),
        Column("requires_grad", "boolean", "whether the optimizer would train it"),
        Column("tied_to", "string", "first path holding the same storage; missing if not shared"),
        Column(
            "overlaps",
            "string",
            "first paths of earlier storages this one shares some (not all) elements with "
            "(partially overlapping views), comma-separated; missing if none",
        ),
    ),
    "One row per parameter and buffer path. Shared storage appears at each path; "
    "rows with `tied_to` set are not counted again in totals. Elements a row shares with an "
    "earlier row (`overlaps`) are counted once, at the earlier row, in totals and layers.",
)

TRACE_COLUMNS = (
    Column("input_shapes", "object", "shapes of the tensors the module received (first call)"),
    Column("output_shapes", "object", "shapes of the tensors it returned (first call)"),
    Column("output_dtypes", "object", "dtypes of the tensors it returned (first call)"),
    Column("calls", "Int64", "how many times forward ran"),
    Column("flops", "Int64", "floating point operations of all calls, subtree"),
    Column("backward_flops", "Int64", "FLOPs of the backward pass of all calls, subtree; missing unless asked for"),
    Column("activation_bytes", "Int64", "bytes autograd saved for backward, subtree"),
)

LAYERS = FrameSchema(
    "layers",
    (
        Column("index", "Int64", "position in pre-order"),
        Column("name", "string", "dotted path; '' is the root"),
        Column("parent", "string", "dotted path of the parent; missing for the root"),
        Column("depth", "Int64", "0 for the root"),
        Column("type", "string", "class name"),
        Column("is_leaf", "boolean", "has no child modules"),
        Column("alias_of", "string", "first path of the same module object if registered twice"),
        Column("params", "Int64", "parameters in the subtree, shared storage counted once"),
        Column(
            "own_params", "Int64", "parameters first registered on this module (shared ones count at their first path)"
        ),
        Column("trainable_params", "Int64", "subtree parameters with requires_grad"),
        Column("frozen_params", "Int64", "subtree parameters without requires_grad"),
        Column("param_bytes", "Int64", "bytes of subtree parameters, shared storage once"),
        Column("buffer_bytes", "Int64", "bytes of subtree buffers, shared storage once"),
        Column("training", "boolean", "the module's train/eval flag"),
        Column("attrs", "object", "dict of layer hyperparameters"),
        *TRACE_COLUMNS,
    ),
    "One row per module path in pre-order. Trace columns are missing until a forward pass has been traced.",
)

BY_TYPE = FrameSchema(
    "by_type",
    (
        Column("type", "string", "module class name"),
        Column("modules", "Int64", "how many distinct modules of this type"),
        Column("params", "Int64", "parameters owned by modules of this type, shared once"),
        Column("param_bytes", "Int64", "bytes of those parameters"),
        Column("share", "float64", "percent of the model's unique parameters"),
    ),
    "Parameters grouped by the type of the module that owns them, largest first.",
)

FLOW = FrameSchema(
    "flow",
    (
        Column("index", "Int64", "position in execution order (the order forward was entered)"),
        Column("name", "string", "first dotted path of the module called; '' is the root"),
        Column("type", "string", "class name"),
        Column("depth", "Int64", "nesting of the call: 0 for the root's call"),
        Column("parent", "Int64", "index of the call this one ran inside; missing for the root"),
        Column("call", "Int64", "0 for a module's first call, 1 for its second, ..."),
        Column("input_shapes", "object", "shapes of the tensors passed in (positional, then keyword)"),
        Column("input_bytes", "Int64", "bytes of those tensors"),
        Column("output_shapes", "object", "shapes of the tensors returned; missing if the call raised"),
        Column("output_dtypes", "object", "dtypes of the tensors returned"),
        Column("flops", "Int64", "FLOPs of this call, calls inside it included"),
        Column("own_flops", "Int64", "FLOPs of ops run directly in this call, outside its child calls"),
        Column(
            "backward_flops", "Int64", "backward FLOPs of this call's ops and its children's; missing unless asked for"
        ),
        Column("activation_bytes", "Int64", "bytes saved for backward by this call, calls inside it included"),
        Column("own_activation_bytes", "Int64", "bytes saved for backward directly in this call"),
        Column("status", "string", "'ok', 'failed' (raised here) or 'interrupted' (a call inside raised)"),
    ),
    "One row per module call in execution order; a module called twice has two rows. "
    "own_flops and own_activation_bytes over all rows sum to the root's flops and activation_bytes.",
)

MEMORY_COMPONENTS = ("parameters", "buffers", "gradients", "optimizer_state", "activations", "inputs", "total")

MEMORY = FrameSchema(
    "memory",
    (
        Column("component", "string", "one of MEMORY_COMPONENTS"),
        Column(
            "layer", "string", "module path the bytes belong to ('' is the root module); missing for whole-model rows"
        ),
        Column("bytes", "Int64", "bytes for the batch size, optimizer and precision planned"),
        Column("share", "float64", "percent of the total"),
        Column("note", "string", "how the whole-model figure was obtained; missing on per-module rows"),
        Column("input", "string", "the model argument an 'inputs' row is for ('x', 'args[0]'); missing on other rows"),
    ),
    "Training memory plan: one whole-model row per component (layer and input missing), after the "
    "'inputs' row one row per model input (input set) that sum to it, then per-module rows (the "
    "module's own parameters and saved tensors) that sum to the whole-model row.",
)

MOE = FrameSchema(
    "moe",
    (
        Column("name", "string", "path of the module holding the routed experts"),
        Column("layout", "string", "'fused' (one tensor per projection, experts along dim 0) or 'modules'"),
        Column("experts", "Int64", "routed experts in this layer"),
        Column("top_k", "Int64", "experts each token is routed to; missing when unknown"),
        Column("expert_params", "Int64", "parameters of one routed expert"),
        Column("routed_params", "Int64", "parameters of all routed experts of this layer"),
        Column("activated_params", "Int64", "routed parameters one token uses: top_k x expert_params"),
        Column("shared_params", "Int64", "parameters of the layer's shared experts (every token uses them)"),
    ),
    "One row per mixture-of-experts layer: how many parameters it holds and how many a token uses.",
)

ENGINE_COMPONENTS = FrameSchema(
    "engine_components",
    (
        Column(
            "component", "string", "role in the engine: tokenizer, engine core, executor, worker, model runner, model"
        ),
        Column("type", "string", "class name of the object in that role"),
        Column("process", "string", "'in process', or where it runs (the engine core's process, a worker)"),
        Column("detail", "string", "what it holds: vocabulary size, worker count, device, ...; missing if nothing"),
    ),
    "What a vLLM engine is made of, from the user's LLM object down to the served torch model.",
)
