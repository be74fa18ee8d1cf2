// The Graph mode's drawing: a laid-out view (graphModel's nodes and edges, graphLayout's
// rects and routes) turned into SVG markup, node colours from a colour option and their
// legend, the styles, and the standalone SVG a user exports. No state and no events: the
// interactive view (graphView.ts) decides what to draw and calls these.

import { h, svg } from "./dom";
import { formatBytes, formatCompact } from "./format";
import { edgeText, type Layout, type Rect, stubText } from "./graphLayout";
import { fullName, type Graph, label, type View } from "./graphModel";
import type { ColourOption } from "./payload";

/** Edge labels are drawn on the edges up to this many visible edges (else in each edge's tooltip). */
export const LABELLED_EDGES = 300;

// ---- colours

const STOPS = ["#f7fbff", "#c6dbef", "#6baed6", "#2171b5", "#08306b"]; // light to dark blue
const DIVERGING = ["#2166ac", "#92c5de", "#f7f7f7", "#f4a582", "#b2182b"];

function mix(stops: string[], t: number): string {
  const x = Math.max(0, Math.min(1, t)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const f = x - i;
  const a = Number.parseInt(stops[i].slice(1), 16);
  const b = Number.parseInt(stops[i + 1].slice(1), 16);
  const ch = (s: number) => Math.round(((a >> s) & 255) * (1 - f) + ((b >> s) & 255) * f);
  return `rgb(${ch(16)}, ${ch(8)}, ${ch(0)})`;
}

/** Where `value` falls in the option's scale, 0..1 (diverging: 0.5 is zero). */
export function scaled(value: number, c: ColourOption): number {
  const [lo, hi] = c.domain;
  if (c.scale === "diverging") {
    const m = Math.max(Math.abs(lo), Math.abs(hi)) || 1;
    return 0.5 + value / (2 * m);
  }
  if (c.scale === "log") {
    const f = (v: number) => Math.log10(Math.max(0, v) + 1);
    return hi > lo ? (f(value) - f(lo)) / (f(hi) - f(lo) || 1) : 1;
  }
  return hi > lo ? (value - lo) / (hi - lo) : 1;
}

export function colourOf(value: number | null, c: ColourOption): string | null {
  if (value === null) return null;
  return mix(c.scale === "diverging" ? DIVERGING : STOPS, scaled(value, c));
}

/** Text colour readable on a fill from `colourOf` (dark stops get white text). */
function inkOn(value: number, c: ColourOption): string {
  const t = scaled(value, c);
  return c.scale === "diverging" ? (t < 0.2 || t > 0.8 ? "#fff" : "#111") : t > 0.55 ? "#fff" : "#111";
}

export function formatValue(v: number | null, unit: string): string {
  if (v === null) return "–";
  if (unit === "bytes") return formatBytes(v);
  if (Number.isInteger(v)) return formatCompact(v);
  return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(2) : String(Number(v.toPrecision(4)));
}

/** The colour option `key`, its domain narrowed to the nodes view `v` draws (a root call's
 * total would otherwise wash out every block's colour); undefined for none. */
export function viewColour(g: Graph, v: View, key: string): ColourOption | undefined {
  const c = g.data.colour.find((o) => o.key === key);
  if (!c) return undefined;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const n of v.nodes) {
    const x = c.values[n];
    if (x === null) continue;
    lo = Math.min(lo, x);
    hi = Math.max(hi, x);
  }
  return lo <= hi ? { ...c, domain: [lo, hi] } : c;
}

/** The legend's parts for colour option `c` (none without one): label, ends and the ramp. */
export function legendParts(c: ColourOption | undefined): HTMLElement[] {
  if (!c) return [];
  const bar = h("span", "nbi-graph-ramp");
  const stops = c.scale === "diverging" ? DIVERGING : STOPS;
  bar.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
  const [lo, hi] = c.domain;
  const scale = c.scale === "log" ? " (log scale)" : c.scale === "diverging" ? " (0 in the middle)" : "";
  return [
    h("span", "nbi-graph-legend-label", `${c.label}${scale}`),
    h("span", "nbi-num", formatValue(c.scale === "diverging" ? -Math.max(-lo, hi) : lo, c.unit)),
    bar,
    h("span", "nbi-num", formatValue(c.scale === "diverging" ? Math.max(-lo, hi) : hi, c.unit)),
    h("span", "nbi-graph-legend-none", "uncoloured: no value"),
  ];
}

// ---- markup

/** A node's accessible description (its aria-label and tooltip). */
export function describeNode(g: Graph, n: number, value: number | null, c: ColourOption | undefined): string {
  const d = g.data.nodes;
  const parts = [d.kind[n] === "call" ? d.name[n] || "(root)" : fullName(g, n)];
  if (d.type[n]) parts.push(d.type[n]);
  if (d.params[n]?.length) parts.push(`reads ${d.params[n]?.join(", ")}`);
  if (d.fold_first[n] === n && d.fold_label[n]) parts.push(`${d.fold_count[n]} equal blocks`);
  const out = d.out_shapes[n];
  if (out?.length) parts.push(`output ${out.map((o) => `[${o.join(", ")}]`).join(" ")}`);
  if (c && value !== null) parts.push(`${c.label} ${formatValue(value, c.unit)}`);
  return parts.join(", ");
}

/** View `v` laid out as `layout`, as SVG markup to parse once: for thousands of nodes a tenth
 * of the DOM calls one element at a time would cost. Every text from the model goes through
 * `esc`. Edge labels when `labels`; node fills from colour option `c`. */
export function graphMarkup(
  g: Graph,
  v: View,
  layout: Layout,
  unfolded: Set<number>,
  c: ColourOption | undefined,
  labels: boolean,
): string {
  const { rects, routes, labels: labelAt } = layout;
  const d = g.data.nodes;
  const out: string[] = ['<g class="nbi-graph-boxes">'];
  for (const b of v.boxes) {
    const r = rects.get(b);
    if (!r) continue;
    out.push(
      `<g class="nbi-graph-box" data-node="${b}"><rect x="${f1(r.x)}" y="${f1(r.y)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="6"/>`,
      textMarkup(`▾ ${label(g, b, unfolded)}  ${d.type[b]}`, r.x + 8, r.y + 15, "nbi-graph-box-title"),
      "</g>",
    );
  }
  out.push('</g><g class="nbi-graph-edges">');
  let edgeIndex = 0;
  for (const e of v.edges) {
    const a = rects.get(e.src);
    const b = rects.get(e.dst);
    if (!a || !b) continue;
    const pts = routes.get(`${e.src}|${e.dst}`);
    const path = pts && pts.length > 1 ? polyline(pts, a, b) : curve(a, b);
    // its tooltip is made on hover (data-edge): thousands of edges
    out.push(`<path class="nbi-graph-edge" d="${path}" marker-end="url(#nbi-arrow)" data-edge="${edgeIndex++}"/>`);
    if (labels) {
      // an edge across box borders has no place reserved by dagre: label it just above its arrow head
      const mid = labelAt.get(`${e.src}|${e.dst}`) ?? { x: b.x + b.w / 2 + 2, y: b.y - 9 };
      out.push(textMarkup(edgeText(e.shape, e.dtype), mid.x + 3, mid.y + 3, "nbi-graph-edge-label"));
    }
  }
  out.push('</g><g class="nbi-graph-nodes">');
  for (const n of v.nodes) {
    const r = rects.get(n);
    if (!r) continue;
    const kind = d.kind[n];
    const value = c ? c.values[n] : null;
    const fill = c ? colourOf(value, c) : null;
    const ink = fill && value !== null && c ? ` style="fill:${inkOn(value, c)}"` : "";
    const about = esc(describeNode(g, n, value, c));
    out.push(`<g class="nbi-graph-node nbi-graph-${esc(kind)}" data-node="${n}" aria-label="${about}">`);
    if (d.fold_first[n] === n && !unfolded.has(n))
      out.push(
        `<rect class="nbi-graph-stack" x="${f1(r.x + 4)}" y="${f1(r.y + 4)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="5"/>`,
      );
    out.push(
      `<rect x="${f1(r.x)}" y="${f1(r.y)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="${kind === "call" ? 5 : f1(r.h / 2)}"${fill ? ` style="fill:${fill}"` : ""}/>`,
    );
    const centre = r.x + r.w / 2 + (g.expandable[n] ? 6 : 0); // room for the caret
    out.push(textMarkup(label(g, n, unfolded), centre, r.y + 15, "nbi-graph-label", ink));
    if (kind === "call") {
      const sub = d.same_as[n] >= 0 ? `${d.type[n]} = ${d.name[d.same_as[n]].split(".").pop()}` : d.type[n];
      out.push(textMarkup(sub, centre, r.y + 29, "nbi-graph-type", ink));
    }
    if (g.expandable[n]) out.push(textMarkup("▸", r.x + 5, r.y + 15, "nbi-graph-caret"));
    const stub = stubText(v, n);
    if (stub) out.push(textMarkup(stub, r.x + r.w / 2, r.y + r.h - 5, "nbi-graph-stub", ink));
    out.push(`<title>${about}</title></g>`);
  }
  out.push("</g>");
  return out.join("");
}

/** The tooltip text of edge `i` of view `v`: producer → consumer, shape, dtype, bytes. */
export function edgeTitle(g: Graph, v: View, i: number, unfolded: Set<number>): string {
  const edge = v.edges[i];
  return (
    `${label(g, edge.src, unfolded)} → ${label(g, edge.dst, unfolded)}: ${edgeText(edge.shape, edge.dtype)}, ` +
    `${formatBytes(edge.bytes)}${edge.count > 1 ? ` (${edge.count} tensors)` : ""}${edge.via ? `, via ${edge.via}` : ""}`
  );
}

/** Text and attribute values from the model (module names, types) as markup-safe text. */
export function esc(value: string): string {
  return value
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;")
    .replaceAll("'", "&#39;");
}

const f1 = (v: number) => v.toFixed(1);

function textMarkup(value: string, x: number, y: number, cls: string, extra = ""): string {
  return `<text x="${f1(x)}" y="${f1(y)}" class="${cls}"${extra}>${esc(value)}</text>`;
}

/** The arrow head every edge ends in. */
export function defs(): SVGDefsElement {
  const d = svg("defs");
  const m = svg("marker", {
    id: "nbi-arrow",
    viewBox: "0 0 8 8",
    refX: 7,
    refY: 4,
    markerWidth: 7,
    markerHeight: 7,
    orient: "auto-start-reverse",
  });
  m.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "nbi-graph-arrow" }));
  d.append(m);
  return d;
}

/** dagre's route, its ends put on the two nodes' borders. */
function polyline(pts: { x: number; y: number }[], a: Rect, b: Rect): string {
  const first = { x: pts[0].x, y: a.y + a.h };
  const last = { x: pts[pts.length - 1].x, y: b.y };
  const inner = pts.slice(1, -1);
  return `M${[first, ...inner, last].map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" L")}`;
}

/** A vertical S-curve from the bottom of `a` to the top of `b` (edges across box borders). */
function curve(a: Rect, b: Rect): string {
  const x1 = a.x + a.w / 2;
  const y1 = a.y + a.h;
  const x2 = b.x + b.w / 2;
  const y2 = b.y;
  const dy = Math.max(20, Math.abs(y2 - y1) / 2);
  return `M${x1.toFixed(1)},${y1.toFixed(1)} C${x1.toFixed(1)},${(y1 + dy).toFixed(1)} ${x2.toFixed(1)},${(y2 - dy).toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}`;
}

// ---- export and styles

/** The drawn `svgEl` (laid out as `layout`) as a standalone SVG document (colours inlined). */
export function standaloneSvg(svgEl: SVGSVGElement, layout: Layout): string {
  const copy = svgEl.cloneNode(true) as SVGSVGElement;
  copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
  const { width, height } = layout;
  copy.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`);
  copy.setAttribute("width", String(Math.ceil(width)));
  copy.setAttribute("height", String(Math.ceil(height)));
  copy.querySelector(".nbi-graph-world")?.removeAttribute("transform");
  const style = svg("style");
  style.textContent = EXPORT_STYLE;
  copy.prepend(style);
  return new XMLSerializer().serializeToString(copy);
}

/** Styles of the graph, in the widget (theme variables) and in an exported SVG (fixed). */
export const GRAPH_STYLES = `
.nbi-graph-host { flex: 1 1 auto; min-width: 0; display: flex; }
.nbi-graph-host[hidden], .nbi-grid[hidden] { display: none; }
.nbi-graph { display: flex; flex-direction: column; gap: 4px; flex: 1 1 auto; min-width: 0; }
.nbi-graph:focus-visible { outline: 2px solid var(--nbi-accent); }
.nbi-graph-bar { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.nbi-graph-bar select { font: inherit; color: var(--nbi-fg); background: var(--nbi-bg-alt); border: 1px solid var(--nbi-border); border-radius: 4px; padding: 2px 6px; }
.nbi-graph-legend { display: flex; gap: 6px; align-items: center; font-size: .9em; min-height: 1.2em; }
.nbi-graph-ramp { display: inline-block; width: 140px; height: 10px; border: 1px solid var(--nbi-border); border-radius: 2px; }
.nbi-graph-legend-none { color: var(--nbi-fg-dim); }
.nbi-graph-canvas { height: min(720px, 75vh); min-height: 360px; border: 1px solid var(--nbi-border); border-radius: 4px; overflow: hidden; background: var(--nbi-bg); cursor: grab; }
.nbi-graph-svg { width: 100%; height: 100%; display: block; user-select: none; }
.nbi-graph-status { color: var(--nbi-fg-dim); font-size: .9em; }
.nbi-graph-box > rect { fill: color-mix(in srgb, var(--nbi-accent) 5%, var(--nbi-bg)); stroke: var(--nbi-border); stroke-dasharray: 4 3; }
.nbi-graph-box.nbi-selected > rect { stroke: var(--nbi-accent); stroke-width: 2; }
.nbi-graph-box-title { font-size: 11px; fill: var(--nbi-fg-dim); cursor: pointer; font-family: var(--jp-code-font-family, ui-monospace, monospace); }
.nbi-graph-node { cursor: pointer; }
.nbi-graph-node > rect { fill: var(--nbi-bg-alt); stroke: var(--nbi-fg-dim); stroke-width: 1; }
.nbi-graph-op > rect { fill: var(--nbi-bg-head); stroke: var(--nbi-border); }
.nbi-graph-input > rect, .nbi-graph-output > rect { fill: color-mix(in srgb, var(--nbi-accent) 18%, var(--nbi-bg)); stroke: var(--nbi-accent); }
.nbi-graph-node > rect.nbi-graph-stack { fill: var(--nbi-bg-head); stroke: var(--nbi-fg-dim); }
.nbi-graph-node.nbi-selected > rect:not(.nbi-graph-stack) { stroke: var(--nbi-accent); stroke-width: 3; }
.nbi-graph-node.nbi-match > rect:not(.nbi-graph-stack) { stroke: var(--nbi-warn); stroke-width: 3; }
.nbi-graph-node.nbi-focus > rect:not(.nbi-graph-stack) { stroke-dasharray: 3 2; stroke-width: 2.5; }
.nbi-graph-label { font-size: 11.5px; text-anchor: middle; fill: var(--nbi-fg); font-family: var(--jp-code-font-family, ui-monospace, monospace); }
.nbi-graph-type { font-size: 10px; text-anchor: middle; fill: var(--nbi-fg-dim); }
.nbi-graph-caret { font-size: 10px; fill: var(--nbi-accent); cursor: pointer; }
.nbi-graph-stub { font-size: 9.5px; fill: var(--nbi-fg-dim); text-anchor: middle; font-style: italic; }
.nbi-graph-edge { fill: none; stroke: var(--nbi-fg-dim); stroke-width: 1.2; }
.nbi-graph-arrow { fill: var(--nbi-fg-dim); }
.nbi-graph-edge-label { font-size: 9.5px; fill: var(--nbi-fg-dim); font-family: var(--jp-code-font-family, ui-monospace, monospace); paint-order: stroke; stroke: var(--nbi-bg); stroke-width: 3px; }
`;

const EXPORT_STYLE = GRAPH_STYLES.replaceAll("var(--jp-code-font-family, ui-monospace, monospace)", "monospace")
  .replaceAll("var(--nbi-accent)", "#1976d2")
  .replaceAll("var(--nbi-warn)", "#f57c00")
  .replaceAll("var(--nbi-fg-dim)", "#666")
  .replaceAll("var(--nbi-fg)", "#222")
  .replaceAll("var(--nbi-bg-alt)", "#fff")
  .replaceAll("var(--nbi-bg-head)", "#eee")
  .replaceAll("var(--nbi-bg)", "#fff")
  .replaceAll("var(--nbi-border)", "#ccc");
