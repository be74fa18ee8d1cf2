"""The frames of two sources compared: per tensor, rolled up, per expert, and over training steps."""

from __future__ import annotations

from .frame import Column, FrameSchema

__all__ = ["COMPARE", "COMPARE_GROUPS", "COMPARE_STATUSES", "DELTA_HIST", "EXPERT_CHANGES", "TRACK_HISTORY"]

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

DELTA_HIST = FrameSchema(
    "delta_hist",
    (
        Column("name", "string", "dotted path of a changed tensor"),
        Column("hist_counts", "object", "counts of b - a in each bin"),
        Column("hist_edges", "object", "bin edges, on [-max |b - a|, +max |b - a|]"),
    ),
    "The histogram of the change b - a of each changed tensor of a comparison (its widget's detail panel).",
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
