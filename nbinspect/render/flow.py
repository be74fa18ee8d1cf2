"""Text views of a traced forward pass (the ``flow`` frame) and of a training-memory plan."""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pandas as pd

from .display import DisplayFrame, html_table
from .format import format_bytes, format_count, format_flops, format_percent, format_shape, is_missing
from .text import _tree_prefixes, table

__all__ = ["TextFrame", "flow_text", "memory_html", "memory_text"]


class TextFrame(DisplayFrame):
    """A DataFrame that ``print()`` shows as nbinspect's text view and a notebook as a
    readable table (its own HTML view when it has one); everything else (``to_string``,
    slicing, which returns a plain DataFrame) is pandas as usual."""

    _metadata: ClassVar[list[str]] = ["_render", "_html"]

    @classmethod
    def wrap(
        cls,
        frame: pd.DataFrame,
        render: Callable[[pd.DataFrame], str],
        html: Callable[[pd.DataFrame], str] | None = None,
    ) -> TextFrame:
        out = cls(frame)
        out._render, out._html = render, html
        return out

    def __str__(self) -> str:
        return self._render(pd.DataFrame(self))

    def _repr_html_(self) -> str | None:
        html = getattr(self, "_html", None)
        return html(pd.DataFrame(self)) if html is not None else super()._repr_html_()


def _io_lines(records: list[dict] | None) -> list[list[str]]:
    rows = []
    for r in records or []:
        if "shape" in r:
            rows.append(["  " + r["path"], format_shape(r["shape"]), r["dtype"]])
        else:
            rows.append(["  " + r["path"], "", r.get("type", "")])
    return rows


_Call = namedtuple(
    "_Call", "name parent depth type call status input_shapes output_shapes flops activation_bytes"
)  # the flow columns the text shows


def flow_text(
    flow: pd.DataFrame, io: Mapping[str, Any], totals: Mapping[str, Any], title: str = "", depth: int | None = None
) -> str:
    """Inputs, then every module call in order (nested as it ran) with its shapes, FLOPs and
    saved bytes, then outputs and the totals. `depth` hides calls nested deeper."""
    tree = pd.DataFrame(
        {
            "name": flow["index"].astype(str),
            "parent": [None if is_missing(p) else str(p) for p in flow["parent"].tolist()],
            "depth": flow["depth"],
        }
    )
    prefixes = _tree_prefixes(tree)
    names = flow["name"].tolist()
    rows = []
    called = map(_Call._make, zip(*(flow[c].tolist() for c in _Call._fields)))  # not a pandas row at a time: slower
    for prefix, r in zip(prefixes, called):
        if depth is not None and r.depth > depth:
            continue
        outer = "" if is_missing(r.parent) else names[r.parent]
        local = r.name[len(outer) + 1 :] if outer and r.name.startswith(outer + ".") else r.name
        label = prefix + (local or title or r.type)
        kind = r.type + (f" (call {r.call + 1})" if r.call else "")
        out = format_shape(r.output_shapes) if r.status == "ok" else r.status.upper()
        flops = "-" if r.flops == 0 else format_flops(r.flops)  # 0: nothing the counter counts ran here
        rows.append([label, kind, format_shape(r.input_shapes), out, flops, format_bytes(r.activation_bytes)])
    calls = table(["Call", "Type", "Input", "Output", "FLOPs", "Saved"], rows, [False, False, False, False, True, True])
    inputs = table(["Inputs", "Shape", "Dtype"], _io_lines(io.get("input")), [False, False, False])
    parts = [f"{title} forward pass: {len(flow)} module calls" if title else f"Forward pass: {len(flow)} module calls"]
    parts += [inputs, calls]
    if io.get("output") is not None:
        parts.append(table(["Outputs", "Shape", "Dtype"], _io_lines(io.get("output")), [False, False, False]))
    parts.append(_totals_text(totals))
    return "\n\n".join(parts)


def _totals_text(totals: Mapping[str, Any]) -> str:
    f = totals.get("flops")
    lines = (
        [] if is_missing(f) else [f"FLOPs (forward): {format_count(f)} ({format_flops(f)}); - where none were counted"]
    )
    if not is_missing(totals.get("backward_flops")):
        b = totals["backward_flops"]
        lines.append(f"FLOPs (backward): {format_count(b)} ({format_flops(b)})")
    lines.append(f"Saved for backward: {format_bytes(totals.get('activation_bytes'))}")
    if totals.get("fake_tensors"):
        lines.append("Ran on fake tensors (shapes only): sizes are what a real run would hold; nothing was allocated.")
    if totals.get("flops_note"):
        lines.append(totals["flops_note"])
    return "\n".join(lines)


_MODULE_HEADER = ["Module", "Size", "Repeats"]
_PLAN_HEADER = (["Component", "Size", "Bytes", "Share", "How"], [False, True, True, True, False])


def _plan_label(row: Any) -> str:
    """A component, or an input's name indented under 'inputs' (a plan without the column is older)."""
    name = getattr(row, "input", None)
    return row.component if name is None or is_missing(name) else f"  {name}"


def _plan_rows(memory: pd.DataFrame) -> list[list[str]]:
    """The whole-model rows, the total last (it sums the rows above it)."""
    whole = memory[memory["layer"].isna()]
    return [
        [_plan_label(r), format_bytes(r.bytes), format_count(r.bytes), format_percent(r.share, 100), r.note]
        for r in whole.itertuples(index=False)
    ]


_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)")


def _index_range(indices: list[int]) -> str:
    """[0, 1, 2, 5] -> '0–2,5'."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def _repeats(sums: pd.Series) -> list[tuple[str, int, int]]:
    """(label, count, bytes each) per group of modules that differ only in their first index and
    hold the same bytes ('blocks.0–7.mlp.down_proj', 8, …), largest total first; others alone."""
    groups: dict[tuple[str, int], list[tuple[str, int | None]]] = {}
    for name, n in sums.items():
        m = _INDEX.search(name)  # the first index: the block's
        if m is not None:
            key = (name[: m.start()] + "#" + name[m.end() :], int(n))
            groups.setdefault(key, []).append((name, int(m.group())))
        else:
            groups.setdefault((name, int(n)), []).append((name, None))
    out = []
    for (pattern, n), members in groups.items():
        if len(members) > 1 and all(i is not None for _, i in members):
            label = pattern.replace("#", _index_range([i for _, i in members if i is not None]))
            out.append((label, len(members), n))
        else:
            out += [(name, 1, n) for name, _ in members]
    return sorted(out, key=lambda g: -g[1] * g[2])


def _top_modules(memory: pd.DataFrame, top: int | None) -> tuple[str, list[list[str]]] | None:
    """(title, rows) of the `top` modules holding most, repeated blocks as one row, or of every
    module when `top` is None."""
    per_module = memory[memory["layer"].notna()]
    if not len(per_module):
        return None
    sums = per_module.groupby("layer", sort=False)["bytes"].sum().sort_values(ascending=False, kind="stable")
    if top is None:
        return f"Memory by module ({len(sums)})", [[name or "(root)", format_bytes(n)] for name, n in sums.items()]
    groups = _repeats(sums)[:top]
    lines = [
        [label or "(root)", format_bytes(count * each), f"×{count}, {format_bytes(each)} each" if count > 1 else ""]
        for label, count, each in groups
    ]
    return f"Modules holding the most (top {len(lines)} of {len(sums)}, repeated blocks as one row)", lines


def memory_text(memory: pd.DataFrame, top: int | None = 10) -> str:
    """The whole-model rows of a memory plan in human units, then the `top` modules holding
    most (every module when `top` is None)."""
    header, right = _PLAN_HEADER
    parts = ["Training memory plan\n" + table(header, _plan_rows(memory), right)]
    modules = _top_modules(memory, top)
    if modules is not None:
        parts.append(modules[0] + "\n" + table(_MODULE_HEADER, modules[1], [False, True, False]))
    return "\n\n".join(parts)


def memory_html(memory: pd.DataFrame, top: int = 10) -> str:
    """The notebook view of a memory plan: each component in human units, the total last,
    then the modules holding the most."""
    header, right = _PLAN_HEADER
    parts = [html_table(header, _plan_rows(memory), right, "Training memory plan")]
    modules = _top_modules(memory, top)
    if modules is not None:
        parts.append(html_table(_MODULE_HEADER, modules[1], [False, True, False], modules[0]))
    return "<div>" + "<br>".join(parts) + "</div>"
