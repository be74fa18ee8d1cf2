// The Graph mode: the traced forward pass as a dataflow diagram in SVG. Module calls at the
// level the user expanded, functional ops inside expanded blocks, edges labelled with shape and
// dtype, repeated blocks folded (decided in Python), nodes coloured by any number with a legend.
// Clicking a node selects its module in the shared state (tree and detail panel follow); the
// search query highlights; wheel/drag/buttons zoom and pan; the keyboard walks the dataflow.

import { button, h, svg } from "./dom";
import { formatBytes, formatCompact } from "./format";
import { edgeText, GraphLayout, type Layout, type Rect, stubText } from "./graphLayout";
import { buildGraph, type Graph, type GraphViewState, hiddenMember, label, type View, view } from "./graphModel";
import type { ColourOption, GraphData } from "./payload";

export interface GraphActions {
  /** A module path was picked (a call, or the call an op ran in). */
  select(path: string): void;
}

/** Edge labels are drawn on the edges up to this many visible edges (else in each edge's tooltip). */
export const LABELLED_EDGES = 300;

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

/** Start expanded: the root, and while a call holds exactly one expandable child that is not a
 * repeated run, that child too (HF models: the *ForCausalLM wrapper, then the base model). */
export function initialExpansion(g: Graph): Set<number> {
  const out = new Set<number>();
  const roots = g.top.filter((t) => g.expandable[t]);
  let todo = roots;
  while (todo.length === 1) {
    const c = todo[0];
    out.add(c);
    todo = g.children[c].filter((k) => g.expandable[k] && g.data.nodes.fold_first[k] < 0);
  }
  for (const r of roots) out.add(r);
  return out;
}

interface State extends GraphViewState {
  colour: string;
  query: string;
  selected: string | null;
  /** Node with the keyboard focus, -1 for none. */
  focus: number;
}

export class GraphView {
  readonly root = h("div", "nbi-graph", undefined, {
    role: "application",
    "aria-label": "Dataflow graph: arrows move between nodes, Enter expands, Space selects",
  });
  readonly g: Graph;
  state: State;
  current!: View;
  layoutResult!: Layout;
  /** Milliseconds of the last view + layout + SVG build. */
  lastRenderMs = 0;
  private readonly layouter = new GraphLayout();
  private readonly canvas = h("div", "nbi-graph-canvas");
  private readonly svgEl = svg("svg", { class: "nbi-graph-svg", role: "img" });
  private readonly world = svg("g", { class: "nbi-graph-world" });
  private readonly legend = h("div", "nbi-graph-legend");
  private readonly status = h("div", "nbi-graph-status", undefined, { "aria-live": "polite" });
  private readonly colourSelect = h("select", "nbi-graph-colour", undefined, { "aria-label": "Colour nodes by" });
  private zoom = { k: 1, x: 0, y: 0 };
  private nodeEls = new Map<number, SVGGElement>();

  constructor(
    data: GraphData,
    private readonly act: GraphActions,
    private readonly name = "model",
  ) {
    this.g = buildGraph(data);
    this.state = {
      expanded: initialExpansion(this.g),
      unfolded: new Set(),
      colour: "",
      query: "",
      selected: null,
      focus: -1,
    };
    this.root.tabIndex = 0;
    const none = h("option", "", "Colour: none");
    none.value = "";
    this.colourSelect.append(none);
    for (const c of data.colour) {
      const o = h("option", "", `Colour: ${c.label}`);
      o.value = c.key;
      this.colourSelect.append(o);
    }
    this.colourSelect.addEventListener("change", () => this.setColour(this.colourSelect.value));
    const bar = h("div", "nbi-graph-bar");
    bar.append(
      this.colourSelect,
      button("nbi-button", "Fit", () => this.fit()),
      button("nbi-button", "+", () => this.zoomBy(1.25)),
      button("nbi-button", "−", () => this.zoomBy(0.8)),
      button("nbi-button nbi-graph-unfold", "Unfold repeats", () => this.expandAll(true)),
      button("nbi-button nbi-graph-export", "Export SVG", () => this.download()),
    );
    this.svgEl.append(defs(), this.world);
    this.canvas.append(this.svgEl);
    this.root.append(bar, this.legend, this.canvas, this.status);
    this.root.addEventListener("keydown", (e) => this.onKey(e));
    this.svgEl.addEventListener("click", (e) => this.onClick(e));
    this.svgEl.addEventListener("dblclick", (e) => this.onDoubleClick(e));
    this.svgEl.addEventListener("pointerover", (e) => this.edgeTip(e));
    this.panZoom();
    this.render();
    this.fit();
  }

  // ---- actions (toolbar, clicks, keys; tests call them too)

  toggle(node: number): void {
    const d = this.g.data.nodes;
    if (d.fold_first[node] === node && !this.state.expanded.has(node) && !this.g.expandable[node]) return;
    const expanded = new Set(this.state.expanded);
    if (!expanded.delete(node)) {
      if (!this.g.expandable[node]) return;
      expanded.add(node);
    } else for (const e of [...expanded]) if (e > node && e <= d.last[node]) expanded.delete(e);
    this.update({ expanded });
  }

  /** Show a folded run member by member (or fold it again). */
  toggleFold(first: number): void {
    const unfolded = new Set(this.state.unfolded);
    if (!unfolded.delete(first)) unfolded.add(first);
    this.update({ unfolded });
  }

  expandAll(unfold = false): void {
    const expanded = new Set<number>();
    this.g.expandable.forEach((e, i) => {
      if (e) expanded.add(i);
    });
    const unfolded = new Set(this.state.unfolded);
    if (unfold) for (const f of this.g.data.nodes.fold_first) if (f >= 0) unfolded.add(f);
    this.update({ expanded, unfolded });
    this.fit(true);
  }

  collapseAll(): void {
    this.update({ expanded: initialExpansion(this.g), unfolded: new Set() });
    this.fit();
  }

  /** Expand every call down to `depth` (the root is depth 0). */
  expandToDepth(depth: number): void {
    const expanded = new Set<number>();
    this.g.expandable.forEach((e, i) => {
      if (e && this.g.depth[i] < depth) expanded.add(i);
    });
    this.update({ expanded });
    this.fit(true);
  }

  setColour(key: string): void {
    this.colourSelect.value = key;
    this.update({ colour: key });
  }

  setQuery(query: string): void {
    if (query !== this.state.query) this.update({ query });
  }

  /** Mark the node of this module path (from the tree or Python), revealing it. */
  setSelected(path: string | null): void {
    if (path === this.state.selected) return;
    const d = this.g.data.nodes;
    const node = path === null ? -1 : d.kind.findIndex((k, i) => k === "call" && d.name[i] === path);
    const { expanded, unfolded } = this.state;
    const hidden: number[] = [];
    const runs: number[] = []; // a member of a folded run: show the run member by member
    for (let a = node; a >= 0; a = d.parent[a]) {
      if (a !== node && !expanded.has(a)) hidden.push(a);
      if (hiddenMember(this.g, a, unfolded)) runs.push(d.fold_first[a]);
    }
    const focus = node >= 0 ? node : this.state.focus;
    if (hidden.length || runs.length)
      this.update({
        selected: path,
        expanded: new Set([...expanded, ...hidden]),
        unfolded: new Set([...unfolded, ...runs]),
        focus,
      });
    else this.update({ selected: path, focus });
  }

  /** The current view as a standalone SVG document (colours inlined). */
  exportSvg(): string {
    const copy = this.svgEl.cloneNode(true) as SVGSVGElement;
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    const { width, height } = this.layoutResult;
    copy.setAttribute("viewBox", `0 0 ${Math.ceil(width)} ${Math.ceil(height)}`);
    copy.setAttribute("width", String(Math.ceil(width)));
    copy.setAttribute("height", String(Math.ceil(height)));
    copy.querySelector(".nbi-graph-world")?.removeAttribute("transform");
    const style = svg("style");
    style.textContent = EXPORT_STYLE;
    copy.prepend(style);
    return new XMLSerializer().serializeToString(copy);
  }

  /** The whole view on screen; with `readable`, no smaller than names can be read (a tall view
   * then starts at its top, the rest a drag or a key away). */
  fit(readable = false): void {
    const w = this.canvas.clientWidth || 800;
    const h0 = this.canvas.clientHeight || 520;
    const { width, height } = this.layoutResult;
    const whole = Math.min(w / (width + 20), h0 / (height + 20));
    const k = Math.min(1.5, Math.max(0.03, readable ? Math.max(whole, Math.min(0.7, w / (width + 20))) : whole));
    this.zoom = { k, x: (w - width * k) / 2, y: Math.max(4, (h0 - height * k) / 2) };
    this.applyZoom();
  }

  zoomBy(f: number, cx?: number, cy?: number): void {
    const x = cx ?? (this.canvas.clientWidth || 800) / 2;
    const y = cy ?? (this.canvas.clientHeight || 520) / 2;
    const k = Math.max(0.03, Math.min(6, this.zoom.k * f));
    const r = k / this.zoom.k;
    this.zoom = { k, x: x - (x - this.zoom.x) * r, y: y - (y - this.zoom.y) * r };
    this.applyZoom();
  }

  // ---- rendering

  private update(change: Partial<State>): void {
    const before = this.state;
    this.state = { ...this.state, ...change };
    const relayout = change.expanded !== undefined || change.unfolded !== undefined;
    if (relayout || change.colour !== undefined) this.render(relayout ? before : null);
    else this.paintMarks(); // selection, search and focus: classes only, the drawing stays
  }

  private render(before: State | null = null): void {
    const t0 = performance.now();
    const s = this.state;
    this.current = view(this.g, s);
    const t1 = performance.now();
    const labels = this.current.edges.length <= LABELLED_EDGES;
    this.layoutResult = this.layouter.layout(this.g, this.current, s.unfolded, s.expanded, labels);
    const t2 = performance.now();
    this.draw(labels);
    this.drawLegend();
    this.lastRenderMs = performance.now() - t0;
    // read by the browser benchmark: the whole, and view / layout / SVG build apart
    this.root.dataset.renderMs = this.lastRenderMs.toFixed(1);
    this.root.dataset.parts = [t1 - t0, t2 - t1, performance.now() - t2].map((x) => x.toFixed(1)).join(" ");
    this.root.dataset.layouts = String(this.layoutResult.computed);
    const v = this.current;
    const hidden = v.hiddenConstants ? `, ${v.hiddenConstants} constant ops hidden` : "";
    this.status.textContent =
      `${v.nodes.length.toLocaleString("en-US")} nodes, ${v.edges.length.toLocaleString("en-US")} edges` +
      `${v.stubs.length ? `, ${v.stubs.length} side inputs as stubs` : ""}${hidden}`;
    this.svgEl.setAttribute("aria-label", `Dataflow of ${this.name}: ${this.status.textContent}`);
    if (before) this.keepInView(before);
  }

  /** After an expand, keep the clicked node where it was on screen. */
  private keepInView(before: State): void {
    const f = this.state.focus;
    const r = f >= 0 ? this.layoutResult.rects.get(f) : undefined;
    if (!r || before === this.state) return;
    const w = this.canvas.clientWidth || 800;
    const x = this.zoom.x + r.x * this.zoom.k;
    if (x < 0 || x > w) this.fit();
  }

  /** The chosen colour option, its domain narrowed to the nodes this view draws (a root
   * call's total would otherwise wash out every block's colour). */
  private colour(): ColourOption | undefined {
    const c = this.g.data.colour.find((o) => o.key === this.state.colour);
    if (!c) return undefined;
    let lo = Number.POSITIVE_INFINITY;
    let hi = Number.NEGATIVE_INFINITY;
    for (const n of this.current.nodes) {
      const v = c.values[n];
      if (v === null) continue;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    }
    return lo <= hi ? { ...c, domain: [lo, hi] } : c;
  }

  /** The view as SVG markup, parsed once: for thousands of nodes a tenth of the DOM calls one
   * element at a time would cost. Every text from the model goes through `esc`. */
  private draw(labels: boolean): void {
    const { rects, routes, labels: labelAt } = this.layoutResult;
    const g = this.g;
    const d = g.data.nodes;
    const s = this.state;
    const c = this.colour();
    const out: string[] = ['<g class="nbi-graph-boxes">'];
    for (const b of this.current.boxes) {
      const r = rects.get(b);
      if (!r) continue;
      out.push(
        `<g class="nbi-graph-box" data-node="${b}"><rect x="${f1(r.x)}" y="${f1(r.y)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="6"/>`,
        textMarkup(`▾ ${label(g, b, s.unfolded)}  ${d.type[b]}`, r.x + 8, r.y + 15, "nbi-graph-box-title"),
        "</g>",
      );
    }
    out.push('</g><g class="nbi-graph-edges">');
    let edgeIndex = 0;
    for (const e of this.current.edges) {
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
    for (const n of this.current.nodes) {
      const r = rects.get(n);
      if (!r) continue;
      const kind = d.kind[n];
      const value = c ? c.values[n] : null;
      const fill = c ? colourOf(value, c) : null;
      const ink = fill && value !== null && c ? ` style="fill:${inkOn(value, c)}"` : "";
      const about = esc(this.describe(n, value, c));
      out.push(`<g class="nbi-graph-node nbi-graph-${esc(kind)}" data-node="${n}" aria-label="${about}">`);
      if (d.fold_first[n] === n && !s.unfolded.has(n))
        out.push(
          `<rect class="nbi-graph-stack" x="${f1(r.x + 4)}" y="${f1(r.y + 4)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="5"/>`,
        );
      out.push(
        `<rect x="${f1(r.x)}" y="${f1(r.y)}" width="${f1(r.w)}" height="${f1(r.h)}" rx="${kind === "call" ? 5 : f1(r.h / 2)}"${fill ? ` style="fill:${fill}"` : ""}/>`,
      );
      const centre = r.x + r.w / 2 + (g.expandable[n] ? 6 : 0); // room for the caret
      out.push(textMarkup(label(g, n, s.unfolded), centre, r.y + 15, "nbi-graph-label", ink));
      if (kind === "call") {
        const sub = d.same_as[n] >= 0 ? `${d.type[n]} = ${d.name[d.same_as[n]].split(".").pop()}` : d.type[n];
        out.push(textMarkup(sub, centre, r.y + 29, "nbi-graph-type", ink));
      }
      if (g.expandable[n]) out.push(textMarkup("▸", r.x + 5, r.y + 15, "nbi-graph-caret"));
      const stub = stubText(this.current, n);
      if (stub) out.push(textMarkup(stub, r.x + r.w / 2, r.y + r.h - 5, "nbi-graph-stub", ink));
      out.push(`<title>${about}</title></g>`);
    }
    out.push("</g>");
    this.world.innerHTML = out.join("");
    this.nodeEls.clear();
    for (const el of this.world.querySelectorAll<SVGGElement>(".nbi-graph-node"))
      this.nodeEls.set(Number(el.getAttribute("data-node")), el);
    this.paintMarks();
  }

  /** The selected module, the search matches and the keyboard focus, as classes. */
  private paintMarks(): void {
    const d = this.g.data.nodes;
    const s = this.state;
    const query = s.query.trim().toLowerCase();
    for (const [n, el] of this.nodeEls) {
      el.classList.toggle("nbi-selected", d.kind[n] === "call" && d.name[n] === s.selected);
      el.classList.toggle(
        "nbi-match",
        query !== "" && (d.name[n].toLowerCase().includes(query) || d.type[n].toLowerCase().includes(query)),
      );
    }
    for (const el of this.world.querySelectorAll<SVGGElement>(".nbi-graph-box"))
      el.classList.toggle("nbi-selected", d.name[Number(el.getAttribute("data-node"))] === s.selected);
    this.paintFocus();
  }

  private describe(n: number, value: number | null, c: ColourOption | undefined): string {
    const d = this.g.data.nodes;
    const parts = [d.kind[n] === "call" ? d.name[n] || "(root)" : d.name[n]];
    if (d.type[n]) parts.push(d.type[n]);
    if (d.params[n]?.length) parts.push(`reads ${d.params[n]?.join(", ")}`);
    if (d.fold_first[n] === n && d.fold_label[n]) parts.push(`${d.fold_count[n]} equal blocks`);
    const out = d.out_shapes[n];
    if (out?.length) parts.push(`output ${out.map((o) => `[${o.join(", ")}]`).join(" ")}`);
    if (c && value !== null) parts.push(`${c.label} ${formatValue(value, c.unit)}`);
    return parts.join(", ");
  }

  private drawLegend(): void {
    const c = this.colour();
    if (!c) {
      this.legend.replaceChildren();
      return;
    }
    const bar = h("span", "nbi-graph-ramp");
    const stops = c.scale === "diverging" ? DIVERGING : STOPS;
    bar.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
    const [lo, hi] = c.domain;
    const scale = c.scale === "log" ? " (log scale)" : c.scale === "diverging" ? " (0 in the middle)" : "";
    this.legend.replaceChildren(
      h("span", "nbi-graph-legend-label", `${c.label}${scale}`),
      h("span", "nbi-num", formatValue(c.scale === "diverging" ? -Math.max(-lo, hi) : lo, c.unit)),
      bar,
      h("span", "nbi-num", formatValue(c.scale === "diverging" ? Math.max(-lo, hi) : hi, c.unit)),
      h("span", "nbi-graph-legend-none", "uncoloured: no value"),
    );
  }

  private paintFocus(): void {
    for (const el of this.world.querySelectorAll(".nbi-focus")) el.classList.remove("nbi-focus");
    const el = this.nodeEls.get(this.state.focus);
    if (el) {
      el.classList.add("nbi-focus");
      this.root.setAttribute("aria-activedescendant", "");
      this.status.dataset.focus = el.getAttribute("aria-label") ?? "";
    }
  }

  private applyZoom(): void {
    const { k, x, y } = this.zoom;
    this.world.setAttribute("transform", `translate(${x.toFixed(1)},${y.toFixed(1)}) scale(${k.toFixed(4)})`);
  }

  private panZoom(): void {
    this.svgEl.addEventListener(
      "wheel",
      (e) => {
        if (!e.ctrlKey && !e.metaKey && !e.altKey) return; // plain wheel scrolls the notebook
        e.preventDefault();
        const box = this.svgEl.getBoundingClientRect();
        this.zoomBy(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - box.left, e.clientY - box.top);
      },
      { passive: false },
    );
    this.svgEl.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest(".nbi-graph-node, .nbi-graph-box-title")) return;
      const start = { x: e.clientX, y: e.clientY, zx: this.zoom.x, zy: this.zoom.y };
      const move = (m: PointerEvent) => {
        this.zoom = { ...this.zoom, x: start.zx + m.clientX - start.x, y: start.zy + m.clientY - start.y };
        this.applyZoom();
      };
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
  }

  /** The tooltip of the edge under the pointer: producer → consumer, shape, dtype, bytes. */
  private edgeTip(e: Event): void {
    const path = e.target as SVGPathElement;
    const i = path.dataset?.edge;
    if (i === undefined || path.firstChild) return;
    const edge = this.current.edges[Number(i)];
    const { unfolded } = this.state;
    const tip = svg("title");
    tip.textContent =
      `${label(this.g, edge.src, unfolded)} → ${label(this.g, edge.dst, unfolded)}: ${edgeText(edge.shape, edge.dtype)}, ` +
      `${formatBytes(edge.bytes)}${edge.count > 1 ? ` (${edge.count} tensors)` : ""}${edge.via ? `, via ${edge.via}` : ""}`;
    path.append(tip);
  }

  private nodeAt(e: Event): number {
    const el = (e.target as Element).closest<SVGGElement>("[data-node]");
    return el ? Number(el.getAttribute("data-node")) : -1;
  }

  private onClick(e: MouseEvent): void {
    const n = this.nodeAt(e);
    if (n < 0) return;
    const target = e.target as Element;
    if (target.closest(".nbi-graph-box")) {
      if (target.classList.contains("nbi-graph-box-title")) this.toggle(n); // the box's header folds it
      return;
    }
    if (target.classList.contains("nbi-graph-caret")) {
      this.update({ focus: n });
      this.toggle(n);
      return;
    }
    this.pick(n);
  }

  private onDoubleClick(e: MouseEvent): void {
    const n = this.nodeAt(e);
    if (n < 0 || !this.current.nodes.includes(n)) return;
    const d = this.g.data.nodes;
    if (d.fold_first[n] === n && e.shiftKey) this.toggleFold(n);
    else this.toggle(n);
  }

  /** Select node `n`: its module (an op: the call it ran in) becomes the shared selection. */
  pick(n: number): void {
    const d = this.g.data.nodes;
    let call = n;
    while (call >= 0 && d.kind[call] !== "call") call = d.parent[call];
    this.update(call >= 0 ? { focus: n, selected: d.name[call] } : { focus: n });
    if (call >= 0) this.act.select(d.name[call]);
    this.root.focus({ preventScroll: true });
  }

  /** Keyboard: ↓/↑ follow the dataflow (first consumer / producer), ←/→ the neighbours in
   * drawing order, Enter expands or collapses, Space selects, + - 0 zoom and fit. */
  private onKey(e: KeyboardEvent): void {
    const v = this.current;
    const order = v.nodes;
    const f = order.includes(this.state.focus) ? this.state.focus : -1;
    const go = (n: number | undefined) => {
      if (n === undefined || n < 0) return;
      this.update({ focus: n });
      this.reveal(n);
    };
    const at = order.indexOf(f);
    const keys: Record<string, () => void> = {
      ArrowDown: () => go(f < 0 ? order[0] : (v.edges.find((x) => x.src === f)?.dst ?? order[at + 1])),
      ArrowUp: () => go(f < 0 ? order[0] : (v.edges.find((x) => x.dst === f)?.src ?? order[at - 1])),
      ArrowRight: () => go(order[Math.min(order.length - 1, at + 1)]),
      ArrowLeft: () => go(order[Math.max(0, at - 1)]),
      Home: () => go(order[0]),
      End: () => go(order[order.length - 1]),
      Enter: () => f >= 0 && this.toggle(f),
      " ": () => f >= 0 && this.pick(f),
      "+": () => this.zoomBy(1.25),
      "=": () => this.zoomBy(1.25),
      "-": () => this.zoomBy(0.8),
      "0": () => this.fit(),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    action();
  }

  /** Pan so node `n` is on screen. */
  private reveal(n: number): void {
    const r = this.layoutResult.rects.get(n);
    if (!r) return;
    const w = this.canvas.clientWidth || 800;
    const hgt = this.canvas.clientHeight || 520;
    const { k } = this.zoom;
    const x = this.zoom.x + r.x * k;
    const y = this.zoom.y + r.y * k;
    if (x < 0 || x + r.w * k > w || y < 0 || y + r.h * k > hgt) {
      this.zoom = { k, x: w / 2 - (r.x + r.w / 2) * k, y: hgt / 2 - (r.y + r.h / 2) * k };
      this.applyZoom();
    }
  }

  private download(): void {
    const blob = new Blob([this.exportSvg()], { type: "image/svg+xml" });
    const a = h("a", "", undefined, { download: `${this.name}-graph.svg` });
    a.href = URL.createObjectURL(blob);
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
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

function defs(): SVGDefsElement {
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
