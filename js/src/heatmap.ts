// The value view (issue 28): a tensor's values as a heatmap that finds the bad cell.
//
// Python decides everything (analyze/values.py): the blocks, their colour index in a
// 256-entry palette (a diverging scale centred at 0, then NaN, +Inf, -Inf, exact zero, no
// data), the flags and the colour limits. This file only blits the index through the
// palette, marks flagged blocks so a single NaN in a huge tensor is seen, and asks for a
// region at a higher resolution when the user zooms or pans, down to single values.

import { h } from "./dom";
import { formatCount, formatStat } from "./format";

/** A `_region` request (analyze/value_view.py validates it). */
export interface RegionRequest {
  seq: number;
  tensor: string;
  side: string | null;
  plane: Plane | null;
  rows: [number, number] | null;
  cols: [number, number] | null;
  height: number;
  width: number;
  stat: "mean" | "absmax";
  limit: number | null;
  label?: string;
}

export interface Plane {
  rows: number[];
  cols: number[];
  fixed: [number, number][];
}

export interface RegionHeader {
  seq: number;
  state: "ok" | "meta" | "unavailable" | "error";
  message: string;
  tensor: string;
  shape: number[];
  dtype?: string;
  plane?: Plane;
  rows?: [number, number];
  cols?: [number, number];
  block?: [number, number];
  grid?: [number, number];
  exact?: boolean;
  stat?: string;
  limits?: [number, number];
  counts?: { nan: number; posinf: number; neginf: number; zero_blocks: number; outlier_blocks: number };
  bad?: [number, number, number, number, number][];
  palette: string[];
  special: Record<"nan" | "posinf" | "neginf" | "zero" | "empty", number>;
  flags: Record<"nan" | "posinf" | "neginf" | "outlier" | "zero" | "partial", number>;
  seconds?: number;
}

/** Sends a request to the kernel; resolves to the header and its buffers. */
export type RegionFetcher = (req: RegionRequest) => Promise<[RegionHeader, DataView[]]>;

export interface LocateRow {
  what: string;
  index: number[];
  value: number | null;
  total: number;
}
/** Asks the kernel where the bad values of one tensor are. */
export type LocateFetcher = (tensor: string, side: string | null) => Promise<LocateRow[]>;

export interface HeatmapOptions {
  tensor: string;
  shape: number[];
  side?: string | null;
  caption?: string;
  fetch: RegionFetcher;
  locate?: LocateFetcher;
  /** Colour limit shared with another heatmap (side by side): called with each overview's. */
  onLimit?: (limit: number) => void;
}

/** The default plane: rows = the first axis (experts × outputs for 3-D), columns the rest. */
export function defaultPlane(shape: number[]): Plane {
  const n = shape.length;
  if (n <= 1) return { rows: [], cols: n ? [0] : [], fixed: [] };
  const rows = n === 3 ? [0, 1] : [0];
  return { rows, cols: shape.map((_, i) => i).slice(rows.length), fixed: [] };
}

/** Picture rows and columns of a plane (as core/plane.py). */
export function planeSize(shape: number[], plane: Plane): [number, number] {
  const prod = (axes: number[]) => axes.reduce((p, a) => p * shape[a], 1);
  return [prod(plane.rows), prod(plane.cols)];
}

/** The tensor index of picture cell (row, col) (as core/plane.py's Plane.index). */
export function cellIndex(shape: number[], plane: Plane, row: number, col: number): number[] {
  const out = shape.map(() => 0);
  for (const [axis, i] of plane.fixed) out[axis] = i;
  for (const [axes, start] of [
    [plane.rows, row],
    [plane.cols, col],
  ] as const) {
    let flat = start;
    for (let k = axes.length - 1; k >= 0; k--) {
      out[axes[k]] = flat % shape[axes[k]];
      flat = Math.floor(flat / shape[axes[k]]);
    }
  }
  return out;
}

/** The picture cell (row, col) of a tensor index on `plane` (inverse of cellIndex). */
export function cellOf(shape: number[], plane: Plane, index: number[]): [number, number] {
  const flat = (axes: number[]) => axes.reduce((f, a) => f * shape[a] + index[a], 0);
  return [flat(plane.rows), flat(plane.cols)];
}

const STYLE = `
.nbi-heat { grid-column: 1 / -1; margin: 4px 0 10px; font-size: .92em; }
.nbi-heat-bar { display: flex; flex-wrap: wrap; gap: 4px; align-items: center; margin: 2px 0 4px; }
.nbi-heat-bar button, .nbi-heat-bar select, .nbi-heat-bar input { font: inherit; font-size: .95em; }
.nbi-heat-bar input[type=number] { width: 4.5em; }
.nbi-heat-box { position: relative; outline: none; border: 1px solid var(--nbi-border, #ccc); line-height: 0; cursor: crosshair; }
.nbi-heat-box:focus-visible { outline: 2px solid var(--nbi-accent, #1976d2); outline-offset: 1px; }
.nbi-heat-box canvas { width: 100%; display: block; image-rendering: pixelated; touch-action: none; }
.nbi-heat-scale { display: flex; align-items: center; gap: 6px; margin: 4px 0 2px; flex-wrap: wrap; }
.nbi-heat-scale canvas { width: 140px; height: 10px; border: 1px solid var(--nbi-border, #ccc); }
.nbi-heat-chip { display: inline-flex; align-items: center; gap: 3px; }
.nbi-heat-chip i { display: inline-block; width: 10px; height: 10px; border: 1px solid var(--nbi-border, #ccc); }
.nbi-heat-readout { min-height: 2.6em; font-family: var(--jp-code-font-family, ui-monospace, monospace); font-size: .95em;
  white-space: pre-wrap; word-break: break-all; }
.nbi-heat-msg { padding: 10px; color: var(--nbi-fg-dim, #666); line-height: 1.3; }
.nbi-heat-locate { display: flex; flex-wrap: wrap; gap: 3px; margin: 2px 0; }
.nbi-heat-locate button { font: inherit; font-size: .9em; font-family: var(--jp-code-font-family, ui-monospace, monospace); }
`;

const fmtRange = (a: number, b: number) => (b - a === 1 ? `${a}` : `${a}–${b - 1}`);

/** One heatmap: toolbar, canvas, scale bar, readout and the list of bad cells. */
export class Heatmap {
  readonly root = h("div", "nbi-heat");
  private readonly canvas = h("canvas", "");
  private readonly box = h("div", "nbi-heat-box", undefined, { tabindex: "0", role: "img" });
  private readonly readout = h("div", "nbi-heat-readout", undefined, { "aria-live": "polite" });
  private readonly scale = h("div", "nbi-heat-scale");
  private readonly msg = h("div", "nbi-heat-msg", "Reading values…");
  private readonly bar = h("div", "nbi-heat-bar");
  private readonly axesBar = h("div", "nbi-heat-bar");
  private readonly found = h("div", "nbi-heat-locate", undefined, { "aria-label": "Bad values in this tensor" });
  private plane: Plane;
  private rows: [number, number];
  private cols: [number, number];
  private stat: "mean" | "absmax" = "mean";
  /** The colour limit; kept while zooming only when `keepScale` (else each view fits its own). */
  private limit: number | null = null;
  private keepScale = false;
  /** Dead rows/columns (plane rows, plane columns) found by locate: drawn as lines. */
  private deadRows: number[] = [];
  private deadCols: number[] = [];
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private header: RegionHeader | null = null;
  private index: Uint8Array | null = null;
  private flags: Uint8Array | null = null;
  private values: Float64Array | null = null;
  private absmax: Float32Array | null = null;
  private bad = new Map<number, [number, number, number]>();
  private cursor: [number, number] | null = null;
  private drag: { x: number; y: number; rows: [number, number]; cols: [number, number] } | null = null;
  private readonly observer: ResizeObserver | null;
  private destroyed = false;
  /** When the last response arrived and how long the round trip took (tests read it). */
  lastRoundTrip = 0;

  constructor(private readonly opts: HeatmapOptions) {
    this.plane = defaultPlane(opts.shape);
    const [nr, nc] = planeSize(opts.shape, this.plane);
    this.rows = [0, nr];
    this.cols = [0, nc];
    this.root.append(h("style", "", STYLE));
    if (opts.caption) this.root.append(h("div", "nbi-chart-caption", opts.caption));
    this.root.dataset.tensor = opts.tensor;
    this.root.dataset.side = opts.side ?? "";
    this.buildBar();
    const readoutId = `nbi-heat-${Math.random().toString(36).slice(2)}`;
    this.readout.id = readoutId;
    this.box.setAttribute("aria-describedby", readoutId);
    this.box.setAttribute("aria-label", `Heatmap of ${opts.tensor}: loading`);
    this.box.append(this.msg);
    this.root.append(this.bar, this.axesBar, this.box, this.scale, this.readout, this.found);
    this.listen();
    this.observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => this.draw());
    this.observer?.observe(this.box);
    this.request(0);
    this.findBad();
  }

  destroy(): void {
    this.destroyed = true;
    this.observer?.disconnect();
    if (this.timer) clearTimeout(this.timer);
  }

  /** Show the limits another heatmap uses (side by side: one colour scale for both). */
  setLimit(limit: number): void {
    this.keepScale = true;
    this.keepBox.checked = true;
    if (this.limit !== null && Math.abs(this.limit - limit) < 1e-12 * Math.abs(limit)) return;
    this.limit = limit;
    this.request(0);
  }

  private readonly keepBox = h("input", "", undefined, { type: "checkbox" });
  private readonly axesSelect = h("select", "", undefined, { "aria-label": "Axes shown" });

  // ---- toolbar

  private buildBar(): void {
    const stat = h("select", "", undefined, { "aria-label": "Value shown per block" });
    for (const [v, t] of [
      ["mean", "mean"],
      ["absmax", "max |x|"],
    ])
      stat.append(h("option", "", t, { value: v }));
    stat.addEventListener("change", () => {
      this.stat = stat.value as "mean" | "absmax";
      this.limit = null;
      this.request(0);
    });
    const fit = h("label", "nbi-heat-chip", undefined, { title: "Zoom and pan keep the colours of this view" });
    this.keepBox.addEventListener("change", () => {
      this.keepScale = this.keepBox.checked;
      this.request(0);
    });
    fit.append(this.keepBox, document.createTextNode("keep colours"));
    const zoomBtn = (text: string, label: string, fn: () => void) => {
      const b = h("button", "", text, { type: "button", "aria-label": label, title: label });
      b.addEventListener("click", fn);
      return b;
    };
    this.bar.append(
      stat,
      zoomBtn("−", "Zoom out", () => this.zoomAt(0.5, 0.5, 2)),
      zoomBtn("+", "Zoom in", () => this.zoomAt(0.5, 0.5, 0.5)),
      zoomBtn("fit", "Show the whole tensor", () => this.reset()),
      fit,
    );
    if (this.opts.shape.length > 2) this.buildAxes();
  }

  /** For more than two axes: the axes shown (rows, columns) and the index of each other one. */
  private buildAxes(): void {
    const shape = this.opts.shape;
    const n = shape.length;
    const mode = this.axesSelect;
    mode.append(h("option", "", `all values (${defaultPlane(shape).rows.join("·")} × rest)`, { value: "split" }));
    for (let a = 0; a < n; a++)
      for (let b = 0; b < n; b++)
        if (a !== b) mode.append(h("option", "", `axis ${a} × axis ${b}`, { value: `${a},${b}` }));
    const fixedBox = h("span", "nbi-heat-chip");
    const apply = () => {
      fixedBox.replaceChildren();
      if (mode.value === "split") {
        this.plane = defaultPlane(shape);
      } else {
        const [a, b] = mode.value.split(",").map(Number);
        const others = shape.map((_, i) => i).filter((i) => i !== a && i !== b);
        const fixed: [number, number][] = others.map((i) => [i, 0]);
        for (const pair of fixed) {
          const input = h("input", "", undefined, {
            type: "number",
            min: "0",
            max: String(shape[pair[0]] - 1),
            value: "0",
            "aria-label": `Index of axis ${pair[0]}`,
          });
          input.addEventListener("change", () => {
            pair[1] = Math.max(0, Math.min(shape[pair[0]] - 1, Math.trunc(Number(input.value)) || 0));
            input.value = String(pair[1]);
            this.request(0);
          });
          fixedBox.append(document.createTextNode(` axis ${pair[0]} =`), input);
        }
        // rows/columns must be listed in increasing axis order: a > b shows the transpose
        this.plane = { rows: [a], cols: [b], fixed };
      }
      this.reset();
    };
    mode.addEventListener("change", apply);
    this.axesBar.append(mode, fixedBox);
  }

  // ---- requests

  private pixels(): [number, number] {
    const dpr = globalThis.devicePixelRatio || 1;
    const w = Math.max(40, this.box.clientWidth || 300);
    const [nr, nc] = [this.rows[1] - this.rows[0], this.cols[1] - this.cols[0]];
    const cssH = Math.round(Math.max(48, Math.min(360, (w * nr) / Math.max(1, nc))));
    return [Math.min(2048, Math.round(cssH * dpr)), Math.min(2048, Math.round(w * dpr))];
  }

  private reset(): void {
    const [nr, nc] = planeSize(this.opts.shape, this.plane);
    this.rows = [0, nr];
    this.cols = [0, nc];
    this.limit = null;
    this.cursor = null;
    this.request(0);
  }

  /** Ask for the current region after `delay` ms (zoom and pan come in bursts). */
  private request(delay: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.send(), delay);
  }

  private async send(): Promise<void> {
    const [height, width] = this.pixels();
    const seq = ++this.seq;
    const started = performance.now();
    const req: RegionRequest = {
      seq,
      tensor: this.opts.tensor,
      side: this.opts.side ?? null,
      plane: this.plane,
      rows: this.rows,
      cols: this.cols,
      height,
      width,
      stat: this.stat,
      limit: this.keepScale ? this.limit : null,
      label: this.opts.caption ? `${this.opts.tensor} (${this.opts.caption})` : this.opts.tensor,
    };
    let header: RegionHeader;
    let buffers: DataView[];
    try {
      [header, buffers] = await this.opts.fetch(req);
    } catch (e) {
      if (seq === this.seq && !this.destroyed) this.showMessage(`The values could not be fetched: ${String(e)}`);
      return;
    }
    if (seq !== this.seq || this.destroyed) return; // a newer request is on its way
    this.lastRoundTrip = performance.now() - started;
    this.root.dataset.roundTrip = this.lastRoundTrip.toFixed(1);
    if (header.state !== "ok") {
      const lead =
        header.state === "meta" ? "No values: " : header.state === "error" ? "Bad request: " : "Values unavailable: ";
      this.showMessage(lead + header.message);
      this.box.setAttribute("aria-label", `Heatmap of ${this.opts.tensor}: ${lead}${header.message}`);
      this.header = null;
      return;
    }
    const bytes = (i: number) => buffers[i];
    this.header = header;
    this.index = new Uint8Array(bytes(0).buffer, bytes(0).byteOffset, bytes(0).byteLength);
    this.flags = new Uint8Array(bytes(1).buffer, bytes(1).byteOffset, bytes(1).byteLength);
    this.values = new Float64Array(
      bytes(2).buffer.slice(bytes(2).byteOffset, bytes(2).byteOffset + bytes(2).byteLength),
    );
    this.absmax = new Float32Array(
      bytes(3).buffer.slice(bytes(3).byteOffset, bytes(3).byteOffset + bytes(3).byteLength),
    );
    this.bad = new Map((header.bad ?? []).map(([i, j, a, b, c]) => [i * (header.grid?.[1] ?? 1) + j, [a, b, c]]));
    if (header.limits) {
      const lim = Math.max(Math.abs(header.limits[0]), Math.abs(header.limits[1]));
      if (!this.keepScale || this.limit === null) this.limit = lim;
      if (this.isWhole()) this.opts.onLimit?.(lim);
    }
    this.msg.remove();
    if (!this.canvas.isConnected) this.box.append(this.canvas);
    this.root.dataset.exact = String(header.exact);
    this.root.dataset.grid = (header.grid ?? []).join("x");
    this.draw();
    this.drawScale();
    this.box.setAttribute("aria-label", this.ariaLabel());
    if (this.cursor) this.describe(this.cursor[0], this.cursor[1]);
  }

  private isWhole(): boolean {
    const [nr, nc] = planeSize(this.opts.shape, this.plane);
    return this.rows[0] === 0 && this.cols[0] === 0 && this.rows[1] === nr && this.cols[1] === nc;
  }

  private showMessage(text: string): void {
    this.canvas.remove();
    this.msg.textContent = text;
    if (!this.msg.isConnected) this.box.append(this.msg);
  }

  // ---- drawing

  private draw(): void {
    const hd = this.header;
    if (!hd?.grid || !this.index || !this.flags) return;
    const [gh, gw] = hd.grid;
    const [ph, pw] = this.pixels();
    const dpr = globalThis.devicePixelRatio || 1;
    this.canvas.width = pw;
    this.canvas.height = ph;
    this.canvas.style.height = `${Math.round(ph / dpr)}px`;
    const ctx = this.canvas.getContext("2d");
    if (!ctx) return;
    const img = new ImageData(gw, gh);
    const colours = hd.palette.map(rgba);
    const px = new Uint32Array(img.data.buffer);
    for (let i = 0; i < this.index.length; i++) px[i] = colours[this.index[i]];
    const off = document.createElement("canvas");
    off.width = gw;
    off.height = gh;
    off.getContext("2d")?.putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.clearRect(0, 0, pw, ph);
    ctx.drawImage(off, 0, 0, pw, ph);
    // flagged blocks: a ring at least 4 CSS px wide, so one bad value among millions is seen
    const cw = pw / gw;
    const ch = ph / gh;
    const ring = 6 * dpr;
    const f = hd.flags;
    for (let i = 0; i < this.flags.length; i++) {
      const fl = this.flags[i];
      if (!(fl & (f.nan | f.posinf | f.neginf | f.outlier))) continue;
      const x = (i % gw) * cw;
      const y = Math.floor(i / gw) * ch;
      const special = fl & f.nan ? hd.special.nan : fl & f.posinf ? hd.special.posinf : hd.special.neginf;
      ctx.fillStyle = fl & (f.nan | f.posinf | f.neginf) ? hd.palette[special] : "#000";
      const w = Math.max(cw, ring);
      const hgt = Math.max(ch, ring);
      // centred on the block, kept inside the canvas (a bad value in the first row shows whole)
      const rx = Math.max(0, Math.min(pw - w, x + cw / 2 - w / 2));
      const ry = Math.max(0, Math.min(ph - hgt, y + ch / 2 - hgt / 2));
      if (fl & f.outlier && !(fl & (f.nan | f.posinf | f.neginf))) {
        ctx.strokeStyle = "#000";
        ctx.lineWidth = dpr;
        ctx.strokeRect(rx, ry, w, hgt);
      } else {
        ctx.fillRect(rx, ry, w, hgt);
        ctx.strokeStyle = "#000";
        ctx.lineWidth = dpr;
        ctx.strokeRect(rx, ry, w, hgt);
      }
    }
    // dead rows and columns (from locate, on the default plane): a line in the zero colour
    ctx.fillStyle = hd.palette[hd.special.zero];
    const onDefault = JSON.stringify(this.plane) === JSON.stringify(defaultPlane(this.opts.shape));
    const [r0, r1] = hd.rows ?? [0, 0];
    const [c0, c1] = hd.cols ?? [0, 0];
    for (const r of onDefault ? this.deadRows : [])
      if (r >= r0 && r < r1) ctx.fillRect(0, ((r - r0 + 0.5) / (r1 - r0)) * ph - dpr, pw, Math.max(ch, 2 * dpr));
    for (const c of onDefault ? this.deadCols : [])
      if (c >= c0 && c < c1) ctx.fillRect(((c - c0 + 0.5) / (c1 - c0)) * pw - dpr, 0, Math.max(cw, 2 * dpr), ph);
    if (this.cursor) {
      const [ci, cj] = this.cursor;
      ctx.strokeStyle = "#ffeb3b";
      ctx.lineWidth = 2 * dpr;
      ctx.strokeRect(cj * cw, ci * ch, Math.max(cw, 3 * dpr), Math.max(ch, 3 * dpr));
    }
  }

  private drawScale(): void {
    const hd = this.header;
    if (!hd?.limits) return;
    const bar = h("canvas", "", undefined, { width: "251", height: "1", "aria-hidden": "true" });
    const ctx = bar.getContext("2d");
    if (ctx) {
      const img = new ImageData(251, 1);
      const px = new Uint32Array(img.data.buffer);
      for (let i = 0; i < 251; i++) px[i] = rgba(hd.palette[i]);
      ctx.putImageData(img, 0, 0);
    }
    const [lo, hi] = hd.limits;
    const chip = (label: string, colour: string) => {
      const c = h("span", "nbi-heat-chip");
      const sw = h("i", "");
      sw.style.background = colour;
      c.append(sw, document.createTextNode(label));
      return c;
    };
    const stat = hd.stat === "absmax" ? "max |x|" : "mean";
    const lowLabel = hd.stat === "absmax" ? "0" : formatStat(lo);
    this.scale.replaceChildren(
      h("span", "nbi-heat-lo", lowLabel),
      bar,
      h("span", "nbi-heat-hi", formatStat(hi)),
      h("span", "", `(${hd.exact ? "values" : stat})`),
      chip("NaN", hd.palette[hd.special.nan]),
      chip("+Inf", hd.palette[hd.special.posinf]),
      chip("−Inf", hd.palette[hd.special.neginf]),
      chip("0", hd.palette[hd.special.zero]),
    );
  }

  private ariaLabel(): string {
    const hd = this.header;
    if (!hd?.rows || !hd.cols || !hd.block || !hd.limits || !hd.counts) return `Heatmap of ${this.opts.tensor}`;
    const c = hd.counts;
    const each = hd.exact ? "each pixel one value" : `each pixel ${hd.block[0]} × ${hd.block[1]} values (${hd.stat})`;
    return (
      `Heatmap of ${this.opts.tensor}${this.opts.side ? ` (${this.opts.caption ?? this.opts.side})` : ""}, ` +
      `${hd.shape.map(formatCount).join(" × ")} ${hd.dtype ?? ""}; rows ${fmtRange(...hd.rows)}, ` +
      `columns ${fmtRange(...hd.cols)}, ${each}; colours from ${formatStat(hd.limits[0])} to ${formatStat(hd.limits[1])}; ` +
      `in view: ${formatCount(c.nan)} NaN, ${formatCount(c.posinf)} +Inf, ${formatCount(c.neginf)} −Inf, ` +
      `${formatCount(c.zero_blocks)} ${hd.exact ? "zero values" : "all-zero blocks"}, ${formatCount(c.outlier_blocks)} outlier ${hd.exact ? "values" : "blocks"}.`
    );
  }

  // ---- readout

  /** The readout for grid cell (i, j): its index range, value(s) and bad-value counts. */
  describe(i: number, j: number): string {
    const hd = this.header;
    if (!hd?.grid || !hd.rows || !hd.cols || !hd.block || !this.values || !this.absmax || !this.flags) return "";
    const [gh, gw] = hd.grid;
    if (i < 0 || j < 0 || i >= gh || j >= gw) return "";
    const k = i * gw + j;
    const r0 = hd.rows[0] + i * hd.block[0];
    const r1 = Math.min(hd.rows[1], r0 + hd.block[0]);
    const c0 = hd.cols[0] + j * hd.block[1];
    const c1 = Math.min(hd.cols[1], c0 + hd.block[1]);
    const plane = hd.plane ?? this.plane;
    const fl = this.flags[k];
    const v = this.values[k];
    const show = (x: number) =>
      Number.isNaN(x) ? "NaN" : x === Infinity ? "+Inf" : x === -Infinity ? "−Inf" : formatStat(x, 6);
    let text: string;
    if (hd.exact) {
      const idx = cellIndex(hd.shape, plane, r0, c0);
      const f = hd.flags;
      const value = fl & f.nan ? "NaN" : fl & f.posinf ? "+Inf" : fl & f.neginf ? "−Inf" : show(v);
      text = `${this.opts.tensor}[${idx.join(", ")}] = ${value}`;
    } else {
      const first = cellIndex(hd.shape, plane, r0, c0);
      const last = cellIndex(hd.shape, plane, r1 - 1, c1 - 1);
      text =
        `rows ${fmtRange(r0, r1)}, cols ${fmtRange(c0, c1)}: [${first.join(", ")}] … [${last.join(", ")}]\n` +
        `mean ${show(v)}, max |x| ${show(this.absmax[k])}`;
      const bad = this.bad.get(k);
      if (bad) {
        const parts = [
          [bad[0], "NaN"],
          [bad[1], "+Inf"],
          [bad[2], "−Inf"],
        ].filter(([n]) => (n as number) > 0);
        text += `; ${parts.map(([n, t]) => `${formatCount(n as number)} ${t}`).join(", ")}`;
      }
      if (fl & hd.flags.outlier) text += "; holds an outlier";
      if (fl & hd.flags.zero) text += "; all zero";
    }
    this.readout.textContent = text;
    return text;
  }

  // ---- interaction

  private cellAt(e: MouseEvent): [number, number] | null {
    const hd = this.header;
    if (!hd?.grid) return null;
    const r = this.canvas.getBoundingClientRect();
    const fx = (e.clientX - r.left) / r.width;
    const fy = (e.clientY - r.top) / r.height;
    if (fx < 0 || fy < 0 || fx >= 1 || fy >= 1) return null;
    return [Math.floor(fy * hd.grid[0]), Math.floor(fx * hd.grid[1])];
  }

  /** Zoom by `factor` (< 1 in) around the fraction (fx, fy) of the view. */
  zoomAt(fx: number, fy: number, factor: number): void {
    const [nr, nc] = planeSize(this.opts.shape, this.plane);
    const span = (lo: number, hi: number, f: number, n: number): [number, number] => {
      const at = lo + f * (hi - lo);
      const size = Math.max(1, Math.min(n, Math.round((hi - lo) * factor)));
      let a = Math.round(at - f * size);
      a = Math.max(0, Math.min(n - size, a));
      return [a, a + size];
    };
    this.rows = span(this.rows[0], this.rows[1], fy, nr);
    this.cols = span(this.cols[0], this.cols[1], fx, nc);
    this.cursor = null;
    this.request(60);
  }

  /** Show the exact values around tensor index `index` (a locate hit), cursor on it. */
  jumpTo(index: number[]): void {
    const plane = this.plane;
    if (plane.fixed.length) {
      // a hit's index is in the whole tensor: back to all values (and say so in the select)
      this.plane = defaultPlane(this.opts.shape);
      this.axesSelect.value = "split";
      this.axesSelect.dispatchEvent(new Event("change"));
    }
    const [nr, nc] = planeSize(this.opts.shape, this.plane);
    const [r, c] = cellOf(this.opts.shape, this.plane, index);
    const [ph, pw] = this.pixels();
    const dpr = globalThis.devicePixelRatio || 1;
    const sh = Math.min(nr, Math.max(1, Math.floor(ph / dpr / 12)));
    const sw = Math.min(nc, Math.max(1, Math.floor(pw / dpr / 12)));
    const r0 = Math.max(0, Math.min(nr - sh, r - Math.floor(sh / 2)));
    const c0 = Math.max(0, Math.min(nc - sw, c - Math.floor(sw / 2)));
    this.rows = [r0, r0 + sh];
    this.cols = [c0, c0 + sw];
    this.cursor = [r - r0, c - c0];
    this.request(0);
    this.box.focus();
  }

  private listen(): void {
    const c = this.canvas;
    c.addEventListener("mousemove", (e) => {
      if (this.drag) {
        this.pan(e);
        return;
      }
      const cell = this.cellAt(e);
      if (cell) this.describe(cell[0], cell[1]);
    });
    c.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = c.getBoundingClientRect();
      this.zoomAt((e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height, e.deltaY > 0 ? 1.25 : 0.8);
    });
    c.addEventListener("dblclick", (e) => {
      const r = c.getBoundingClientRect();
      this.zoomAt((e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height, 0.25);
    });
    c.addEventListener("mousedown", (e) => {
      this.drag = { x: e.clientX, y: e.clientY, rows: this.rows, cols: this.cols };
    });
    const stop = () => {
      this.drag = null;
    };
    c.addEventListener("mouseup", stop);
    c.addEventListener("mouseleave", stop);
    this.box.addEventListener("keydown", (e) => this.onKey(e));
    this.box.addEventListener("focus", () => {
      if (!this.cursor && this.header?.grid) {
        this.cursor = [0, 0];
        this.describe(0, 0);
        this.draw();
      }
    });
  }

  private pan(e: MouseEvent): void {
    const d = this.drag;
    if (!d) return;
    const r = this.canvas.getBoundingClientRect();
    const [nr, nc] = planeSize(this.opts.shape, this.plane);
    const shift = (span: [number, number], px: number, size: number, n: number): [number, number] => {
      const len = span[1] - span[0];
      const a = Math.max(0, Math.min(n - len, Math.round(span[0] - (px / size) * len)));
      return [a, a + len];
    };
    const rows = shift(d.rows, e.clientY - d.y, r.height, nr);
    const cols = shift(d.cols, e.clientX - d.x, r.width, nc);
    if (rows[0] !== this.rows[0] || cols[0] !== this.cols[0]) {
      this.rows = rows;
      this.cols = cols;
      this.request(60);
    }
  }

  private onKey(e: KeyboardEvent): void {
    const hd = this.header;
    if (!hd?.grid) return;
    const [gh, gw] = hd.grid;
    let [i, j] = this.cursor ?? [0, 0];
    const step = e.shiftKey ? 10 : 1;
    const handled = (): void => {
      e.preventDefault();
      this.cursor = [Math.max(0, Math.min(gh - 1, i)), Math.max(0, Math.min(gw - 1, j))];
      this.describe(this.cursor[0], this.cursor[1]);
      this.draw();
    };
    switch (e.key) {
      case "ArrowUp":
        i -= step;
        handled();
        return;
      case "ArrowDown":
        i += step;
        handled();
        return;
      case "ArrowLeft":
        j -= step;
        handled();
        return;
      case "ArrowRight":
        j += step;
        handled();
        return;
      case "Home":
        j = 0;
        handled();
        return;
      case "End":
        j = gw - 1;
        handled();
        return;
      case "n":
      case "N": {
        const next = this.nextFlagged(i * gw + j, e.key === "n" ? 1 : -1);
        if (next >= 0) [i, j] = [Math.floor(next / gw), next % gw];
        handled();
        return;
      }
      case "Enter":
        e.preventDefault();
        this.zoomAt((j + 0.5) / gw, (i + 0.5) / gh, 0.25);
        return;
      case "+":
      case "=":
        e.preventDefault();
        this.zoomAt((j + 0.5) / gw, (i + 0.5) / gh, 0.5);
        return;
      case "-":
        e.preventDefault();
        this.zoomAt(0.5, 0.5, 2);
        return;
      case "0":
      case "Escape":
      case "Backspace":
        e.preventDefault();
        this.reset();
        return;
    }
  }

  /** The next grid cell after `from` (in `dir`) holding NaN, ±Inf or an outlier, or -1. */
  private nextFlagged(from: number, dir: number): number {
    const f = this.flags;
    const hd = this.header;
    if (!f || !hd) return -1;
    const mask = hd.flags.nan | hd.flags.posinf | hd.flags.neginf | hd.flags.outlier;
    for (let s = 1; s <= f.length; s++) {
      const k = (((from + dir * s) % f.length) + f.length) % f.length;
      if (f[k] & mask) return k;
    }
    return -1;
  }

  // ---- locate

  private findBad(): void {
    const locate = this.opts.locate;
    if (!locate) return;
    locate(this.opts.tensor, this.opts.side ?? null).then(
      (rows) => {
        if (this.destroyed || !rows.length) return;
        const label: Record<string, string> = {
          nan: "NaN",
          posinf: "+Inf",
          neginf: "−Inf",
          outlier: "outlier",
          zero_row: "zero row",
          zero_column: "zero column",
        };
        const totals = new Map<string, number>();
        for (const r of rows) totals.set(r.what, r.total);
        this.found.replaceChildren(
          h("span", "", `${[...totals].map(([w, n]) => `${formatCount(n)} ${label[w] ?? w}`).join(" · ")}:`),
        );
        const shape = this.opts.shape;
        const pad = (n: number) => shape.slice(0, n).map(() => 0);
        for (const r of rows) {
          if (r.what === "zero_row")
            this.deadRows.push(
              cellOf(shape, defaultPlane(shape), [...r.index, ...pad(shape.length - r.index.length)])[0],
            );
          if (r.what === "zero_column")
            this.deadCols.push(
              cellOf(shape, defaultPlane(shape), [...pad(shape.length - r.index.length), ...r.index])[1],
            );
        }
        this.draw();
        for (const r of rows) {
          const cell = r.what === "zero_column" ? [...r.index] : r.index;
          const b = h("button", "", `${label[r.what] ?? r.what} [${r.index.join(", ")}]`, { type: "button" });
          b.addEventListener("click", () => {
            if (r.what === "zero_row") this.jumpTo([...cell, ...this.opts.shape.slice(cell.length).map(() => 0)]);
            else if (r.what === "zero_column")
              this.jumpTo([...this.opts.shape.slice(0, this.opts.shape.length - cell.length).map(() => 0), ...cell]);
            else this.jumpTo(r.index);
          });
          this.found.append(b);
        }
      },
      () => {},
    );
  }
}

/** A CSS colour "#rrggbb[aa]" as the little-endian RGBA word ImageData holds. */
export function rgba(colour: string): number {
  const c = colour.replace("#", "");
  const r = Number.parseInt(c.slice(0, 2), 16);
  const g = Number.parseInt(c.slice(2, 4), 16);
  const b = Number.parseInt(c.slice(4, 6), 16);
  const a = c.length >= 8 ? Number.parseInt(c.slice(6, 8), 16) : 255;
  return ((a << 24) | (b << 16) | (g << 8) | r) >>> 0;
}
