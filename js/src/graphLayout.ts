// Layout of a graph view with dagre, composed: each expanded call (a box) is laid out on its
// own, its direct children as nodes (a child box is one node of its own layout's size) and IN /
// OUT ports for the edges that cross its border; boxes are laid out bottom-up and placed
// top-down. Equal boxes (same Python signature, same expansion inside, same edges) share one
// layout from a cache, so 80 unfolded layers cost one layout, and an expand re-lays out only
// the box that changed and its ancestors. Measured in benchmarks/bench_graph_layout.mjs.

import dagre from "@dagrejs/dagre";
import { type Graph, label, shapeText, type View } from "./graphModel";

export interface Point {
  x: number;
  y: number;
}

/** Top-left corner and size, in SVG units. */
export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Layout {
  /** Every visible node and box. */
  rects: Map<number, Rect>;
  /** Polylines of edges laid out between two nodes of one box, by "src|dst". */
  routes: Map<string, Point[]>;
  /** Where dagre made room for each such edge's label, by "src|dst". */
  labels: Map<string, Point>;
  width: number;
  height: number;
  /** Box layouts computed (not cache hits) in this call. */
  computed: number;
}

interface BoxLayout {
  w: number;
  h: number;
  /** Centre of each child, by offset from the box's id ("IN"/"OUT" for the ports). */
  pos: Map<string, Point>;
  size: Map<string, { w: number; h: number }>;
  points: Map<string, Point[]>;
  labels: Map<string, Point>;
}

export const PAD = 10;
export const BOX_HEADER = 22;
const CHAR = 6.6;

/** Size of a drawn node: calls two lines (name, type), ops and ends one. */
export function nodeSize(g: Graph, node: number, unfolded: Set<number>, stub = ""): { w: number; h: number } {
  const kind = g.data.nodes.kind[node];
  const text = label(g, node, unfolded);
  const extra = stub ? STUB_LINE : 0; // side inputs: one more line inside the node
  const stubW = stub ? Math.round(stub.length * CHAR * 0.85) + 16 : 0;
  if (kind === "call") {
    const chars = Math.max(text.length, g.data.nodes.type[node].length);
    return { w: Math.max(84, stubW, Math.round(chars * CHAR) + (g.expandable[node] ? 34 : 22)), h: 36 + extra };
  }
  return { w: Math.max(40, stubW, Math.round(text.length * CHAR) + 18), h: 22 + extra };
}

export const STUB_LINE = 13;

/** The text of a node's side-input stubs ("← rotary_emb [1, 128, 128]"), "" for none. */
export function stubText(v: View, node: number): string {
  const from = v.stubs.filter((s) => s.dst === node).map((s) => `${s.from.split(".").pop()} ${shapeText(s.shape)}`);
  return from.length ? `← ${[...new Set(from)].join(", ")}` : "";
}

export class GraphLayout {
  private cache = new Map<string, BoxLayout>();
  /** Box layouts kept between views. */
  get cached(): number {
    return this.cache.size;
  }

  layout(g: Graph, v: View, unfolded: Set<number>, expanded: Set<number>, labels: boolean): Layout {
    const isBox = new Set(v.boxes);
    const drawn = new Set(v.nodes);
    const members = new Map<number, number[]>(); // box -> direct children (nodes and boxes)
    for (const [item, box] of v.box) {
      if (!drawn.has(item) && !isBox.has(item)) continue;
      const list = members.get(box) ?? [];
      members.set(box, list);
      list.push(item);
    }
    for (const list of members.values()) list.sort((a, b) => a - b);
    // each edge laid out in the innermost box holding both ends, through ports below it
    const boxEdges = new Map<number, [string, string, string][]>();
    const seen = new Set<string>();
    const add = (box: number, a: string, b: string, text: string) => {
      const id = `${box}|${a}|${b}`; // once per pair: the key of equal boxes must not count their outside
      if (seen.has(id)) return;
      seen.add(id);
      const list = boxEdges.get(box) ?? [];
      boxEdges.set(box, list);
      list.push([a, b, text]);
    };
    const rel = (box: number, item: number) => String(item - Math.max(box, 0));
    const chain = (item: number) => {
      const out = [item];
      for (let b = v.box.get(item) ?? -1; b >= 0; b = v.box.get(b) ?? -1) out.push(b);
      out.push(-1);
      return out;
    };
    for (const e of v.edges) {
      const cs = chain(e.src);
      const cd = chain(e.dst);
      const inS = new Set(cs.slice(1));
      let j = 1;
      while (!inS.has(cd[j])) j++;
      const common = cd[j];
      const i = cs.indexOf(common);
      const text = labels ? edgeText(e.shape, e.dtype) : "";
      add(common, rel(common, cs[i - 1]), rel(common, cd[j - 1]), text);
      for (let k = 1; k < i; k++) add(cs[k], rel(cs[k], cs[k - 1]), "OUT", "");
      for (let k = 1; k < j; k++) add(cd[k], "IN", rel(cd[k], cd[k - 1]), "");
    }
    const stubs = new Map<number, string>();
    for (const st of v.stubs) if (!stubs.has(st.dst)) stubs.set(st.dst, stubText(v, st.dst));
    const stubbed = new Set(stubs.keys());
    let computed = 0;
    const sizes = new Map<number, { w: number; h: number }>();
    const layouts = new Map<number, BoxLayout>();
    const solve = (box: number): BoxLayout => {
      const kids = members.get(box) ?? [];
      for (const k of kids) if (isBox.has(k)) solve(k);
      const edges = boxEdges.get(box) ?? [];
      const key =
        box < 0
          ? ""
          : `${g.data.nodes.signature[box]}|${labels}|${inner(box, g, expanded)}|${inner(box, g, unfolded)}|${inner(box, g, stubbed)}|${edges.map((e) => e.join(">")).join(",")}`;
      let hit = key ? this.cache.get(key) : undefined;
      if (!hit) {
        hit = dagreBox(
          kids.map((k) => [rel(box, k), sizes.get(k) ?? nodeSize(g, k, unfolded, stubs.get(k))]),
          edges,
          box >= 0 ? Math.round((label(g, box, unfolded).length + g.data.nodes.type[box].length + 4) * CHAR) + 16 : 0,
        );
        computed++;
        if (key) this.cache.set(key, hit);
      }
      layouts.set(box, hit);
      sizes.set(box, { w: hit.w, h: hit.h });
      return hit;
    };
    const top = solve(-1);
    // place top-down
    const rects = new Map<number, Rect>();
    const routes = new Map<string, Point[]>();
    const labelAt = new Map<string, Point>();
    const place = (box: number, ox: number, oy: number) => {
      const l = layouts.get(box);
      if (!l) return;
      for (const k of members.get(box) ?? []) {
        const p = l.pos.get(rel(box, k));
        const s = l.size.get(rel(box, k));
        if (!p || !s) continue;
        const r = { x: ox + p.x - s.w / 2, y: oy + p.y - s.h / 2, w: s.w, h: s.h };
        rects.set(k, r);
        if (isBox.has(k)) place(k, r.x, r.y);
      }
      for (const [key, pts] of l.points) {
        const [a, b] = key.split("|");
        if (a === "IN" || b === "OUT") continue;
        const base = Math.max(box, 0);
        const id = `${Number(a) + base}|${Number(b) + base}`;
        routes.set(
          id,
          pts.map((q) => ({ x: ox + q.x, y: oy + q.y })),
        );
        const at = l.labels.get(key);
        if (at) labelAt.set(id, { x: ox + at.x, y: oy + at.y });
      }
    };
    place(-1, 0, 0);
    return { rects, routes, labels: labelAt, width: top.w, height: top.h, computed };
  }
}

/** The expanded (or unfolded) nodes strictly inside `box`, as offsets: part of a box's cache key. */
function inner(box: number, g: Graph, set: Set<number>): string {
  const last = g.data.nodes.last[box];
  const out: number[] = [];
  for (const n of set) if (n > box && n <= last) out.push(n - box);
  return out.sort((a, b) => a - b).join(".");
}

export function edgeText(shape: number[], dtype: string): string {
  return `[${shape.join(", ")}] ${dtype}`;
}

function dagreBox(
  items: [string, { w: number; h: number }][],
  edges: [string, string, string][],
  /** Width of the box's title; 0 for the unframed top. */
  title: number,
): BoxLayout {
  const g = new dagre.graphlib.Graph({ multigraph: false });
  g.setGraph({ rankdir: "TB", nodesep: 14, ranksep: 26, edgesep: 8, marginx: PAD, marginy: PAD });
  g.setDefaultEdgeLabel(() => ({}));
  const size = new Map<string, { w: number; h: number }>();
  for (const [id, s] of items) {
    g.setNode(id, { width: s.w, height: s.h });
    size.set(id, s);
  }
  const ports = new Set<string>();
  for (const [a, b, text] of edges) {
    for (const p of [a, b])
      if ((p === "IN" || p === "OUT") && !ports.has(p)) {
        ports.add(p);
        g.setNode(p, { width: 1, height: 1 });
      }
    if (a === b || g.hasEdge(a, b)) continue;
    g.setEdge(a, b, text ? { width: Math.round(text.length * 5.6) + 6, height: 12, labelpos: "c" } : {});
  }
  dagre.layout(g);
  const pos = new Map<string, Point>();
  let maxX = 0;
  let maxY = 0;
  for (const id of g.nodes()) {
    const n = g.node(id);
    pos.set(id, { x: n.x, y: n.y });
    maxX = Math.max(maxX, n.x + n.width / 2);
    maxY = Math.max(maxY, n.y + n.height / 2);
  }
  const points = new Map<string, Point[]>();
  const labels = new Map<string, Point>();
  for (const e of g.edges()) {
    const label = g.edge(e);
    points.set(`${e.v}|${e.w}`, label.points ?? []);
    if (label.width && label.x !== undefined && label.y !== undefined)
      labels.set(`${e.v}|${e.w}`, { x: label.x - label.width / 2, y: label.y });
  }
  const header = title ? BOX_HEADER : 0;
  const extra = Math.max(0, (title - maxX - PAD) / 2); // centre the content under a wider title
  const shift = (p: Point) => ({ x: p.x + extra, y: p.y + header });
  for (const [k, p] of pos) pos.set(k, shift(p));
  for (const [k, pts] of points) points.set(k, pts.map(shift));
  for (const [k, p] of labels) labels.set(k, shift(p));
  return { w: Math.max(maxX + PAD, title), h: maxY + PAD + header, pos, size, points, labels };
}
