"""The frames of weight values: statistics with their histograms, health, and where bad values are."""

from __future__ import annotations

from typing import Any

import numpy as np

from .frame import Column, FrameSchema

__all__ = ["HEALTH", "LOCATE", "STATS", "histogram_groups", "is_array"]


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
