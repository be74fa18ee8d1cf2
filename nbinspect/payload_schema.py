"""The widget payload: every field the front-end reads, written once.

:func:`nbinspect.render.payload.build_payload` fills these fields from the frames (see
:mod:`nbinspect.schema`) and checks what it built against them; ``tests/generate_contract.py`` writes the
TypeScript types of ``js/src/payload.ts`` from them (a test keeps that file fresh), and the
front-end refuses a payload whose ``version`` is not :data:`PAYLOAD_VERSION`.

Tables travel as column arrays: entry i of every list of ``modules`` (or ``tensors``) describes
row i. A field with a ``when`` is present only when that data is: ``trace`` after a traced
forward pass, ``stats`` with weight statistics, ``note`` when a stats row has a note,
``compare`` for a comparison (with a top-level ``comparison``: both sides' names and the
per-component summary, :data:`COMPONENT_FIELDS`); ``folds`` lists the runs of repeated blocks
that show as one row, with what that row shows (:data:`FOLD_FIELDS`, decided in Python: the
front-end neither folds nor pools); the optional top-level ``timeline`` carries metrics over
training steps (nbinspect.track). To add a column: one :class:`Field` here (with ``source`` when it
is a frame column copied as is), ``make contract``, and one entry in ``js/src/columns.ts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALL_VALUES",
    "COMPONENT_FIELDS",
    "FOLD_FIELDS",
    "MATRICES",
    "MODULE_FIELDS",
    "PAYLOAD_VERSION",
    "TENSOR_FIELDS",
    "TOTALS_FIELDS",
    "Field",
    "check_payload",
    "typescript",
]

PAYLOAD_VERSION = 2
"""Bumped whenever a field changes meaning or goes away; the front-end checks it."""

MATRICES, ALL_VALUES = "weight matrices", "all values"
"""What a module's or a fold's histogram counts (``hist_scope``)."""


def _num(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in v)


def _hist(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"e", "c"} and all(map(_num, v["e"])) and _ints(v["c"])


# Entry types: name -> (TypeScript type, check of one JSON value).
TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "string": ("string", lambda v: isinstance(v, str)),
    "string?": ("string | null", lambda v: v is None or isinstance(v, str)),
    "int": ("number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "num?": ("Num", _num),
    "bool?": ("boolean | null", lambda v: v is None or isinstance(v, bool)),
    "shape?": ("number[] | null", lambda v: v is None or _ints(v)),
    "rows": ("number[]", _ints),
    "shapes?": ("Shape", lambda v: v is None or _ints(v) or (isinstance(v, list) and all(map(_ints, v)))),
    "attrs?": ("Record<string, unknown> | null", lambda v: v is None or isinstance(v, dict)),
    "stats?": ("Num[] | null", lambda v: v is None or (isinstance(v, list) and all(map(_num, v)))),
    "hist?": ("Hist | null", lambda v: v is None or _hist(v)),
    "compare?": (
        "[string | null, Num] | null",
        lambda v: v is None or (isinstance(v, list) and len(v) == 2 and TYPES["string?"][1](v[0]) and _num(v[1])),
    ),
}


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a key of TYPES: the type of one entry
    doc: str
    source: str | None = None  # the frame column it copies as is; None when build_payload computes it
    when: str | None = None  # None: always present; else "trace", "stats", "note" or "compare"


MODULE_FIELDS: tuple[Field, ...] = (
    Field("key", "string", "last segment of the dotted path ('' for the root)"),
    Field("parent", "int", "row of the parent module, -1 for the root"),
    Field("type", "string", "class name", "type"),
    Field("alias_of", "string?", "first path of the same module object if registered twice", "alias_of"),
    Field("params", "num?", "parameters in the subtree, shared storage once", "params"),
    Field("trainable", "num?", "subtree parameters with requires_grad", "trainable_params"),
    Field("frozen", "num?", "subtree parameters without requires_grad", "frozen_params"),
    Field("param_bytes", "num?", "bytes of subtree parameters, shared storage once", "param_bytes"),
    Field("buffer_bytes", "num?", "bytes of subtree buffers, shared storage once", "buffer_bytes"),
    Field("attrs", "attrs?", "layer hyperparameters; null when there are none"),
    Field("input_shapes", "shapes?", "shapes the module received (first call)", "input_shapes", "trace"),
    Field("output_shapes", "shapes?", "shapes the module returned (first call)", "output_shapes", "trace"),
    Field("flops", "num?", "FLOPs of all calls, subtree", "flops", "trace"),
    Field("activation_bytes", "num?", "bytes autograd saved for backward, subtree", "activation_bytes", "trace"),
    Field("stats", "stats?", "the stat_fields of the subtree's values, in that order", when="stats"),
    Field(
        "hist",
        "hist?",
        "coarse histogram of the subtree's weight matrices (parameters with 2+ dims, tied once), or of "
        "all its values when it has none: norm scales at 1.0 and zero biases would otherwise swamp it",
        when="stats",
    ),
    Field("hist_scope", "string?", "what `hist` counts: 'weight matrices' or 'all values'", when="stats"),
    Field("problems", "string?", "weight problems in the subtree (schema.HEALTH), comma-separated", when="stats"),
    Field("problem_tensors", "num?", "distinct tensors below with a problem", when="stats"),
    Field("note", "string?", "why statistics are missing or partial", when="note"),
    Field("cosine", "num?", "cosine similarity of a and b over the subtree", when="compare"),
    Field("max_abs_delta", "num?", "largest |b - a| in the subtree", when="compare"),
    Field("mean_drift", "num?", "mean(b) - mean(a) over the subtree", when="compare"),
    Field("differ", "num?", "tensors below whose status is not 'same'", when="compare"),
)

TENSOR_FIELDS: tuple[Field, ...] = (
    Field("module", "int", "row of the module holding the tensor"),
    Field("key", "string", "last segment of the dotted path"),
    Field("kind", "string", "'parameter' or 'buffer'", "kind"),
    Field("shape", "shape?", "shape; null for an uninitialized (lazy) parameter", "shape"),
    Field("dtype", "string?", "element type, e.g. 'float32'", "dtype"),
    Field("numel", "num?", "number of elements", "numel"),
    Field("bytes", "num?", "numel times element size", "bytes"),
    Field("requires_grad", "bool?", "whether the optimizer would train it", "requires_grad"),
    Field("tied_to", "string?", "first path holding the same storage; null if not shared", "tied_to"),
    Field("stats", "stats?", "the stat_fields of the tensor's values, in that order", when="stats"),
    Field("hist", "hist?", "coarse histogram of the values", when="stats"),
    Field("problems", "string?", "weight problems (schema.HEALTH), comma-separated; '' when healthy", when="stats"),
    Field("note", "string?", "why statistics are missing or partial", when="note"),
    Field("compare", "compare?", "[status, relative change] against the other side", when="compare"),
    Field("cosine", "num?", "cosine similarity of a and b", "cosine", "compare"),
    Field("max_abs_delta", "num?", "largest |b - a|", "max_abs_delta", "compare"),
    Field("mean_drift", "num?", "mean(b) - mean(a)", "mean_drift", "compare"),
    Field("hist_a", "hist?", "coarse histogram of the values in a", when="compare"),
    Field("hist_b", "hist?", "coarse histogram of the values in b (over the same range as hist_a)", when="compare"),
)

COMPONENT_FIELDS: tuple[Field, ...] = (
    Field("component", "string", "part of the network (attn.q, mlp.up, norm, ...)", "group"),
    Field("tensors", "num?", "tensor names in the component", "tensors"),
    Field("differ", "num?", "tensors whose status is not 'same'", "differ"),
    Field("rel_change", "num?", "‖Δ‖ / ‖a‖ over the component's compared elements", "rel_change"),
    Field("cosine", "num?", "cosine similarity of a and b over the component", "cosine"),
    Field("max_abs_delta", "num?", "largest |b - a|", "max_abs_delta"),
    Field("mean_drift", "num?", "mean(b) - mean(a)", "mean_drift"),
)
"""A comparison's per-component summary (``comparison.components``)."""

FOLD_FIELDS: tuple[Field, ...] = (
    Field("path", "string", "the fold row's path: its parent's path and the members' range, e.g. 'blocks.0–11'"),
    Field("label", "string", "the members' range and count, e.g. '0–11 ×12', as the text tree prints it"),
    Field("rows", "rows", "the members' rows in `modules`, first to last: consecutive siblings"),
    Field(
        "stats", "stats?", "the stat_fields of all the members' parameters pooled (shared storage once)", when="stats"
    ),
    Field(
        "hist",
        "hist?",
        "coarse histogram of the members' weight matrices taken together (or of all their values when "
        "they have none), as each member's own `hist`",
        when="stats",
    ),
    Field("hist_scope", "string?", "what `hist` counts: 'weight matrices' or 'all values'", when="stats"),
    Field("problems", "string?", "weight problems in the members (schema.HEALTH), comma-separated", when="stats"),
    Field("problem_tensors", "num?", "distinct tensors in the members with a problem", when="stats"),
)
"""Runs of at least two consecutive numbered siblings of equal structure (module types, child
names, tensor names, shapes, dtypes, trainability: ``analyze/fold.py``), one entry per fold in
the order of its first member; a fold inside a member's subtree has its own entry. The front-end
shows each as one collapsed row over its members; the members' counts (parameters, bytes,
FLOPs) it adds up itself, exact integers."""

TOTALS_FIELDS: tuple[Field, ...] = (
    Field("total_params", "num?", "unique parameter elements (shared storage once)"),
    Field("total_params_by_path", "num?", "every path counted, as naive counters do"),
    Field("trainable_params", "num?", "parameters with requires_grad"),
    Field("non_trainable_params", "num?", "parameters without requires_grad"),
    Field("param_bytes", "num?", "bytes of parameters, shared storage once"),
    Field("buffer_bytes", "num?", "bytes of buffers, shared storage once"),
    Field("num_modules", "num?", "distinct module objects, root included"),
)
"""The totals the front-end reads; the payload carries the inspection's other totals too."""

_TOP = ("version", "model", "totals", "stat_fields", "modules", "tensors", "folds")
_OPTIONAL_TOP = ("comparison", "timeline")  # comparison: {"a", "b", "components"}; timeline: nbinspect.track


def _check_timeline(timeline: Any) -> None:
    """``{"title": str, "steps": [int], "series": [{"key": str, "values": [num?] per step}]}``."""
    ok = (
        isinstance(timeline, Mapping)
        and set(timeline) == {"title", "steps", "series"}
        and isinstance(timeline["title"], str)
        and _ints(timeline["steps"])
        and isinstance(timeline["series"], list)
    )
    if not ok:
        raise ValueError(f"payload timeline: expected title, steps and series, got {timeline!r:.120}")
    for s in timeline["series"]:
        if not (isinstance(s, Mapping) and set(s) == {"key", "values"} and isinstance(s["key"], str)):
            raise ValueError(f"payload timeline.series: expected {{key, values}}, got {s!r:.120}")
        if len(s["values"]) != len(timeline["steps"]) or not all(map(_num, s["values"])):
            raise ValueError(f"payload timeline {s['key']!r}: need one number or null per step")


def _check_table(table: Any, fields: tuple[Field, ...], where: str, deep: bool) -> None:
    if not isinstance(table, Mapping):
        raise ValueError(f"payload {where}: expected an object of columns, got {type(table).__name__}")
    declared = {f.name: f for f in fields}
    unknown = sorted(set(table) - set(declared))
    if unknown:
        raise ValueError(f"payload {where}: columns {unknown} are not declared in nbinspect/payload_schema.py")
    missing = [f.name for f in fields if f.when is None and f.name not in table]
    if missing:
        raise ValueError(f"payload {where}: required columns {missing} are missing")
    lengths = {name: len(values) for name, values in table.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"payload {where}: columns differ in length: {lengths}")
    if deep:
        for name, values in table.items():
            ok = TYPES[declared[name].type][1]
            bad = next((i for i, v in enumerate(values) if not ok(v)), None)
            if bad is not None:
                raise ValueError(f"payload {where}.{name}[{bad}] = {values[bad]!r} is not {declared[name].type}")


def check_payload(payload: Mapping[str, Any], deep: bool = False) -> None:
    """Raise ValueError naming the first field of `payload` that breaks the contract: unknown or
    missing keys and columns, ragged tables, and with `deep` the type of every entry."""
    keys = sorted((set(payload) - set(_OPTIONAL_TOP)) ^ set(_TOP))
    if keys:
        raise ValueError(f"payload: top-level keys {keys} differ from {list(_TOP)}")
    if payload["version"] != PAYLOAD_VERSION:
        raise ValueError(f"payload: version {payload['version']!r} is not {PAYLOAD_VERSION}")
    _check_table(payload["modules"], MODULE_FIELDS, "modules", deep)
    _check_table(payload["tensors"], TENSOR_FIELDS, "tensors", deep)
    _check_table(payload["folds"], FOLD_FIELDS, "folds", deep)
    if "comparison" in payload:
        _check_table(payload["comparison"]["components"], COMPONENT_FIELDS, "comparison.components", deep)
    if "timeline" in payload:
        _check_timeline(payload["timeline"])
    if deep:
        for f in TOTALS_FIELDS:
            if not TYPES[f.type][1](payload["totals"].get(f.name)):
                raise ValueError(f"payload totals.{f.name} = {payload['totals'].get(f.name)!r} is not {f.type}")


def _ts(field: Field, column: bool) -> str:
    t = TYPES[field.type][0]
    return t if not column else f"{t}[]" if t.replace("[]", "").isidentifier() else f"({t})[]"


def _interface(name: str, doc: str, fields: tuple[Field, ...], column: bool, extra: str = "") -> str:
    lines = [f"/** {doc} */", f"export interface {name} {{"]
    for f in fields:
        when = f" Present with {f.when}." if f.when else ""
        lines.append(f"  /** {f.doc}.{when} */")
        lines.append(f"  {f.name}{'?' if f.when else ''}: {_ts(f, column)};")
    return "\n".join([*lines, *([extra] if extra else []), "}"])


def typescript() -> str:
    """The TypeScript module ``js/src/payload.ts``: these fields as types."""
    parts = [
        "// Generated from nbinspect/payload_schema.py by `make contract` (tests/generate_contract.py): do not edit.",
        f"\nexport const PAYLOAD_VERSION = {PAYLOAD_VERSION};",
        "\nexport type Num = number | null;",
        "\n/** Shapes: one shape, a list of shapes (one per output), or null. */",
        "export type Shape = number[] | number[][] | null;",
        "\n/** A histogram: counts `c`, and edges `e` (all c.length + 1 of them, or [lo, hi] when uniform). */",
        "export interface Hist {\n  e: number[];\n  c: number[];\n}",
        "\n" + _interface("ModuleColumns", "One entry per module, in pre-order.", MODULE_FIELDS, True),
        "\n" + _interface("TensorColumns", "One entry per parameter and buffer path.", TENSOR_FIELDS, True),
        "\n" + _interface("FoldColumns", "One entry per fold of repeated blocks.", FOLD_FIELDS, True),
        "\n"
        + _interface("ComponentColumns", "A comparison's summary, one entry per component.", COMPONENT_FIELDS, True),
        "\n" + _interface("Totals", "Whole-model totals.", TOTALS_FIELDS, False, "  [key: string]: unknown;"),
        "\n/** One metric over training steps: a number or null per step. */",
        "export interface TimelineSeries {\n  key: string;\n  values: Num[];\n}",
        "\n/** Metrics over training steps (nbinspect.track), drawn above the tree. */",
        "export interface Timeline {\n  title: string;\n  steps: number[];\n  series: TimelineSeries[];\n}",
        "\nexport interface Payload {",
        "  version: number;",
        "  model: { name: string; framework: string };",
        "  totals: Totals;",
        "  /** The statistics in each `stats` entry, in order. */",
        "  stat_fields: string[];",
        "  modules: ModuleColumns;",
        "  tensors: TensorColumns;",
        "  /** Repeated blocks shown as one row each (decided and pooled in Python). */",
        "  folds: FoldColumns;",
        "  /** Present for a comparison: the two sides' names and the per-component summary. */",
        "  comparison?: { a: string; b: string; components: ComponentColumns };",
        "  /** Present for nbinspect.track's live widget. */",
        "  timeline?: Timeline;",
        "}",
    ]
    return "\n".join(parts) + "\n"
