"""A static SVG of the top-level dataflow graph, for where the widget cannot run (a saved
notebook on GitHub, a page without JavaScript): the view the Graph mode opens with (the root
expanded, and its only expandable child while there is one; repeated blocks folded; constants
hidden), laid out in Python: ranks by longest path from the inputs, order within a rank by
two barycentre sweeps, fixed node sizes. Reads the payload's ``graph`` (plain data)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["graph_svg"]

_W, _H, _GAP_X, _GAP_Y, _CHAR = 150, 34, 24, 46, 6.6


def _initial_view(nodes: Mapping[str, list]) -> tuple[list[int], dict[int, int]]:
    """The nodes the first view draws, and each node's drawn stand-in (-1: not drawn)."""
    kind, parent, fold_first, const = nodes["kind"], nodes["parent"], nodes["fold_first"], nodes["const"]
    n = len(kind)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, p in enumerate(parent):
        if p >= 0:
            children[p].append(i)
    expanded: set[int] = set()
    todo = [i for i in range(n) if parent[i] < 0 and children[i]]
    roots = list(todo)
    while len(todo) == 1:
        expanded.add(todo[0])
        todo = [k for k in children[todo[0]] if children[k] and fold_first[k] < 0]
    expanded.update(roots)
    drawn: list[int] = []

    def visit(i: int) -> None:
        if const[i] or (fold_first[i] >= 0 and fold_first[i] != i):
            return
        if i in expanded:
            for c in children[i]:
                visit(c)
        else:
            drawn.append(i)

    for i in range(n):
        if parent[i] < 0:
            visit(i)
    shown = set(drawn)
    stand_in: dict[int, int] = {}
    for i in range(n):
        a = i
        while a >= 0 and a not in shown:  # up to the drawn ancestor; a folded member stands as its run
            f = fold_first[a]
            a = f if f >= 0 and f != a and f in shown else parent[a]
        stand_in[i] = a
    return sorted(drawn), stand_in


def _input_label(path: str, several: bool) -> str:
    """What an input node is called: its path names a keyword argument as it is
    ("input_ids", "batch.mask"), but a positional one by its index ("0", "1.mask"), which reads
    as a number; that becomes "input" ("input 0", "input 1" when `several` positional
    arguments are drawn). js/src/graphModel.ts ``inputLabel`` says the same."""
    head, dot, rest = path.partition(".")
    if not head.isdigit():
        return path
    return (f"input {head}" if several else "input") + dot + rest


def _several_positional(nodes: Mapping[str, list]) -> bool:
    """Whether the inputs come from more than one positional argument."""
    heads = {n.partition(".")[0] for k, n in zip(nodes["kind"], nodes["name"]) if k == "input"}
    return sum(h.isdigit() for h in heads) > 1


def _label(nodes: Mapping[str, list], i: int, several: bool) -> tuple[str, str]:
    if nodes["kind"][i] == "input":
        return _input_label(nodes["name"][i], several), ""
    if nodes["kind"][i] != "call":
        return nodes["name"][i], ""
    if nodes["fold_first"][i] == i and nodes["fold_label"][i]:
        return nodes["fold_label"][i], nodes["type"][i]
    name = nodes["name"][i]
    return (name.rsplit(".", 1)[-1] or "(root)"), nodes["type"][i]


def graph_svg(graph: Mapping[str, Any], title: str = "") -> str:
    """The first view of the Graph mode as an SVG document."""
    nodes, edges = graph["nodes"], graph["edges"]
    drawn, stand_in = _initial_view(nodes)
    pairs: dict[tuple[int, int], str] = {}
    for s, d, shape, dtype, side in zip(edges["src"], edges["dst"], edges["shape"], edges["dtype"], edges["side"]):
        a, b = stand_in.get(s, -1), stand_in.get(d, -1)
        if a >= 0 and b >= 0 and a != b and not side and not nodes["const"][s]:
            pairs.setdefault((a, b), f"[{', '.join(map(str, shape))}] {dtype}")
    rank = dict.fromkeys(drawn, 0)
    for _ in range(len(drawn)):  # longest path (ids are in creation order: nearly topological)
        changed = False
        for a, b in pairs:
            if rank[b] < rank[a] + 1 <= len(drawn):
                rank[b], changed = rank[a] + 1, True
        if not changed:
            break
    rows: dict[int, list[int]] = {}
    for i in drawn:
        rows.setdefault(rank[i], []).append(i)
    order = {i: k for row in rows.values() for k, i in enumerate(row)}
    for _ in range(2):  # two top-down barycentre sweeps
        for r in sorted(rows):
            ins = {i: [order[a] for a, b in pairs if b == i and rank[a] < r] for i in rows[r]}
            rows[r].sort(key=lambda i: sum(ins[i]) / len(ins[i]) if ins[i] else order[i])
            order.update({i: k for k, i in enumerate(rows[r])})
    widest = max(len(r) for r in rows.values()) if rows else 1
    width: float = widest * (_W + _GAP_X) + _GAP_X
    pos: dict[int, tuple[float, float]] = {}
    for r in sorted(rows):  # under the mean of its producers, pushed right past its left neighbour
        row = rows[r]
        offset = (width - len(row) * (_W + _GAP_X) + _GAP_X) / 2
        left = 0.0
        for k, i in enumerate(row):
            xs = [pos[a][0] for a, b in pairs if b == i and a in pos]
            x = max(left, sum(xs) / len(xs) if xs else offset + k * (_W + _GAP_X))
            pos[i] = (x, 20 + r * (_H + _GAP_Y))
            left = x + _W + _GAP_X
    width = max(width, max((x for x, _ in pos.values()), default=0) + _W + _GAP_X)
    height = 20 + (max(rows) + 1 if rows else 1) * (_H + _GAP_Y)
    esc = html.escape
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="monospace" font-size="11">',
        f"<title>{esc(title or 'dataflow')}</title>",
        '<defs><marker id="a" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#666"/></marker></defs>',
        # a light card under the drawing, as the saved curves' image has: the picture cannot
        # follow the reader's theme, and its grey edge labels were unreadable on a dark page
        f'<rect x="0.5" y="0.5" width="{width - 1:.0f}" height="{height - 1:.0f}" rx="8" '
        'fill="#fff" stroke="#c4c4c4"/>',
    ]
    labels = []  # drawn after every edge, each on a halo: an edge crossing a label passes under it
    for (a, b), text in pairs.items():
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x1, y1, x2, y2 = xa + _W / 2, ya + _H, xb + _W / 2, yb
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + 20:.1f} {x2:.1f},{y2 - 20:.1f} {x2:.1f},{y2:.1f}" '
            'fill="none" stroke="#888" marker-end="url(#a)"/>'
        )
        labels.append(
            f'<text x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2 + 3:.1f}" font-size="9" fill="#666" '
            f'stroke="#fff" stroke-width="3" paint-order="stroke">{esc(text)}</text>'
        )
    out += labels
    several = _several_positional(nodes)
    for i in drawn:
        x, y = pos[i]
        name, kind_type = _label(nodes, i, several)
        kind = nodes["kind"][i]
        fill = {"call": "#fff", "op": "#eee"}.get(kind, "#dbe9f8")
        rx = 5 if kind == "call" else _H / 2
        if nodes["fold_first"][i] == i and nodes["fold_label"][i]:
            out.append(f'<rect x="{x + 4}" y="{y + 4}" width="{_W}" height="{_H}" rx="5" fill="#eee" stroke="#999"/>')
        out.append(f'<rect x="{x}" y="{y}" width="{_W}" height="{_H}" rx="{rx}" fill="{fill}" stroke="#666"/>')
        cy = y + (14 if kind_type else 21)
        out.append(f'<text x="{x + _W / 2}" y="{cy}" text-anchor="middle" fill="#222">{esc(name[:22])}</text>')
        if kind_type:
            out.append(
                f'<text x="{x + _W / 2}" y="{y + 27}" text-anchor="middle" font-size="9.5" fill="#666">'
                f"{esc(kind_type[:26])}</text>"
            )
    out.append("</svg>")
    return "".join(out)
