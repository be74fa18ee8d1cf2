"""The dataflow graph frames of a traced forward pass: its edges and its nodes."""

from __future__ import annotations

from .frame import Column, FrameSchema

__all__ = ["GRAPH", "GRAPH_NODES"]


GRAPH = FrameSchema(
    "graph",
    (
        Column("producer", "Int64", "node (graph_nodes.node) that produced the tensor"),
        Column("consumer", "Int64", "node that consumed it"),
        Column("producer_call", "Int64", "flow.index of the producer, or of the call it ran in; missing for inputs"),
        Column("consumer_call", "Int64", "flow.index of the consumer, or of the call it ran in; missing for outputs"),
        Column("producer_name", "string", "module path of producer_call, or the input's path"),
        Column("consumer_name", "string", "module path of consumer_call, or the output's path"),
        Column("tensor", "Int64", "the tensor's number: the rows of one tensor share it"),
        Column("shape", "object", "tuple of ints"),
        Column("dtype", "string", "element type, e.g. 'float32'"),
        Column("bytes", "Int64", "numel times element size"),
        Column("via", "string", "shape operations passed through on the way, e.g. 'view·transpose'; missing if none"),
        Column("inplace", "boolean", "the consumer changed the tensor in place"),
        Column("side", "boolean", "a side input: consumed inside two or more members of one repeated run from outside"),
    ),
    "One row per producer -> consumer edge of one tensor in the traced forward pass, at the "
    "finest level: module calls without children and the functional operations run directly "
    "in other modules (graph_nodes). A tensor used three times is three rows.",
)

GRAPH_NODES = FrameSchema(
    "graph_nodes",
    (
        Column("node", "Int64", "id, in creation order: a call's nodes have ids between its own and its last"),
        Column("kind", "string", "'call', 'op' (a torch function run directly in a module), 'input' or 'output'"),
        Column("name", "string", "module path (calls), function name (ops), input or output path"),
        Column("call", "Int64", "flow.index of a call; missing for other kinds"),
        Column("parent", "Int64", "node of the enclosing call; missing for the root, inputs and outputs"),
        Column("last", "Int64", "largest node id inside a call (itself for other kinds)"),
        Column("const", "boolean", "an op that depends on no input (masks, positions)"),
        Column("signature", "string", "hash of the node's type, shapes, children and internal dataflow"),
        Column("fold_first", "Int64", "first member of the run of repeated blocks it belongs to; missing if none"),
        Column("fold_count", "Int64", "members of that run"),
        Column("fold_label", "string", "the run's label, e.g. 'layers.0–31 ×32'"),
        Column("same_as", "Int64", "an earlier call with the same signature outside its run; missing if none"),
        Column("params", "object", "tuple of parameter/buffer paths an op read directly (x @ emb.weight.T); else None"),
    ),
    "One row per node of the dataflow graph (graph frame).",
)
