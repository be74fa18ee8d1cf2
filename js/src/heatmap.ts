// The value view (issue 28): a tensor's values as a heatmap that finds the bad cell.
//
// Python decides everything (analyze/values.py): the blocks, their colour index in a
// 256-entry palette (a diverging scale centred at 0, then NaN, +Inf, -Inf, exact zero, no
// data), the flags and the colour limits. This file is the widget that puts the parts
// together and handles the mouse and keyboard (zoom, pan, a cursor that jumps to the next
// flagged block) and the list of bad values locate found. heatmapRegion.ts holds what is in
// view and asks for it at a higher resolution when the user zooms or pans, down to single
// values; heatmapPaint.ts draws the answer; heatmapControls.ts is the toolbar.

import { h } from "./dom";
import { formatCount } from "./format";
import { HeatmapControls } from "./heatmapControls";
import { blockText, HEATMAP_STYLE, paintRegion, regionLabel, scaleParts } from "./heatmapPaint";
import {
  cellOf,
  decodeRegion,
  defaultPlane,
  type LocateFetcher,
  type Region,
  type RegionFetcher,
  type RegionHeader,
  RegionRequests,
  Viewport,
} from "./heatmapRegion";

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

/** One heatmap: toolbar, canvas, scale bar, readout and the list of bad cells. */
export class Heatmap {
  readonly root = h("div", "nbi-heat");
  private readonly canvas = h("canvas", "");
  private readonly box = h("div", "nbi-heat-box", undefined, { tabindex: "0", role: "img" });
  private readonly readout = h("div", "nbi-heat-readout", undefined, { "aria-live": "polite" });
  private readonly scale = h("div", "nbi-heat-scale");
  private readonly msg = h("div", "nbi-heat-msg", "Reading values…");
  private readonly found = h("div", "nbi-heat-locate", undefined, { "aria-label": "Bad values in this tensor" });
  /** Plane, rows, columns, statistic and colour limit in view. */
  private readonly view: Viewport;
  private readonly requests: RegionRequests;
  private readonly controls: HeatmapControls;
  /** Dead rows/columns (plane rows, plane columns) found by locate: drawn as lines. */
  private deadRows: number[] = [];
  private deadCols: number[] = [];
  /** The last answer with values (null while there is none to show). */
  private region: Region | null = null;
  private cursor: [number, number] | null = null;
  private drag: { x: number; y: number; rows: [number, number]; cols: [number, number] } | null = null;
  private readonly observer: ResizeObserver | null;
  private destroyed = false;
  /** When the last response arrived and how long the round trip took (tests read it). */
  lastRoundTrip = 0;

  constructor(private readonly opts: HeatmapOptions) {
    this.view = new Viewport(opts.shape);
    this.requests = new RegionRequests(
      (req) => opts.fetch(req),
      (seq) => this.view.request(seq, opts.tensor, opts.side ?? null, opts.caption, this.pixels()),
      { answer: (hd, buffers, ms) => this.show(hd, buffers, ms), failed: (message) => this.showMessage(message) },
    );
    this.root.append(h("style", "", HEATMAP_STYLE));
    if (opts.caption) this.root.append(h("div", "nbi-chart-caption", opts.caption));
    this.root.dataset.tensor = opts.tensor;
    this.root.dataset.side = opts.side ?? "";
    this.controls = new HeatmapControls(this.view, {
      request: () => this.request(0),
      zoomAt: (fx, fy, factor) => this.zoomAt(fx, fy, factor),
      reset: () => this.reset(),
    });
    const readoutId = `nbi-heat-${Math.random().toString(36).slice(2)}`;
    this.readout.id = readoutId;
    this.box.setAttribute("aria-describedby", readoutId);
    this.box.setAttribute("aria-label", `Heatmap of ${opts.tensor}: loading`);
    this.box.append(this.msg);
    this.root.append(this.controls.bar, this.controls.axesBar, this.box, this.scale, this.readout, this.found);
    this.listen();
    this.observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => this.draw());
    this.observer?.observe(this.box);
    this.request(0);
    this.findBad();
  }

  destroy(): void {
    this.destroyed = true;
    this.observer?.disconnect();
    this.requests.destroy();
  }

  /** Show the limits another heatmap uses (side by side: one colour scale for both). */
  setLimit(limit: number): void {
    this.view.keepScale = true;
    this.controls.keepBox.checked = true;
    if (this.view.limit !== null && Math.abs(this.view.limit - limit) < 1e-12 * Math.abs(limit)) return;
    this.view.limit = limit;
    this.request(0);
  }

  // ---- requests and answers

  /** The picture's size in device pixels: the box's width, rows × columns in proportion. */
  private pixels(): [number, number] {
    const dpr = globalThis.devicePixelRatio || 1;
    const w = Math.max(40, this.box.clientWidth || 300);
    const { rows, cols } = this.view;
    const [nr, nc] = [rows[1] - rows[0], cols[1] - cols[0]];
    const cssH = Math.round(Math.max(48, Math.min(360, (w * nr) / Math.max(1, nc))));
    return [Math.min(2048, Math.round(cssH * dpr)), Math.min(2048, Math.round(w * dpr))];
  }

  private reset(): void {
    this.view.reset();
    this.cursor = null;
    this.request(0);
  }

  /** Ask for the current region after `delay` ms (zoom and pan come in bursts). */
  private request(delay: number): void {
    this.requests.schedule(delay);
  }

  /** An answer to the latest request: the message it carries, or its values drawn. */
  private show(header: RegionHeader, buffers: DataView[], roundTrip: number): void {
    this.lastRoundTrip = roundTrip;
    this.root.dataset.roundTrip = this.lastRoundTrip.toFixed(1);
    if (header.state !== "ok") {
      const lead =
        header.state === "meta" ? "No values: " : header.state === "error" ? "Bad request: " : "Values unavailable: ";
      this.showMessage(lead + header.message);
      this.box.setAttribute("aria-label", `Heatmap of ${this.opts.tensor}: ${lead}${header.message}`);
      this.region = null;
      return;
    }
    this.region = decodeRegion(header, buffers);
    const shared = this.view.takeLimits(header);
    if (shared !== null) this.opts.onLimit?.(shared);
    this.msg.remove();
    if (!this.canvas.isConnected) this.box.append(this.canvas);
    this.root.dataset.exact = String(header.exact);
    this.root.dataset.grid = (header.grid ?? []).join("x");
    this.draw();
    this.drawScale();
    this.box.setAttribute("aria-label", regionLabel(this.opts, header));
    if (this.cursor) this.describe(this.cursor[0], this.cursor[1]);
  }

  private showMessage(text: string): void {
    this.canvas.remove();
    this.msg.textContent = text;
    if (!this.msg.isConnected) this.box.append(this.msg);
  }

  // ---- drawing (heatmapPaint.ts)

  private draw(): void {
    const r = this.region;
    if (!r?.header.grid) return;
    const onDefault = this.view.onDefaultPlane();
    paintRegion(this.canvas, r, this.pixels(), {
      deadRows: onDefault ? this.deadRows : [],
      deadCols: onDefault ? this.deadCols : [],
      cursor: this.cursor,
    });
  }

  private drawScale(): void {
    const hd = this.region?.header;
    if (!hd?.limits) return;
    this.scale.replaceChildren(...scaleParts({ ...hd, limits: hd.limits }));
  }

  // ---- readout

  /** The readout for grid cell (i, j): its index range, value(s) and bad-value counts. */
  describe(i: number, j: number): string {
    const text = this.region ? blockText(this.opts.tensor, this.region, this.view.plane, i, j) : "";
    if (text) this.readout.textContent = text;
    return text;
  }

  // ---- interaction

  private cellAt(e: MouseEvent): [number, number] | null {
    const hd = this.region?.header;
    if (!hd?.grid) return null;
    const r = this.canvas.getBoundingClientRect();
    const fx = (e.clientX - r.left) / r.width;
    const fy = (e.clientY - r.top) / r.height;
    if (fx < 0 || fy < 0 || fx >= 1 || fy >= 1) return null;
    return [Math.floor(fy * hd.grid[0]), Math.floor(fx * hd.grid[1])];
  }

  /** Zoom by `factor` (< 1 in) around the fraction (fx, fy) of the view. */
  zoomAt(fx: number, fy: number, factor: number): void {
    this.view.zoomAt(fx, fy, factor);
    this.cursor = null;
    this.request(60);
  }

  /** Show the exact values around tensor index `index` (a locate hit), cursor on it. */
  jumpTo(index: number[]): void {
    if (this.view.plane.fixed.length) {
      // a hit's index is in the whole tensor: back to all values (and say so in the select)
      this.view.plane = defaultPlane(this.opts.shape);
      this.controls.showAllValues();
    }
    const [ph, pw] = this.pixels();
    const dpr = globalThis.devicePixelRatio || 1;
    this.cursor = this.view.centreOn(index, pw / dpr, ph / dpr);
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
      this.drag = { x: e.clientX, y: e.clientY, rows: this.view.rows, cols: this.view.cols };
    });
    const stop = () => {
      this.drag = null;
    };
    c.addEventListener("mouseup", stop);
    c.addEventListener("mouseleave", stop);
    this.box.addEventListener("keydown", (e) => this.onKey(e));
    this.box.addEventListener("focus", () => {
      if (!this.cursor && this.region?.header.grid) {
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
    if (this.view.panBy(d, e.clientX - d.x, e.clientY - d.y, r.width, r.height)) this.request(60);
  }

  private onKey(e: KeyboardEvent): void {
    const hd = this.region?.header;
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
    const f = this.region?.flags;
    const hd = this.region?.header;
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
