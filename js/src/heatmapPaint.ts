// How a heatmap looks. The answer's palette indices blitted onto the canvas, flagged blocks
// ringed so a single NaN among millions is seen, dead rows and columns and the keyboard
// cursor drawn over them; the colour scale bar with the special colours; the texts (the
// readout of one block, the picture's text alternative); the styles. Python chose every
// colour (analyze/values.py): this file only looks them up. heatmap.ts calls these.

import { h } from "./dom";
import { formatCount, formatStat } from "./format";
import { cellIndex, type Plane, type Region, type RegionHeader } from "./heatmapRegion";

export const HEATMAP_STYLE = `
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

/** A CSS colour "#rrggbb[aa]" as the little-endian RGBA word ImageData holds. */
export function rgba(colour: string): number {
  const c = colour.replace("#", "");
  const r = Number.parseInt(c.slice(0, 2), 16);
  const g = Number.parseInt(c.slice(2, 4), 16);
  const b = Number.parseInt(c.slice(4, 6), 16);
  const a = c.length >= 8 ? Number.parseInt(c.slice(6, 8), 16) : 255;
  return ((a << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

/** What is drawn over the blocks: dead rows and columns (plane rows and columns; empty off
 * the default plane) and the keyboard cursor (a grid cell). */
export interface Overlay {
  deadRows: number[];
  deadCols: number[];
  cursor: [number, number] | null;
}

/** Paint `region` (its header has a grid) on `canvas` at `ph` × `pw` device pixels. */
export function paintRegion(
  canvas: HTMLCanvasElement,
  region: Region,
  [ph, pw]: [number, number],
  over: Overlay,
): void {
  const hd = region.header;
  const [gh, gw] = hd.grid ?? [0, 0];
  const dpr = globalThis.devicePixelRatio || 1;
  canvas.width = pw;
  canvas.height = ph;
  canvas.style.height = `${Math.round(ph / dpr)}px`;
  const ctx = canvas.getContext("2d");
  if (!ctx) return;
  const img = new ImageData(gw, gh);
  const colours = hd.palette.map(rgba);
  const px = new Uint32Array(img.data.buffer);
  for (let i = 0; i < region.index.length; i++) px[i] = colours[region.index[i]];
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
  for (let i = 0; i < region.flags.length; i++) {
    const fl = region.flags[i];
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
  const [r0, r1] = hd.rows ?? [0, 0];
  const [c0, c1] = hd.cols ?? [0, 0];
  for (const r of over.deadRows)
    if (r >= r0 && r < r1) ctx.fillRect(0, ((r - r0 + 0.5) / (r1 - r0)) * ph - dpr, pw, Math.max(ch, 2 * dpr));
  for (const c of over.deadCols)
    if (c >= c0 && c < c1) ctx.fillRect(((c - c0 + 0.5) / (c1 - c0)) * pw - dpr, 0, Math.max(cw, 2 * dpr), ph);
  if (over.cursor) {
    const [ci, cj] = over.cursor;
    ctx.strokeStyle = "#ffeb3b";
    ctx.lineWidth = 2 * dpr;
    ctx.strokeRect(cj * cw, ci * ch, Math.max(cw, 3 * dpr), Math.max(ch, 3 * dpr));
  }
}

/** The colour scale of an answer with limits: low end, the palette's 251 colours, high end,
 * what a pixel shows, and chips for NaN, ±Inf and zero. */
export function scaleParts(hd: RegionHeader & { limits: [number, number] }): HTMLElement[] {
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
  return [
    h("span", "nbi-heat-lo", lowLabel),
    bar,
    h("span", "nbi-heat-hi", formatStat(hi)),
    h("span", "", `(${hd.exact ? "values" : stat})`),
    chip("NaN", hd.palette[hd.special.nan]),
    chip("+Inf", hd.palette[hd.special.posinf]),
    chip("−Inf", hd.palette[hd.special.neginf]),
    chip("0", hd.palette[hd.special.zero]),
  ];
}

/** Which tensor a heatmap shows. */
export interface Subject {
  tensor: string;
  side?: string | null;
  caption?: string;
}

/** The picture's text alternative: what it shows, at which resolution, which colours, and
 * the bad values in view. */
export function regionLabel(s: Subject, hd: RegionHeader | null): string {
  if (!hd?.rows || !hd.cols || !hd.block || !hd.limits || !hd.counts) return `Heatmap of ${s.tensor}`;
  const c = hd.counts;
  const each = hd.exact ? "each pixel one value" : `each pixel ${hd.block[0]} × ${hd.block[1]} values (${hd.stat})`;
  return (
    `Heatmap of ${s.tensor}${s.side ? ` (${s.caption ?? s.side})` : ""}, ` +
    `${hd.shape.map(formatCount).join(" × ")} ${hd.dtype ?? ""}; rows ${fmtRange(...hd.rows)}, ` +
    `columns ${fmtRange(...hd.cols)}, ${each}; colours from ${formatStat(hd.limits[0])} to ${formatStat(hd.limits[1])}; ` +
    `in view: ${formatCount(c.nan)} NaN, ${formatCount(c.posinf)} +Inf, ${formatCount(c.neginf)} −Inf, ` +
    `${formatCount(c.zero_blocks)} ${hd.exact ? "zero values" : "all-zero blocks"}, ${formatCount(c.outlier_blocks)} outlier ${hd.exact ? "values" : "blocks"}.`
  );
}

/** The readout of grid cell (i, j) of `region` (drawn on `plane` unless the answer names its
 * own): its index range, value(s) and bad-value counts; "" outside the grid. */
export function blockText(tensor: string, region: Region, plane: Plane, i: number, j: number): string {
  const hd = region.header;
  if (!hd.grid || !hd.rows || !hd.cols || !hd.block) return "";
  const [gh, gw] = hd.grid;
  if (i < 0 || j < 0 || i >= gh || j >= gw) return "";
  const k = i * gw + j;
  const r0 = hd.rows[0] + i * hd.block[0];
  const r1 = Math.min(hd.rows[1], r0 + hd.block[0]);
  const c0 = hd.cols[0] + j * hd.block[1];
  const c1 = Math.min(hd.cols[1], c0 + hd.block[1]);
  const on = hd.plane ?? plane;
  const fl = region.flags[k];
  const v = region.values[k];
  const show = (x: number) =>
    Number.isNaN(x) ? "NaN" : x === Infinity ? "+Inf" : x === -Infinity ? "−Inf" : formatStat(x, 6);
  if (hd.exact) {
    const idx = cellIndex(hd.shape, on, r0, c0);
    const f = hd.flags;
    const value = fl & f.nan ? "NaN" : fl & f.posinf ? "+Inf" : fl & f.neginf ? "−Inf" : show(v);
    return `${tensor}[${idx.join(", ")}] = ${value}`;
  }
  const first = cellIndex(hd.shape, on, r0, c0);
  const last = cellIndex(hd.shape, on, r1 - 1, c1 - 1);
  let text =
    `rows ${fmtRange(r0, r1)}, cols ${fmtRange(c0, c1)}: [${first.join(", ")}] … [${last.join(", ")}]\n` +
    `mean ${show(v)}, max |x| ${show(region.absmax[k])}`;
  const bad = region.bad.get(k);
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
  return text;
}
