// The graph view's model: which nodes a view shows and which edges connect them, from the
// dataflow Python recorded (payload.graph). Pure index arithmetic: every decision (folds, side
// inputs, constants, signatures) was made in Python (analyze/graph.py); here a view is the set
// of expanded calls and unfolded runs, and each edge is lifted to the deepest visible ends.

import type { GraphData } from "./payload";

export interface Graph {
  data: GraphData;
  n: number;
  children: number[][];
  /** Top-level nodes: inputs, the root call(s), outputs. */
  top: number[];
  /** Call nodes with children (expandable). */
  expandable: boolean[];
  depth: number[];
  /** Whether the inputs come from more than one positional argument (see `inputLabel`). */
  severalPositional: boolean;
}

export interface ViewEdge {
  src: number;
  dst: number;
  shape: number[];
  dtype: string;
  bytes: number;
  /** Raw edges merged into this one. */
  count: number;
  via: string | null;
}

export interface SideStub {
  /** The visible consumer. */
  dst: number;
  /** The producer's name (module path or op). */
  from: string;
  shape: number[];
  dtype: string;
}

export interface GraphViewState {
  /** Expanded call nodes. */
  expanded: Set<number>;
  /** Runs (by first member) shown member by member. */
  unfolded: Set<number>;
}

export interface View {
  /** Visible nodes drawn as shapes, in id order. */
  nodes: number[];
  /** Expanded calls drawn as boxes around their children, in id order. */
  boxes: number[];
  /** The box (expanded call) each visible node or box sits in, -1 at the top. */
  box: Map<number, number>;
  edges: ViewEdge[];
  stubs: SideStub[];
  /** Constant ops hidden in this view. */
  hiddenConstants: number;
}

export function buildGraph(data: GraphData): Graph {
  const n = data.nodes.kind.length;
  const children: number[][] = Array.from({ length: n }, () => []);
  const top: number[] = [];
  const depth = new Array<number>(n).fill(0);
  for (let i = 0; i < n; i++) {
    const p = data.nodes.parent[i];
    if (p >= 0) {
      children[p].push(i);
      depth[i] = depth[p] + 1;
    } else top.push(i);
  }
  const expandable = children.map((kids, i) => data.nodes.kind[i] === "call" && kids.length > 0);
  const heads = new Set(
    data.nodes.name.filter((_, i) => data.nodes.kind[i] === "input").map((name) => name.split(".")[0]),
  );
  const severalPositional = [...heads].filter((head) => /^\d+$/.test(head)).length > 1;
  return { data, n, children, top, expandable, depth, severalPositional };
}

/** What an input node is called: its path names a keyword argument as it is ("input_ids",
 * "batch.mask"), but a positional one by its index ("0", "1.mask"), which reads as a number;
 * that becomes "input" ("input 0", "input 1" when `several` positional arguments are drawn).
 * render/graph_svg.py `_input_label` (the picture without JavaScript) says the same. */
export function inputLabel(path: string, several: boolean): string {
  const dot = path.indexOf(".");
  const head = dot < 0 ? path : path.slice(0, dot);
  if (!/^\d+$/.test(head)) return path;
  return (several ? `input ${head}` : "input") + (dot < 0 ? "" : path.slice(dot));
}

/** True for a member of a folded run other than its first (it is drawn as the first). */
export function hiddenMember(g: Graph, node: number, unfolded: Set<number>): boolean {
  const f = g.data.nodes.fold_first[node];
  return f >= 0 && f !== node && !unfolded.has(f);
}

/** The node `n` stands as in a view where hidden run members are drawn by their first member:
 * a node inside a hidden member maps to the node at the same offset inside the first one
 * (equal signatures: equal structure, so equal offsets). */
export function folded(g: Graph, node: number, unfolded: Set<number>): number {
  const { parent, fold_first } = g.data.nodes;
  let n = node;
  for (;;) {
    let member = -1;
    for (let a = n; a >= 0; a = parent[a]) if (hiddenMember(g, a, unfolded)) member = a; // outermost
    if (member < 0) return n;
    n = fold_first[member] + (n - member);
  }
}

/** The visible nodes and boxes of a view, and the box each one sits in. */
export function visible(g: Graph, s: GraphViewState): Pick<View, "nodes" | "boxes" | "box" | "hiddenConstants"> {
  const nodes: number[] = [];
  const boxes: number[] = [];
  const box = new Map<number, number>();
  let hiddenConstants = 0;
  const visit = (i: number, inBox: number) => {
    if (hiddenMember(g, i, s.unfolded)) return;
    if (g.data.nodes.const[i]) {
      hiddenConstants++;
      return;
    }
    box.set(i, inBox);
    if (g.expandable[i] && s.expanded.has(i)) {
      boxes.push(i);
      for (const c of g.children[i]) visit(c, i);
    } else nodes.push(i);
  };
  for (const t of g.top) visit(t, -1);
  nodes.sort((a, b) => a - b);
  boxes.sort((a, b) => a - b);
  return { nodes, boxes, box, hiddenConstants };
}

/** The deepest visible node that contains `node` (itself when visible). */
function lift(g: Graph, node: number, shown: Map<number, number>, unfolded: Set<number>): number {
  let n = folded(g, node, unfolded);
  while (n >= 0 && !shown.has(n)) n = g.data.nodes.parent[n];
  return n;
}

/** The run (first member) and member a node lies in, innermost run first; for edges inside one run. */
function runMember(g: Graph, node: number): [number, number] {
  const { parent, fold_first } = g.data.nodes;
  for (let a = node; a >= 0; a = parent[a]) if (fold_first[a] >= 0) return [fold_first[a], a];
  return [-1, -1];
}

export function view(g: Graph, s: GraphViewState): View {
  const v = visible(g, s);
  const e = g.data.edges;
  const merged = new Map<string, ViewEdge>();
  const stubs: SideStub[] = [];
  const stubSeen = new Set<string>();
  for (let i = 0; i < e.src.length; i++) {
    const rs = e.src[i];
    const rd = e.dst[i];
    if (g.data.nodes.const[rs] || g.data.nodes.const[rd]) continue;
    const [runS, memberS] = runMember(g, rs);
    const [runD, memberD] = runMember(g, rd);
    // between two members of a folded run: the run is drawn once, the chain between members is the "×N"
    if (runS >= 0 && runS === runD && memberS !== memberD && !s.unfolded.has(runS)) continue;
    const src = lift(g, rs, v.box, s.unfolded);
    const dst = lift(g, rd, v.box, s.unfolded);
    if (src < 0 || dst < 0 || src === dst) continue;
    if (e.side[i]) {
      const key = `${src}|${dst}`;
      if (!stubSeen.has(key)) {
        stubSeen.add(key);
        stubs.push({ dst, from: fullName(g, src), shape: e.shape[i], dtype: e.dtype[i] });
      }
      continue;
    }
    const key = `${src}|${dst}`;
    const had = merged.get(key);
    if (had) {
      had.count++;
      had.bytes += e.bytes[i];
    } else
      merged.set(key, {
        src,
        dst,
        shape: e.shape[i],
        dtype: e.dtype[i],
        bytes: e.bytes[i],
        count: 1,
        via: e.via[i],
      });
  }
  return { ...v, edges: [...merged.values()], stubs };
}

/** The full name: module path of a call, function name of an op, path of an output,
 * `inputLabel` of an input (tooltips, side-input stubs). */
export function fullName(g: Graph, node: number): string {
  const d = g.data.nodes;
  return d.kind[node] === "input" ? inputLabel(d.name[node], g.severalPositional) : d.name[node];
}

/** Module path of a call, function name of an op, path of an output, `inputLabel` of an input. */
export function label(g: Graph, node: number, unfolded: Set<number>): string {
  const d = g.data.nodes;
  if (d.kind[node] === "call") {
    const name = d.name[node];
    const fold = d.fold_first[node] === node && !unfolded.has(node) ? d.fold_label[node] : null;
    if (fold) return fold;
    const parts = name.split(".");
    const key = parts[parts.length - 1];
    if (name === "") return "(root)";
    return /^\d+$/.test(key) && parts.length > 1 ? parts.slice(-2).join(".") : key; // "layers.3", not "3"
  }
  return fullName(g, node);
}

/** Shape as "[1, 128, 4096]". */
export function shapeText(shape: number[] | null | undefined): string {
  return shape ? `[${shape.join(", ")}]` : "";
}
