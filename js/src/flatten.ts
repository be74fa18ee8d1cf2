// The tree model, part 2: which rows are visible, in which order. Pure: no DOM.
// Sorting orders siblings within their parent (the tree stays a tree); the flat modes
// list leaf modules or tensors, sorted globally.

import type { Tree, TreeNode } from "./tree";

export type Value = number | string | null;
export type ValueOf = (n: TreeNode) => Value;
export type Mode = "tree" | "leaves" | "tensors";

export interface Sort {
  value: ValueOf;
  descending: boolean;
}

/** What decides which rows show, in which order. */
export interface RowOptions {
  expanded: Set<number>;
  sort: Sort | null;
  query: string;
  mode: Mode;
  /** Only rows with weight problems (and the rows above them). */
  problemsOnly?: boolean;
}

export interface Row {
  id: number;
  /** aria-level: 1 for the top row. */
  level: number;
  expandable: boolean;
  expanded: boolean;
}

/** Ascending or descending by `value`; missing values last either way; ties keep tree order. */
export function comparator(value: ValueOf, descending: boolean): (a: TreeNode, b: TreeNode) => number {
  const sign = descending ? -1 : 1;
  return (a, b) => {
    const x = value(a);
    const y = value(b);
    if (x === null || y === null) return x === y ? a.id - b.id : x === null ? 1 : -1;
    const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return c === 0 || Number.isNaN(c) ? a.id - b.id : sign * c;
  };
}

/** 2 for a node whose path or type contains `query` (case-insensitive) and, with
 * `problemsOnly`, that has a weight problem; 1 for an ancestor of one, 0 otherwise; all 2 for
 * an empty query without `problemsOnly`. Folds never match themselves. */
export function matches(tree: Tree, query: string, problemsOnly = false): Uint8Array {
  const q = query.trim().toLowerCase();
  const out = new Uint8Array(tree.nodes.length);
  if (!q && !problemsOnly) return out.fill(2);
  const visit = (id: number): boolean => {
    const n = tree.nodes[id];
    let below = false;
    for (const c of n.children) below = visit(c) || below;
    const self =
      n.kind !== "group" &&
      (!problemsOnly || n.problems !== null) &&
      (n.path.toLowerCase().includes(q) || n.type.toLowerCase().includes(q));
    out[id] = self ? 2 : below ? 1 : 0;
    return out[id] > 0;
  };
  visit(tree.root);
  return out;
}

function sortedChildren(tree: Tree, n: TreeNode, sort: Sort | null): number[] {
  if (!sort) return n.children;
  const cmp = comparator(sort.value, sort.descending);
  return n.children
    .map((id) => tree.nodes[id])
    .sort(cmp)
    .map((c) => c.id);
}

/** The visible rows for a view state. While a query is set, only matches and their
 * ancestors show, ancestors expanded. */
export function flatten(tree: Tree, state: RowOptions): Row[] {
  const hit = matches(tree, state.query, state.problemsOnly);
  const filtering = state.query.trim() !== "" || !!state.problemsOnly;
  if (state.mode !== "tree") {
    const picked = tree.nodes.filter(
      (n) =>
        hit[n.id] === 2 &&
        (state.mode === "tensors"
          ? n.kind === "tensor"
          : n.kind === "module" && !n.children.some((c) => tree.nodes[c].kind !== "tensor")),
    );
    if (state.sort) picked.sort(comparator(state.sort.value, state.sort.descending));
    return picked.map((n) => ({ id: n.id, level: 1, expandable: false, expanded: false }));
  }
  const rows: Row[] = [];
  const walk = (id: number, level: number) => {
    const n = tree.nodes[id];
    const kids = filtering ? n.children.filter((c) => hit[c] > 0) : n.children;
    const open = filtering ? kids.length > 0 : state.expanded.has(id);
    rows.push({ id, level, expandable: kids.length > 0, expanded: open && kids.length > 0 });
    if (!open) return;
    for (const c of sortedChildren(tree, n, state.sort)) if (!filtering || hit[c] > 0) walk(c, level + 1);
  };
  if (hit[tree.root] > 0) walk(tree.root, 1);
  return rows;
}

/** Modules shallower than `depth` expanded (so rows down to module depth `depth` show);
 * folds stay folded. */
export function expandedToDepth(tree: Tree, depth: number): Set<number> {
  const out = new Set<number>();
  for (const n of tree.nodes) if (n.kind === "module" && n.depth < depth && n.children.length) out.add(n.id);
  return out;
}

/** Every node with children expanded, folds included. */
export function expandedAll(tree: Tree): Set<number> {
  const out = new Set<number>();
  for (const n of tree.nodes) if (n.children.length) out.add(n.id);
  return out;
}

/** The row ids of the ancestors of `id`, nearest first. */
export function ancestors(tree: Tree, id: number): number[] {
  const out: number[] = [];
  for (let p = tree.nodes[id].parent; p >= 0; p = tree.nodes[p].parent) out.push(p);
  return out;
}
