"""The dataflow graph of a traced forward pass as frames, and what the graph view shows.

:func:`graph_frames` turns a :class:`~nbinspect.core.trace.Dataflow` into the ``graph``
frame (one row per producer -> consumer edge, schema.GRAPH) and the ``graph_nodes`` frame
(schema.GRAPH_NODES) with the decisions a view needs made once, here:

- a **signature** per node (type, shapes, children's signatures, internal edges lifted to
  the direct children), so equal blocks are known to be equal in dataflow, not only in
  structure;
- **folds**: the runs of repeated blocks ``analyze/fold.py`` finds in the module tree whose
  calls also have equal signatures (``layers.0–31 ×32``); other calls equal to an earlier
  block are marked ``same_as``;
- **side inputs**: a tensor made outside a run and consumed inside two or more of its
  members (rotary cos/sin, the attention mask): drawn as stubs, never laid out;
- **constants**: operations that depend on no input (mask and position construction).

:func:`graph_view` is what the widget's Graph mode receives: the nodes and edges as columns
and the numbers it can colour nodes by (any frame column, or a user's ``pandas.Series``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from itertools import compress, count, pairwise
from typing import Any

import numpy as np
import pandas as pd

from ..core.trace import Dataflow
from ..schema import GRAPH, GRAPH_NODES, is_missing, unit_of
from .fold import fold_repeats, tree_of

__all__ = ["colour_options", "graph_frames", "graph_view"]


def graph_frames(
    flow: Dataflow, calls: pd.DataFrame, layers: pd.DataFrame, params: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``graph`` and ``graph_nodes`` frames of one traced forward pass (`calls`: its
    ``flow`` frame; `layers`, `params`: the module tree, for the folds)."""
    n = len(flow.kind)
    parent, call, src, dst = map(_int_array, (flow.parent, flow.call, flow.src, flow.dst))
    is_call = np.array(flow.kind, dtype=object) == "call"
    tree = tree_of(parent)
    has_children = np.bincount(parent[parent >= 0], minlength=n) > 0  # by numpy, not a len per node
    signature = _signatures(flow, calls, tree, is_call & ~has_children)
    fold_first, fold_count, fold_label = _folds(flow, layers, params, signature)
    same_as = _same_as(n, np.flatnonzero(is_call & has_children).tolist(), signature, fold_first.tolist())
    side = _side_inputs(flow, fold_first, src, dst)
    const = _constants(flow)
    # per node once, then per edge by numpy takes: edges outnumber nodes
    enclosing = np.where(is_call, call, np.where(parent >= 0, call[parent], -1))
    call_name = np.array(flow.name, dtype=object)
    inside = enclosing >= 0
    call_name[inside] = calls["name"].to_numpy(dtype=object)[enclosing[inside]]
    # equal blocks share a signature: each distinct one written once
    signature_text = {s: format(s & (2**64 - 1), "016x") for s in set(signature)}
    read_params: list[tuple | None] = [None] * n
    for node, read in flow.params.items():
        read_params[node] = tuple(read)
    nodes = GRAPH_NODES.from_columns(
        {
            "node": np.arange(n, dtype=np.int64),
            "kind": flow.kind,
            "name": flow.name,
            "call": _ids(call),
            "parent": _ids(parent),
            "last": _present(_int_array(flow.last)),
            "const": pd.arrays.BooleanArray(np.fromiter(const, dtype=bool, count=n), np.zeros(n, dtype=bool)),
            "signature": list(map(signature_text.__getitem__, signature)),
            "fold_first": _ids(fold_first),
            "fold_count": pd.arrays.IntegerArray(fold_count, fold_count == 0),
            "fold_label": fold_label,
            "same_as": _ids(same_as),
            "params": read_params,
        },
        n,
    )
    edges = GRAPH.from_columns(
        {
            "producer": _present(src),
            "consumer": _present(dst),
            "producer_call": _ids(enclosing[src]),
            "consumer_call": _ids(enclosing[dst]),
            "producer_name": call_name[src],  # arrays: pandas checks them in C, not converted to lists and back
            "consumer_name": call_name[dst],
            "tensor": _present(_int_array(flow.tensor)),
            "shape": flow.shape,
            "dtype": flow.dtype,
            "bytes": _present(_int_array(flow.nbytes)),
            "via": [v or None for v in flow.via] if any(flow.via) else [None] * len(flow.via),
            "inplace": pd.arrays.BooleanArray(
                np.fromiter(flow.inplace, dtype=bool, count=len(src)), np.zeros(len(src), dtype=bool)
            ),
            "side": side,
        },
        len(flow.src),
    )
    return edges, nodes


def _ids(values: list[int] | np.ndarray) -> pd.arrays.IntegerArray:
    """Node or call ids (plain ints, -1 for none) as an Int64 column, missing where -1: packed
    by numpy in C, without a list with None to test value by value."""
    data = values if isinstance(values, np.ndarray) else _int_array(values)
    return pd.arrays.IntegerArray(data, data < 0)


def _int_array(values: list[int]) -> np.ndarray:
    """Ints the capture counted (ids, sizes) packed without numpy's type discovery."""
    return np.fromiter(values, dtype=np.int64, count=len(values))


def _present(data: np.ndarray) -> pd.arrays.IntegerArray:
    """An Int64 column with nothing missing, as the frame builds one from plain ints."""
    return pd.arrays.IntegerArray(data, np.zeros(len(data), dtype=bool))


def _hash_text(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _text_hashes(values: list) -> np.ndarray:
    """`_hash_text(repr(v))` of each value as uint64, each distinct value written once (found
    again by the value, or by its text when it cannot be hashed: symbolic sizes)."""
    try:
        ids: dict = {}
        codes = np.fromiter(map(ids.setdefault, values, count()), dtype=np.int64, count=len(values))
    except TypeError:
        return np.array([_hash_text(repr(v)) for v in values], dtype=np.uint64)
    distinct = np.zeros(len(values), dtype=np.uint64)
    for value, code in ids.items():
        distinct[code] = _hash_text(repr(value))
    return distinct[codes]


def _heads(calls: pd.DataFrame) -> list[tuple]:
    """Per call its (type, input shapes, output shapes), with tuples for lists (hashable)."""
    types, ins, outs = (calls[c].tolist() for c in ("type", "input_shapes", "output_shapes"))
    if None not in ins and None not in outs:  # most traces: zipped in C
        return list(zip(types, map(tuple, ins), map(tuple, outs)))
    return [(t, None if i is None else tuple(i), None if o is None else tuple(o)) for t, i, o in zip(types, ins, outs)]


def _call_signature(head: tuple, kids: np.ndarray, edges: np.ndarray) -> int:
    """The signature of a call with children: its (type, input shapes, output shapes) as
    text, its children's signatures in order and the edges between them ((position of the
    producer, of the consumer, hash of the shape) rows) as bytes, lengths first."""
    digest = hashlib.blake2b(repr((*head, len(kids), len(edges))).encode(), digest_size=8)
    digest.update(kids.tobytes())
    digest.update(edges.tobytes())
    return int.from_bytes(digest.digest(), "little")


def _edges_inside(flow: Dataflow, parent: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dataflow's edges lifted to the direct children of the innermost call holding both
    ends, as (producer's position, consumer's position, shape's hash) rows grouped by that
    call in edge order, and per node where its rows start (``starts[node]:starts[node + 1]``)."""
    src, dst = np.asarray(flow.src, dtype=np.int64), np.asarray(flow.dst, dtype=np.int64)
    holder, a, b = parent[src], src.copy(), dst.copy()
    apart = np.flatnonzero(holder != parent[dst])  # not siblings (few): lifted in Python
    for e in apart.tolist():
        up_a, up_b = _under_common(flow.parent, flow.src[e], flow.dst[e])
        holder[e], a[e], b[e] = (flow.parent[up_a], up_a, up_b) if up_a >= 0 and up_b >= 0 else (-1, -1, -1)
    kept = np.flatnonzero(holder >= 0)
    kept = kept[np.argsort(holder[kept], kind="stable")]
    rows = np.stack([position[a[kept]], position[b[kept]], _text_hashes(flow.shape)[kept].view(np.int64)], axis=1)
    return rows, np.searchsorted(holder[kept], np.arange(len(parent) + 1))


def _signatures(
    flow: Dataflow, calls: pd.DataFrame, tree: tuple[list[list[int]], np.ndarray], leaf_call: np.ndarray
) -> list[int]:
    """Bottom-up (children have larger ids): a node's type, shapes, its children's signatures
    in order and its internal edges lifted to its direct children (`leaf_call`: per node,
    whether it is a call without children)."""
    n = len(flow.kind)
    children, position = tree
    parent = np.asarray(flow.parent, dtype=np.int64)
    heads = _heads(calls)
    # a leaf call (most calls) is its head's text alone (never equal to an op's: an op's second
    # item is a str); every distinct head written once
    leaves = np.flatnonzero(leaf_call)
    of_leaves = np.zeros(n, dtype=np.uint64)
    of_leaves[leaves] = _text_hashes(heads)[np.asarray(flow.call, dtype=np.int64)[leaves]]
    signature = of_leaves.tolist()  # the other nodes' filled in below
    rows, starts = _edges_inside(flow, parent, position)
    op_inputs: dict[int, list[tuple]] = {}
    if "op" in flow.kind:  # else no node's inputs are needed (only module calls)
        for d, shape in zip(flow.dst, flow.shape):
            op_inputs.setdefault(d, []).append(shape)
    hashes: dict[tuple, int] = {}  # of ops', inputs' and outputs' keys

    def hashed(key: tuple) -> int:
        try:
            h = hashes.get(key)
        except TypeError:  # unhashable (symbolic sizes): by its text alone
            return _hash_text(repr(key))
        if h is None:
            h = hashes[key] = _hash_text(repr(key))
        return h

    for node in np.flatnonzero(~leaf_call)[::-1].tolist():
        kind = flow.kind[node]
        if kind == "call":
            kids = np.array([signature[c] for c in children[node]], dtype=np.uint64)
            edges = rows[starts[node] : starts[node + 1]]
            signature[node] = _call_signature(heads[flow.call[node]], kids, edges)
        elif kind == "op":
            signature[node] = hashed(("op", flow.name[node], tuple(op_inputs.get(node, ()))))
        else:
            signature[node] = hashed((kind, flow.name[node]))
    return signature


def _under_common(parent: list[int], s: int, d: int) -> tuple[int, int]:
    """The two direct children of the innermost call holding both `s` and `d` that contain
    them, or -1s when no call holds both (inputs, outputs)."""
    chain = {}
    a = s
    prev = -1
    while a >= 0:
        chain[a] = prev
        prev, a = a, parent[a]
    b, prev = d, -1
    while b >= 0:
        if b in chain:
            return (chain[b], prev) if chain[b] >= 0 and prev >= 0 else (-1, -1)
        prev, b = b, parent[b]
    return -1, -1


def _folds(
    flow: Dataflow, layers: pd.DataFrame, params: pd.DataFrame | None, signature: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs of the tree's folds (``analyze/fold.py``) whose members ran once each, one after
    the other inside one call, with equal signatures: per node its run's first member (-1),
    its members (0) and its label (None)."""
    n = len(flow.kind)
    first, count = np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    label = np.full(n, None, dtype=object)
    is_call = list(map("call".__eq__, flow.kind))
    call_names = list(compress(flow.name, is_call))
    once = dict(zip(reversed(call_names), reversed(list(compress(range(n), is_call)))))  # name -> its first call
    if len(once) < len(call_names):  # some module ran more than once: not a member of a run
        for name, times in Counter(call_names).items():
            if times > 1:
                del once[name]
    names = layers["name"].tolist()
    sig, parent = np.array(signature, dtype=np.uint64), np.array(flow.parent, dtype=np.int64)
    for fold in fold_repeats(layers, params).first.values():
        found = list(map(once.get, map(names.__getitem__, fold.rows)))
        if None in found:
            continue
        nodes = np.array(found, dtype=np.int64)
        # runs of equal signatures in one call (equality is transitive: each against the one before)
        differs = (sig[nodes[1:]] != sig[nodes[:-1]]) | (parent[nodes[1:]] != parent[nodes[:-1]])
        cuts = [0, *(np.flatnonzero(differs) + 1).tolist(), len(found)]
        for a, b in pairwise(cuts):
            if b - a >= 2:
                head, _, start = names[fold.rows[a]].rpartition(".")
                stop = names[fold.rows[b - 1]].rpartition(".")[2]
                key = head.rpartition(".")[2]
                run = nodes[a:b]
                first[run], count[run], label[run] = (
                    found[a],
                    b - a,
                    f"{key + '.' if key else ''}{start}–{stop} ×{b - a}",
                )
    return first, count, label


def _same_as(n: int, blocks: list[int], signature: list[int], fold_first: list[int]) -> list[int]:
    """For a call with children (`blocks`, in order): the first earlier such call with the
    same signature, not in its own run (a block repeated elsewhere, or a module called twice)."""
    seen: dict[int, int] = {}
    out = [-1] * n
    for node in blocks:
        earlier = seen.setdefault(signature[node], node)
        if earlier != node and (fold_first[node] < 0 or fold_first[node] != fold_first[earlier]):
            out[node] = earlier
    return out


def _side_inputs(flow: Dataflow, fold_first: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Edges of tensors made outside a run and consumed inside two or more of its members."""
    side = np.zeros(len(src), dtype=bool)
    in_run = np.flatnonzero(fold_first >= 0)
    if not in_run.size:
        return side
    heads = fold_first[in_run]
    order = np.argsort(heads, kind="stable")
    in_run, heads = in_run[order], heads[order]  # each run's members side by side, in order
    bounds = np.flatnonzero(np.diff(heads)) + 1
    last = flow.last
    for starts in np.split(in_run, bounds):
        lo, hi = int(starts[0]), last[starts[-1]]
        by_tensor: dict[tuple[int, int], list[int]] = {}
        # the edges into the run from outside it, found by numpy: few of all the edges
        into = (lo <= dst) & (dst <= hi) & ~((lo <= src) & (src <= hi))
        for e in np.flatnonzero(into).tolist():
            by_tensor.setdefault((flow.src[e], flow.tensor[e]), []).append(e)
        for edges in by_tensor.values():
            if len(set(np.searchsorted(starts, dst[edges], side="right").tolist())) >= 2:
                side[edges] = True
    return side


def _constants(flow: Dataflow) -> list[bool]:
    """Op nodes no input reaches (masks, positions built inside the forward)."""
    if "op" not in flow.kind:  # only module calls (a plain stack of layers): none
        return [False] * len(flow.kind)
    out_edges: dict[int, list[int]] = {}
    for s, d in zip(flow.src, flow.dst):
        out_edges.setdefault(s, []).append(d)
    reached = [False] * len(flow.kind)
    todo = [i for i, k in enumerate(flow.kind) if k == "input"]
    while todo:
        i = todo.pop()
        if reached[i]:
            continue
        reached[i] = True
        todo += out_edges.get(i, [])
    return [k == "op" and not r for k, r in zip(flow.kind, reached)]


# ---- what the widget's Graph mode receives

_FLOW_COLOURS = (
    ("flops", "FLOPs"),
    ("backward_flops", "backward FLOPs"),
    ("activation_bytes", "activation bytes"),
    ("input_bytes", "input bytes"),
)
_LAYER_COLOURS = (("params", "parameters"), ("param_bytes", "parameter bytes"))


def _series_record(key: str, label: str, values: list, unit: str = "") -> dict | None:
    present = [float(v) for v in values if v is not None and np.isfinite(v)]
    if not present:
        return None
    lo, hi = min(present), max(present)
    # log where the values span orders of magnitude (FLOPs, bytes), linear for small counts
    scale = "diverging" if lo < 0 < hi else "log" if lo >= 0 and hi >= 1000 and hi > 100 * max(lo, 1) else "linear"
    return {"key": key, "label": label, "unit": unit, "scale": scale, "domain": [lo, hi], "values": values}


def colour_options(
    frames: Mapping[str, pd.DataFrame], nodes: pd.DataFrame, extra: Mapping[str, pd.Series] | None = None
) -> list[dict]:
    """Per graph node, every number the view can colour by: call figures from ``flow``,
    module figures from ``layers``, weight problems from ``health``, and `extra` (a user's
    ``pandas.Series`` by label, indexed by module path: a comparison's relative change, a
    training run's per-module change, anything).
    Op, input and output nodes have none (null)."""
    calls = nodes["call"].tolist()
    names = nodes["name"].tolist()
    is_call = [not is_missing(c) for c in calls]
    out: list[dict | None] = []
    flow = frames.get("flow")
    if flow is not None:
        for column, label in _FLOW_COLOURS:
            if column in flow and flow[column].notna().any():
                values = flow[column].astype("Float64").tolist()
                out.append(
                    _series_record(
                        column,
                        label,
                        [_num(values[int(c)]) if ok else None for c, ok in zip(calls, is_call)],
                        unit_of(column),
                    )
                )
        if "output_shapes" in flow:
            sizes = [
                sum(int(np.prod(s)) for s in shapes) if isinstance(shapes, (list, tuple)) else None
                for shapes in flow["output_shapes"].tolist()
            ]
            out.append(
                _series_record(
                    "output_size", "output elements", [sizes[int(c)] if ok else None for c, ok in zip(calls, is_call)]
                )
            )
    by_module: dict[str, pd.Series] = {}
    layers = frames.get("layers")
    if layers is not None:
        for column, label in _LAYER_COLOURS:
            if column in layers:
                by_module[label] = pd.Series(layers[column].to_numpy(), index=layers["name"].tolist())
    health = frames.get("health")
    if health is not None and {"name", "problems"} <= set(health.columns) and "kind" in health:
        mods = health[health["kind"] == "module"] if (health["kind"] == "module").any() else health
        count = [0 if is_missing(p) or not p else len(str(p).split(", ")) for p in mods["problems"].tolist()]
        by_module["problems"] = pd.Series(count, index=mods["name"].tolist())
    for label, series in {**by_module, **dict(extra or {})}.items():
        lookup = {str(k): v for k, v in series.items()}
        values = [_num(lookup.get(name)) if ok else None for name, ok in zip(names, is_call)]
        unit = "bytes" if "bytes" in label else ""
        out.append(_series_record(label.replace(" ", "_"), label, values, unit))
    return [r for r in out if r is not None]


def _num(v: Any) -> float | int | None:
    if v is None or is_missing(v):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not np.isfinite(f):
        return None
    return int(v) if isinstance(v, (int, np.integer)) else f


def graph_view(frames: Mapping[str, pd.DataFrame], colour_by: Mapping[str, pd.Series] | None = None) -> dict | None:
    """What the Graph mode draws (None without a traced dataflow): nodes and edges as
    JSON-ready columns, each call's flow row, and the colour options."""
    nodes, edges = frames.get("graph_nodes"), frames.get("graph")
    if nodes is None or edges is None:
        return None
    flow = frames["flow"]

    def ints(series: pd.Series) -> list[int]:
        return [-1 if is_missing(v) else int(v) for v in series.tolist()]

    call = ints(nodes["call"])
    types = flow["type"].tolist()
    outs = flow["output_shapes"].tolist()
    return {
        "nodes": {
            "kind": nodes["kind"].tolist(),
            "name": nodes["name"].tolist(),
            "type": [types[c] if c >= 0 else "" for c in call],
            "call": call,
            "parent": ints(nodes["parent"]),
            "last": ints(nodes["last"]),
            "const": [bool(v) for v in nodes["const"].tolist()],
            "signature": nodes["signature"].tolist(),
            "fold_first": ints(nodes["fold_first"]),
            "fold_count": [0 if is_missing(v) else int(v) for v in nodes["fold_count"].tolist()],
            "fold_label": [None if is_missing(v) else str(v) for v in nodes["fold_label"].tolist()],
            "same_as": ints(nodes["same_as"]),
            "params": [list(p) if isinstance(p, tuple) else None for p in nodes["params"].tolist()],
            "out_shapes": [
                [list(s) for s in outs[c]] if c >= 0 and isinstance(outs[c], (list, tuple)) else None for c in call
            ],
        },
        "edges": {
            "src": ints(edges["producer"]),
            "dst": ints(edges["consumer"]),
            "shape": [list(s) for s in edges["shape"].tolist()],
            "dtype": edges["dtype"].tolist(),
            "bytes": ints(edges["bytes"]),
            "via": [None if is_missing(v) else str(v) for v in edges["via"].tolist()],
            "side": [bool(v) for v in edges["side"].tolist()],
        },
        "colour": colour_options(frames, nodes, colour_by),
    }
