// Metrics over training steps (nbinspect.track): charts above the tree, as TensorBoard draws
// them: step on the x axis with ticks, a log y axis where the values span decades, a hover
// readout, a metric picker and smoothing. Reads the payload's optional `timeline` field
// (render/payload.py `timeline()`); the tree shows the last interval's change.
// The user's choices (metrics, smoothing, scale) stay across the live updates.

import { h, svg } from "./dom";
import { formatStat } from "./format";
import { niceTicks, tickFormat } from "./histogram";
import type { Timeline as TimelineData, TimelineSeries } from "./payload";
import { JP } from "./styles";

const WIDTH = 320;
const HEIGHT = 162;
// the bottom holds the x tick labels, then the axis title centred under them (not beside the
// first tick label, which it touched)
const PAD = { left: 52, right: 10, top: 8, bottom: 38 };

const STYLES = `
.nbi-timeline { margin: 0 0 8px; font: 12px var(--jp-ui-font-family, system-ui, sans-serif);
  color: ${JP.font1}; }
.nbi-timeline-title { color: ${JP.font2}; margin: 0 0 4px; }
.nbi-timeline-controls { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 0 0 6px; }
.nbi-timeline-controls select, .nbi-timeline-controls summary { font: inherit; color: inherit;
  background: ${JP.layout1}; border: 1px solid ${JP.border2}; border-radius: 4px;
  padding: 2px 6px; cursor: pointer; }
.nbi-timeline-picker { position: relative; }
.nbi-timeline-picker > summary { list-style: none; }
.nbi-timeline-picker-list { position: absolute; z-index: 6; top: 26px; left: 0; display: grid; gap: 2px; padding: 6px 10px;
  max-height: 260px; overflow: auto; white-space: nowrap; background: ${JP.layout1};
  border: 1px solid ${JP.border2}; border-radius: 4px; box-shadow: 0 2px 8px rgba(0,0,0,.2); }
.nbi-timeline-charts { display: flex; flex-wrap: wrap; gap: 8px; }
.nbi-timeline-card { border: 1px solid ${JP.border2}; border-radius: 4px; padding: 4px 6px;
  background: ${JP.layout1}; width: ${WIDTH + 14}px; }
.nbi-timeline-key { color: ${JP.font1}; font-weight: 600; overflow-wrap: anywhere; }
.nbi-timeline-value { font-variant-numeric: tabular-nums; color: ${JP.font2}; min-height: 1.3em; }
.nbi-timeline svg { display: block; overflow: visible; }
.nbi-timeline .nbi-line { fill: none; stroke: ${JP.brand1}; stroke-width: 1.6; }
.nbi-timeline .nbi-line-raw { fill: none; stroke: ${JP.brand1}; stroke-width: 1; opacity: .3; }
.nbi-timeline .nbi-tick line, .nbi-timeline .nbi-frame { stroke: ${JP.border1}; }
.nbi-timeline .nbi-frame { fill: none; }
.nbi-timeline .nbi-tick text { fill: ${JP.font2}; font-size: 10px; }
.nbi-timeline .nbi-axis-title { fill: ${JP.font1}; font-size: 11px; text-anchor: middle; }
.nbi-timeline .nbi-cursor { stroke: ${JP.font2}; stroke-dasharray: 3 2; }
.nbi-timeline circle { fill: ${JP.brand1}; }
`;

export type Scale = "auto" | "linear" | "log";

/** TensorBoard's smoothing: an exponential moving average, debiased so the first points are
 * not pulled to 0; `weight` 0 leaves the values as they are. Missing values stay missing
 * and do not move the average. */
export function smooth(values: (number | null)[], weight: number): (number | null)[] {
  if (weight <= 0) return values.slice();
  let last = 0;
  let seen = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    last = last * weight + (1 - weight) * v;
    seen++;
    return last / (1 - weight ** seen);
  });
}

/** Whether a log axis reads better: every value positive and spanning more than a factor of 20
 * (the rule `manager.plot` uses). */
export function wantsLog(values: (number | null)[]): boolean {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (!known.length || known.some((v) => v <= 0)) return false;
  return Math.max(...known) > 20 * Math.min(...known);
}

/** Powers of ten within [lo, hi] (lo > 0), thinned to at most `most`; at least the ends. */
export function logTicks(lo: number, hi: number, most = 5): number[] {
  const a = Math.floor(Math.log10(lo));
  const b = Math.ceil(Math.log10(hi));
  const step = Math.max(1, Math.ceil((b - a + 1) / most));
  const out: number[] = [];
  for (let e = a; e <= b; e += step) out.push(Number(`1e${e}`)); // 10 ** -4 is 0.0000999…
  return out;
}

/** The index of the step nearest `step` (steps ascending). */
export function nearestIndex(steps: number[], step: number): number {
  let best = 0;
  for (let i = 1; i < steps.length; i++) if (Math.abs(steps[i] - step) < Math.abs(steps[best] - step)) best = i;
  return best;
}

interface Axes {
  x(step: number): number;
  y(v: number): number;
  step(px: number): number;
  xTicks: number[];
  yTicks: number[];
  log: boolean;
}

/** The chart's scales over the steps and the finite values (positive ones on a log axis). */
function axes(steps: number[], values: number[], log: boolean): Axes | null {
  const shown = log ? values.filter((v) => v > 0) : values;
  if (!shown.length || !steps.length) return null;
  let lo = Math.min(...shown);
  let hi = Math.max(...shown);
  if (lo === hi) [lo, hi] = log ? [lo / 2, hi * 2] : [lo - (Math.abs(lo) || 1) * 0.1, hi + (Math.abs(hi) || 1) * 0.1];
  const s0 = steps[0];
  const s1 = steps[steps.length - 1] === s0 ? s0 + 1 : steps[steps.length - 1];
  const w = WIDTH - PAD.left - PAD.right;
  const tall = HEIGHT - PAD.top - PAD.bottom;
  const t = (v: number) =>
    log ? (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) : (v - lo) / (hi - lo);
  return {
    x: (s) => PAD.left + ((s - s0) / (s1 - s0)) * w,
    y: (v) => PAD.top + (1 - t(v)) * tall,
    step: (px) => s0 + ((px - PAD.left) / w) * (s1 - s0),
    xTicks: niceTicks(s0, s1, 4).filter((s) => s >= s0 && s <= s1 && Number.isInteger(s)),
    yTicks: yTicks(lo, hi, log),
    log,
  };
}

/** Ticks within [lo, hi]: round ones, powers of ten on a log axis (the ends where fewer than two fall inside). */
export function yTicks(lo: number, hi: number, log: boolean): number[] {
  const inside = (log ? logTicks(lo, hi) : niceTicks(lo, hi, 4)).filter(
    (v) => v >= lo - Math.abs(lo) * 1e-9 && v <= hi + Math.abs(hi) * 1e-9,
  );
  const distinct = [...new Set(inside)]; // a range narrow beside its values rounds ticks together
  return distinct.length >= 2 ? distinct : [lo, hi];
}

/** The y tick labels, neighbours never alike: on a linear axis with digits from the tick step
 * (13.75, 13.80, 13.85, 13.90, not 13.8 three times); on a log axis the powers of ten (or the
 * two ends) with 3 significant digits, more where two would print alike. */
export function yTickLabel(ticks: number[], log: boolean): (v: number) => string {
  if (!log) return tickFormat(ticks);
  for (let d = 3; d < 17; d++) {
    const labels = ticks.map((v) => formatStat(v, d));
    if (labels.every((t, i) => i === 0 || t !== labels[i - 1])) return (v) => formatStat(v, d);
  }
  return (v) => formatStat(v, 17);
}

function line(points: [number, number][], cls: string): SVGElement {
  return svg("polyline", { class: cls, points: points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ") });
}

/** One chart: axes with ticks, the (smoothed) curve, the raw one faint under it, and a hover
 * readout of the step under the pointer. */
function card(steps: number[], series: TimelineSeries, weight: number, scale: Scale): HTMLElement {
  const box = h("div", "nbi-timeline-card");
  box.dataset.key = series.key;
  const smoothed = smooth(series.values, weight);
  const log = scale === "log" || (scale === "auto" && wantsLog(series.values));
  const pairs = (vals: (number | null)[]) =>
    steps
      .map((s, i) => [s, vals[i]] as const)
      .filter((p): p is readonly [number, number] => p[1] !== null && Number.isFinite(p[1]) && (!log || p[1] > 0));
  const raw = pairs(series.values);
  const last = raw.length ? raw[raw.length - 1] : null;
  const readout = h("div", "nbi-timeline-value", last ? `step ${last[0]}: ${formatStat(last[1], 4)}` : "–");
  box.append(h("div", "nbi-timeline-key", `${series.key}${log ? " (log scale)" : ""}`), readout);
  const a = axes(
    steps,
    raw.map((p) => p[1]),
    log,
  );
  const chart = svg("svg", {
    width: WIDTH,
    height: HEIGHT,
    role: "img",
    "aria-label": `${series.key} over ${raw.length} measurements${log ? ", log scale" : ""}`,
  });
  box.append(chart);
  if (!a) return box;
  chart.append(
    svg("rect", {
      class: "nbi-frame",
      x: PAD.left,
      y: PAD.top,
      width: WIDTH - PAD.left - PAD.right,
      height: HEIGHT - PAD.top - PAD.bottom,
    }),
  );
  const tickLabel = yTickLabel(a.yTicks, a.log);
  for (const v of a.yTicks) {
    const g = svg("g", { class: "nbi-tick" });
    const y = a.y(v);
    g.append(svg("line", { x1: PAD.left - 4, x2: PAD.left, y1: y, y2: y }));
    const text = svg("text", { x: PAD.left - 6, y: y + 3, "text-anchor": "end" });
    text.textContent = tickLabel(v);
    g.append(text);
    chart.append(g);
  }
  for (const s of a.xTicks) {
    const g = svg("g", { class: "nbi-tick" });
    const x = a.x(s);
    g.append(svg("line", { x1: x, x2: x, y1: HEIGHT - PAD.bottom, y2: HEIGHT - PAD.bottom + 4 }));
    const text = svg("text", { x, y: HEIGHT - PAD.bottom + 14, "text-anchor": "middle" });
    text.textContent = String(s);
    g.append(text);
    chart.append(g);
  }
  const stepLabel = svg("text", {
    x: PAD.left + (WIDTH - PAD.left - PAD.right) / 2,
    y: HEIGHT - 5,
    class: "nbi-axis-title",
  });
  stepLabel.textContent = "step";
  chart.append(stepLabel);
  const xy = (p: readonly [number, number]): [number, number] => [a.x(p[0]), a.y(p[1])];
  if (weight > 0) chart.append(line(raw.map(xy), "nbi-line-raw"));
  const drawn = pairs(smoothed);
  chart.append(line(drawn.map(xy), "nbi-line"));
  if (drawn.length <= 40) for (const p of drawn) chart.append(svg("circle", { cx: a.x(p[0]), cy: a.y(p[1]), r: 2 }));
  const cursor = svg("line", { class: "nbi-cursor", y1: PAD.top, y2: HEIGHT - PAD.bottom, visibility: "hidden" });
  chart.append(cursor);
  chart.addEventListener("pointermove", (e) => {
    const rect = chart.getBoundingClientRect();
    const i = nearestIndex(steps, a.step(e.clientX - rect.left));
    const v = series.values[i];
    const sm = smoothed[i];
    cursor.setAttribute("x1", String(a.x(steps[i])));
    cursor.setAttribute("x2", String(a.x(steps[i])));
    cursor.setAttribute("visibility", "visible");
    const shown = v === null ? "–" : formatStat(v, 6);
    readout.textContent = `step ${steps[i]}: ${shown}${weight > 0 && sm !== null ? ` (smoothed ${formatStat(sm, 4)})` : ""}`;
  });
  chart.addEventListener("pointerleave", () => {
    cursor.setAttribute("visibility", "hidden");
    readout.textContent = last ? `step ${last[0]}: ${formatStat(last[1], 4)}` : "–";
  });
  return box;
}

/** The timeline; `update` redraws it from a payload's `timeline` (hidden when absent),
 * keeping the metrics, smoothing and scale the user picked. */
export class Timeline {
  readonly root = h("div", "nbi-timeline", undefined, { "aria-label": "Metrics over training steps" });
  private data: TimelineData | undefined;
  /** The metrics drawn, once the user picked (else the payload's first `shown`). */
  private picked: string[] | null = null;
  private weight = 0;
  private scale: Scale = "auto";
  private readonly charts = h("div", "nbi-timeline-charts");
  private readonly title = h("div", "nbi-timeline-title");
  private readonly controls = h("div", "nbi-timeline-controls");

  constructor(host: HTMLElement) {
    host.append(this.root);
  }

  update(data: TimelineData | undefined): void {
    this.data = data;
    this.root.hidden = !data;
    if (!data) {
      this.root.replaceChildren();
      return;
    }
    const measured = data.steps.length;
    this.title.textContent = `Training dynamics · ${data.title} · ${measured} measurement${measured === 1 ? "" : "s"}`;
    const open = this.controls.querySelector("details")?.open ?? false;
    this.buildControls(data, open);
    if (!this.root.firstChild) this.root.append(h("style", "", STYLES), this.title, this.controls, this.charts);
    this.draw();
  }

  private keys(data: TimelineData): string[] {
    const known = new Set(data.series.map((s) => s.key));
    return this.picked ? this.picked.filter((k) => known.has(k)) : data.series.slice(0, data.shown).map((s) => s.key);
  }

  private draw(): void {
    const data = this.data;
    if (!data) return;
    const byKey = new Map(data.series.map((s) => [s.key, s]));
    this.charts.replaceChildren(
      ...this.keys(data).flatMap((k) => {
        const s = byKey.get(k);
        return s ? [card(data.steps, s, this.weight, this.scale)] : [];
      }),
    );
  }

  private buildControls(data: TimelineData, open: boolean): void {
    const chosen = new Set(this.keys(data));
    const picker = h("details", "nbi-timeline-picker");
    picker.open = open;
    const summary = h("summary", "", `Metrics (${chosen.size} of ${data.series.length}) ▾`);
    picker.append(summary);
    const list = h("div", "nbi-timeline-picker-list");
    for (const s of data.series) {
      const label = h("label", "");
      const box = h("input", "", undefined, { type: "checkbox" });
      box.checked = chosen.has(s.key);
      box.dataset.key = s.key;
      box.addEventListener("change", () => {
        const now = this.keys(data).filter((k) => k !== s.key);
        this.picked = box.checked ? [...now, s.key] : now;
        summary.textContent = `Metrics (${this.picked.length} of ${data.series.length}) ▾`;
        this.draw();
      });
      label.append(box, document.createTextNode(` ${s.key}`));
      list.append(label);
    }
    picker.append(list);
    const smoothing = h("label", "", "Smoothing ");
    const slider = h("input", "", undefined, {
      type: "range",
      min: "0",
      max: "0.99",
      step: "0.01",
      "aria-label": "Smoothing",
    });
    slider.value = String(this.weight);
    const shown = h("span", "", this.weight.toFixed(2));
    slider.addEventListener("input", () => {
      this.weight = Number(slider.value);
      shown.textContent = this.weight.toFixed(2);
      this.draw();
    });
    smoothing.append(slider, shown);
    const scale = h("select", "", undefined, { "aria-label": "Y axis scale" });
    for (const [value, label] of [
      ["auto", "Y: auto (log when values span decades)"],
      ["linear", "Y: linear"],
      ["log", "Y: log"],
    ]) {
      const o = h("option", "", label);
      o.value = value;
      o.selected = value === this.scale;
      scale.append(o);
    }
    scale.addEventListener("change", () => {
      this.scale = scale.value as Scale;
      this.draw();
    });
    this.controls.replaceChildren(picker, smoothing, scale);
  }
}
