"""The columns of every frame nbinspect produces: the one place their names and dtypes live.

Analyzers build frames with :meth:`FrameSchema.build`, which refuses unknown or missing
columns, so a frame can never drift from what is written here. Renderers, the widget,
JSON export and the tests read column names from these frames.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

UNKNOWN_TYPE = "unknown"  # the module type a tree built from tensor names alone has


def is_missing(value: Any) -> bool:
    """A missing cell: None, pandas' NA or a float NaN."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


__all__ = [
    "BUFFER",
    "BY_TYPE",
    "COMPARE",
    "COMPARE_GROUPS",
    "COMPARE_STATUSES",
    "DELTA_HIST",
    "ENGINE_COMPONENTS",
    "ENGINE_TOTALS",
    "EXPERT_CHANGES",
    "FLOW",
    "FRAMES",
    "FRAME_KEYS",
    "GRAPH",
    "GRAPH_NODES",
    "HEALTH",
    "LAYERS",
    "LOCATE",
    "MEMORY",
    "MEMORY_COMPONENTS",
    "MOE",
    "MOE_TOTALS",
    "PARAMETER",
    "PARAMS",
    "STATS",
    "STRUCTURE_TOTALS",
    "TOTALS",
    "TRACE_COLUMNS",
    "TRACE_TOTALS",
    "TRACK_HISTORY",
    "Column",
    "FrameSchema",
    "unit_of",
]

PARAMETER = "parameter"
BUFFER = "buffer"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # a pandas dtype name: "string", "Int64", "boolean", "float64", "object"
    doc: str


def unit_of(column: str) -> str:
    """The unit a column's numbers are in, read from its name (the naming rule every frame
    keeps): 'bytes' for bytes and *_bytes, 'flops' for flops and *_flops, 'percent' for
    share (0-100), 'fraction' for zeros (0-1), '' otherwise. Displays format by it
    (KiB/MiB, G/T FLOPs, %)."""
    if column == "bytes" or column.endswith("_bytes"):
        return "bytes"
    if column == "flops" or column.endswith("_flops"):
        return "flops"
    return {"share": "percent", "zeros": "fraction"}.get(column, "")


@dataclass(frozen=True)
class FrameSchema:
    name: str
    columns: tuple[Column, ...]
    doc: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def build(self, records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
        """A frame from row dicts. Every key must be a column of this schema; columns a row
        leaves out become missing values (e.g. trace columns before a forward pass)."""
        records = list(records)
        expected = set(self.names)
        for i, row in enumerate(records):
            if not expected.issuperset(row):
                raise ValueError(f"{self.name} row {i}: unknown columns {sorted(set(row) - expected)}")
        # map over dict.get runs in C: a third of the cost of a comprehension on frames of many rows
        get: Callable[[Any, str], Any] = dict.get if all(type(row) is dict for row in records) else _get
        data = {c.name: _array(list(map(get, records, repeat(c.name))), c.dtype) for c in self.columns}
        return pd.DataFrame(data, columns=self.names)

    def from_columns(self, columns: Mapping[str, Sequence[Any]], length: int) -> pd.DataFrame:
        """A frame of `length` rows from column sequences (None for missing values) or arrays
        (NaN / a masked pandas array for missing), the fast way for frames of many rows.
        Columns left out are missing; unknown ones are refused."""
        unknown = set(columns) - set(self.names)
        if unknown:
            raise ValueError(f"{self.name}: unknown columns {sorted(unknown)}")
        data = {}
        for c in self.columns:
            values = columns.get(c.name, [None] * length)
            if isinstance(values, (np.ndarray, pd.api.extensions.ExtensionArray)) and c.dtype != "object":
                data[c.name] = pd.array(values, dtype=c.dtype)  # numpy/pandas arrays: no Python loop
            else:
                data[c.name] = _array(list(values), c.dtype)
        return pd.DataFrame(data, columns=self.names)

    def validate(self, frame: pd.DataFrame) -> None:
        """Raise ValueError if `frame` does not have exactly this schema's columns and dtypes."""
        if list(frame.columns) != self.names:
            raise ValueError(f"{self.name} frame columns {list(frame.columns)} != schema {self.names}")
        for c in self.columns:
            actual = str(frame[c.name].dtype)
            if actual != c.dtype and not (c.dtype == "string" and actual.startswith("string")):
                raise ValueError(f"{self.name}.{c.name} has dtype {actual}, schema says {c.dtype}")


def _get(row: Mapping[str, Any], key: str) -> Any:
    return row.get(key)


def _array(values: list, dtype: str):
    if dtype == "object":
        # one object per element (tuples stay tuples, not rows), filled in C
        return np.fromiter(values, dtype=object, count=len(values))
    if dtype == "float64":
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if not any(map(operator.is_not, values, repeat(None))):
        # all missing (trace columns before a forward pass): pandas infers these at 80-150 ns
        # a value, a take of nothing fills them at 6
        return pd.array([], dtype=dtype).take(np.full(len(values), -1), allow_fill=True)
    if dtype in _PACKED:
        packed = _packed(values, *_PACKED[dtype])
        if packed is not None:
            return packed
    return pd.array(values, dtype=dtype)


# Int64 and boolean columns hold Python ints and bools, which numpy packs in C: a third to a
# tenth of pandas' per-value checks. Whatever numpy packs as another kind (floats, huge or
# unsigned ints, pd.NA) goes to pandas, which converts or refuses it as before.
_PACKED: dict[str, tuple[type, str, type]] = {
    "Int64": (pd.arrays.IntegerArray, "i", np.int64),
    "boolean": (pd.arrays.BooleanArray, "b", np.bool_),
}


def _packed(values: list, array: type, kind: str, numpy_dtype: type) -> Any:
    """`values` (None for missing) as a masked pandas `array`, or None to leave them to pandas."""
    n = len(values)
    packed = np.array(values)
    if packed.dtype.kind == kind and packed.ndim == 1:  # nothing missing
        return array(packed.astype(numpy_dtype, copy=False), np.zeros(n, dtype=bool))
    if packed.dtype != object:
        return None
    missing = np.fromiter(map(operator.is_, values, repeat(None)), dtype=bool, count=n)
    present = np.array([v for v in values if v is not None])
    if present.dtype.kind != kind or present.ndim != 1:
        return None
    data: np.ndarray = np.zeros(n, dtype=numpy_dtype)
    data[~missing] = present
    return array(data, missing)


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

COMPARE_STATUSES = ("same", "changed", "dtype_changed", "reshaped", "added", "removed")

_DELTA_COLUMNS = (
    Column("numel", "Int64", "elements compared; missing when nothing could be compared"),
    Column("l2_a", "float64", "L2 norm of a"),
    Column("l2_b", "float64", "L2 norm of b"),
    Column("l2_delta", "float64", "L2 norm of the delta b - a"),
    Column("rel_change", "float64", "l2_delta / l2_a (0 when both are 0, inf when only a is 0)"),
    Column(
        "change",
        "float64",
        "l2_delta / max(l2_a, l2_b): 0 to 2, 0 when both are 0; finite where a starts at zero (what lists rank by)",
    ),
    Column("max_abs_delta", "float64", "largest |b - a|"),
    Column("cosine", "float64", "cosine similarity of a and b; missing when either is all zeros"),
    Column("mean_drift", "float64", "mean(b) - mean(a)"),
    Column("frac_above", "object", "tuple: fraction of elements with |b - a| > each threshold"),
)

COMPARE = FrameSchema(
    "compare",
    (
        Column("name", "string", "dotted path of the tensor"),
        Column("module", "string", "dotted path of the module holding it"),
        Column("component", "string", "part of the network read from the name (analyze/components.py)"),
        Column("layer", "Int64", "layer index read from the name; missing outside numbered layers"),
        Column("status", "string", "one of COMPARE_STATUSES"),
        Column("shape_a", "object", "shape in a; missing if added"),
        Column("shape_b", "object", "shape in b; missing if removed"),
        Column("dtype_a", "string", "dtype in a"),
        Column("dtype_b", "string", "dtype in b"),
        *_DELTA_COLUMNS,
    ),
    "One row per tensor name of two sources, a's order then b's additions. Delta columns are "
    "computed for same/changed/dtype_changed rows (in float64, chunk by chunk), missing otherwise.",
)

COMPARE_GROUPS = FrameSchema(
    "compare_groups",
    (
        Column("group", "string", "module path, component name or layer index the rows roll up to"),
        Column("layer", "Int64", "layer index when grouped per layer; missing otherwise"),
        Column("tensors", "Int64", "tensor names in the group"),
        Column(
            "differ", "Int64", "tensors whose status is not 'same' (changed, added, removed, reshaped, dtype_changed)"
        ),
        *_DELTA_COLUMNS,
    ),
    "The compare frame rolled up per module, component or layer; norms and fractions are over "
    "all compared elements of the group, as if they were one tensor.",
)

STATS = FrameSchema(
    "stats",
    (
        Column("name", "string", "tensor path (by='tensor') or module path (by='module')"),
        Column("module", "string", "module holding the tensor; the module itself for module rows"),
        Column("kind", "string", "'parameter', 'buffer', or 'module' for a subtree roll-up"),
        Column("dtype", "string", "element type; module rows list their tensors' dtypes"),
        Column("numel", "Int64", "elements, NaN/Inf included (module rows: parameters, shared once)"),
        Column("mean", "float64", "mean of the finite elements; NaN when there are none"),
        Column("std", "float64", "population standard deviation (ddof=0) of the finite elements"),
        Column("min", "float64", "smallest finite element"),
        Column("max", "float64", "largest finite element"),
        Column("abs_mean", "float64", "mean of |x| over the finite elements"),
        Column("l2", "float64", "Euclidean norm of the finite elements"),
        Column("zeros", "float64", "fraction of all elements that are exactly 0"),
        Column("nan", "Int64", "NaN elements"),
        Column("inf", "Int64", "+Inf and -Inf elements"),
        Column(
            "hist_counts",
            "object",
            "int64 array of `bins` counts of the finite elements over [min, max] "
            "(module rows: their tensors' histograms re-binned, so single bins are approximate)",
        ),
        Column("hist_edges", "object", "float64 array of bins+1 edges, as numpy.histogram draws them"),
        Column(
            "hist_sample",
            "Int64",
            "elements the histogram was binned from: all finite ones up to "
            "65,536 per tensor, a strided sample of 65,536 above (counts scaled to all)",
        ),
        Column(
            "note",
            "string",
            "why values are missing or were changed (meta, dequantized, complex "
            "magnitude, sparse, skipped: error); missing when nothing to say",
        ),
    ),
    "Weight statistics, one row per tensor path or per module subtree. Rows without values "
    "(meta, uninitialized, skipped) have missing moments and histogram and say why in `note`.",
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

EXPERT_CHANGES = FrameSchema(
    "expert_changes",
    (
        Column("group", "string", "path of the module holding the routed experts"),
        Column("expert", "Int64", "expert index"),
        Column("numel", "Int64", "parameters of the expert"),
        Column("l2_a", "float64", "norm of the expert's weights in a"),
        Column("l2_delta", "float64", "norm of b - a over the expert's weights"),
        Column("rel_change", "float64", "l2_delta / l2_a"),
        Column("vs_median", "float64", "rel_change over the median rel_change of its layer's experts"),
        Column("dead", "boolean", "did not move: rel_change is 0 or below `dead_below` x the layer's median"),
    ),
    "One row per routed expert of two sources: how far each expert moved from a to b.",
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

HEALTH = FrameSchema(
    "health",
    (
        Column("name", "string", "tensor path, or module path for a roll-up row"),
        Column("module", "string", "module holding the tensor; the module itself for module rows"),
        Column("kind", "string", "'parameter', 'buffer', or 'module' for a subtree roll-up"),
        Column("numel", "Int64", "elements (module rows: of the distinct tensors in the subtree)"),
        Column("nan", "Int64", "NaN elements"),
        Column("inf", "Int64", "+Inf and -Inf elements"),
        Column("zeros", "float64", "fraction of the elements that are exactly 0"),
        Column("all_zero", "boolean", "a weight matrix (2+ dims) that is all zeros: a dead layer"),
        Column("constant", "boolean", "a weight matrix whose finite elements all have one non-zero value"),
        Column("exploding", "boolean", "largest |x| above the `exploding` threshold"),
        Column("vanishing", "boolean", "a weight matrix whose mean |x| is below the `vanishing` threshold"),
        Column(
            "problems",
            "string",
            "what is wrong, comma-separated ('NaN', 'Inf', 'all zero', 'constant', 'exploding', 'vanishing'); "
            "'' when healthy. Module rows: the union over the subtree",
        ),
        Column("problem_tensors", "Int64", "distinct tensors with a problem (1 or 0 on tensor rows)"),
    ),
    "Weight health, one row per tensor path, then one per module path (pre-order) rolling up "
    "its subtree (shared storage once). Flags for scale and constancy apply to parameters "
    "with 2+ dims: biases and norm scales start constant by design. NaN/Inf count for every "
    "tensor. Rows whose values could not be read (meta) have missing counts and no flags.",
)

TRACK_HISTORY = FrameSchema(
    "track_history",
    (
        Column("step", "Int64", "optimizer step of the measurement"),
        Column("since_step", "Int64", "step of the snapshot the change is measured from"),
        Column("analysis_seconds", "float64", "wall time the measurement took (all metrics)"),
    ),
    "Training dynamics (nbinspect.track): one row per measurement. These columns come first, then one float64 "
    "column per metric key (e.g. 'param_change/norm_l2', 'sparse/kl_at_1e-06'), in the order first reported; "
    "missing where a metric did not report at that step.",
)

LOCATE = FrameSchema(
    "locate",
    (
        Column("tensor", "string", "tensor path (the first path of a tied storage)"),
        Column("what", "string", "'nan', 'posinf', 'neginf', 'zero_row', 'zero_column' or 'outlier'"),
        Column(
            "index",
            "object",
            "tuple of ints in the tensor's shape; rows and columns: the index of the row (column) axes",
        ),
        Column("value", "float64", "the value (NaN, ±Inf, the outlier); missing for rows and columns"),
        Column("rank", "Int64", "0, 1, ...: position among this tensor's hits of this kind, in index order"),
        Column("total", "Int64", "hits of this kind in the tensor, exact (also when only the first are listed)"),
    ),
    "Where the bad values are (Inspection.locate, Comparison.locate on b - a), first N per tensor and kind.",
)

FRAMES: dict[str, FrameSchema] = {
    f.name: f
    for f in (
        PARAMS,
        LAYERS,
        BY_TYPE,
        FLOW,
        GRAPH,
        GRAPH_NODES,
        MEMORY,
        COMPARE,
        COMPARE_GROUPS,
        STATS,
        HEALTH,
        ENGINE_COMPONENTS,
        MOE,
        EXPERT_CHANGES,
        LOCATE,
    )
}
# The frames an Inspection or Comparison holds, by key, and the schema each follows (a test
# checks every frame any analysis returns against it).
DELTA_HIST = FrameSchema(
    "delta_hist",
    (
        Column("name", "string", "dotted path of a changed tensor"),
        Column("hist_counts", "object", "counts of b - a in each bin"),
        Column("hist_edges", "object", "bin edges, on [-max |b - a|, +max |b - a|]"),
    ),
    "The histogram of the change b - a of each changed tensor of a comparison (its widget's detail panel).",
)

FRAME_KEYS: dict[str, FrameSchema] = {
    **FRAMES,
    "delta_hist": DELTA_HIST,
    "stats_by_module": STATS,
    "stats_a": STATS,
    "stats_b": STATS,
    "components": ENGINE_COMPONENTS,
}

# Every key an Inspection's ``totals`` may hold, with its meaning: the one place they are
# written (a test checks that every key any analysis produces is listed here).
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


# ---------------------------------------------------------------- histogram columns


def is_array(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def histogram_groups(counts: list, edges: list) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The rows of (`counts`, `edges`) that make a histogram (arrays of n >= 1 counts and n + 1
    finite edges), by bin count n: n -> (row positions, counts (k, n) int64, edges (k, n + 1))."""
    arrays = _stackable(counts, edges)
    if arrays:  # as a stats frame holds them: stacked at once
        c = np.concatenate([counts[i] for i in arrays]).reshape(len(arrays), -1)  # np.stack, 4x faster
        e = np.concatenate([edges[i] for i in arrays]).reshape(len(arrays), -1)
        if c.shape[1] and e.shape[1] == c.shape[1] + 1:
            c, e = c.astype(np.int64, copy=False), e.astype(np.float64, copy=False)
            finite = np.isfinite(e).all(axis=1)
            return {c.shape[1]: (np.array(arrays)[finite], c[finite], e[finite])}
    rows: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for i, (c, e) in enumerate(zip(counts, edges)):
        if is_array(c) and is_array(e):
            c, e = np.asarray(c, dtype=np.int64), np.asarray(e, dtype=np.float64)
            if c.ndim == e.ndim == 1 and c.size and e.size == c.size + 1:
                rows.setdefault(c.size, []).append((i, c, e))
    groups = {}
    for n, found in rows.items():
        c, e = np.stack([r[1] for r in found]), np.stack([r[2] for r in found])
        finite = np.isfinite(e).all(axis=1)
        groups[n] = (np.array([r[0] for r in found])[finite], c[finite], e[finite])
    return groups


def _stackable(counts: list, edges: list) -> list[int]:
    """The rows whose counts and edges are 1-D numpy arrays, when those are of one shape and
    dtype each and no other row has a histogram (no list or tuple); else []."""
    rows = []
    for i, (c, e) in enumerate(zip(counts, edges)):
        if type(c) is np.ndarray and type(e) is np.ndarray:
            rows.append(i)
        elif is_array(c) and is_array(e):
            return []
    kinds = {(counts[i].shape, counts[i].dtype, edges[i].shape, edges[i].dtype) for i in rows}
    return rows if len(kinds) == 1 and counts[rows[0]].ndim == edges[rows[0]].ndim == 1 else []
