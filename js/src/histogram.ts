// Histograms as hand-written SVG: a sparkline for table rows, a chart with axes for the
// detail panel.

import { svg as el } from "./dom";
import { formatCompact, formatStat } from "./format";
import type { Hist } from "./payload";

/** All c.length + 1 edges of a histogram (expanding the uniform [lo, hi] form). */
export function edgesOf(h: Hist): number[] {
  if (h.e.length === h.c.length + 1) return h.e;
  const [lo, hi] = h.e;
  return Array.from({ length: h.c.length + 1 }, (_, i) => lo + ((hi - lo) * i) / h.c.length);
}

/** Round tick values in [lo, hi]: the widest 1/2/5 step that still gives at least `count`. */
export function niceTicks(lo: number, hi: number, count = 4): number[] {
  if (!(hi > lo)) return [lo];
  const mag = 10 ** Math.ceil(Math.log10(hi - lo));
  let out: number[] = [];
  for (const step of [1, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01].map((f) => f * mag)) {
    out = [];
    for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++)
      out.push(k === 0 ? 0 : Number((k * step).toPrecision(12)));
    if (out.length >= count) break;
  }
  return out;
}

/** The power of ten of |x| (x ≠ 0) from its decimal form, as d3-format's `exponent`: exact
 * where Math.log10 is not (it gives 0.001 as -2.9999999999999996 on some engines). */
const exponent = (x: number): number => Number(x.toExponential().split("e")[1]);

/** Labels for evenly spaced ticks (niceTicks) that tell neighbours apart: the digits come from
 * the step between ticks, as d3's precisionFixed (decimals) and precisionRound (significant
 * digits, for exponent form) choose them, so every label reads back within half a step of its
 * tick. Plain decimals or exponent form, whichever gives the narrower widest label (plain on a
 * tie); exact zero prints "0". One tick (no step) prints as formatStat. */
export function tickFormat(ticks: number[]): (v: number) => string {
  let step = Number.POSITIVE_INFINITY;
  for (let i = 1; i < ticks.length; i++) {
    const d = Math.abs(ticks[i] - ticks[i - 1]);
    if (d > 0) step = Math.min(step, d);
  }
  if (!Number.isFinite(step)) return (v) => formatStat(v);
  // a step measured between ticks carries float noise (13.9 - 13.8 = 0.0999…): round it off
  const e = exponent(Number(step.toPrecision(12)));
  const big = ticks.reduce((m, v) => (Math.abs(v) > Math.abs(m) ? v : m), 0);
  const decimals = Math.min(100, Math.max(0, -e));
  const digits = big === 0 ? 0 : Math.min(20, Math.max(0, exponent(big) - e));
  const plain = (v: number) => v.toFixed(decimals);
  const exp = (v: number) => v.toExponential(digits);
  const widest = (f: (v: number) => string) => Math.max(...ticks.map((v) => f(v).length));
  const show = widest(plain) <= widest(exp) ? plain : exp;
  return (v) => (v === 0 ? "0" : show(v));
}

/** The ticks whose labels do not collide: every other one is dropped (0 kept) until the
 * labels, about `charWidth` px a character, sit apart at `x`. */
export function spacedTicks(
  ticks: number[],
  x: (v: number) => number,
  label: (v: number) => string,
  charWidth = 6,
): number[] {
  let out = ticks;
  const fits = (list: number[]) =>
    list.every(
      (v, i) =>
        i === 0 ||
        Math.abs(x(v) - x(list[i - 1])) >= ((label(v).length + label(list[i - 1]).length) * charWidth) / 2 + 8,
    );
  while (out.length > 2 && !fits(out)) {
    const keep = out.indexOf(0) >= 0 ? out.indexOf(0) % 2 : 0;
    out = out.filter((_, i) => i % 2 === keep);
  }
  return out;
}

const height = (count: number, top: number, log: boolean) =>
  top <= 0 ? 0 : log ? Math.log10(1 + count) / Math.log10(1 + top) : count / top;

/** A small histogram: bars only, scaled to the tallest bin. */
export function sparkline(h: Hist, width = 72, tall = 18): SVGSVGElement {
  const svg = el("svg", {
    width,
    height: tall,
    viewBox: `0 0 ${width} ${tall}`,
    class: "nbi-spark",
    "aria-hidden": "true",
  });
  const edges = edgesOf(h);
  const lo = edges[0];
  const span = edges[edges.length - 1] - lo || 1;
  const top = Math.max(...h.c);
  h.c.forEach((count, i) => {
    if (!count) return;
    const x0 = ((edges[i] - lo) / span) * width;
    const x1 = ((edges[i + 1] - lo) / span) * width;
    const bar = Math.max(1, height(count, top, false) * tall);
    svg.append(
      el("rect", {
        x: x0.toFixed(2),
        y: (tall - bar).toFixed(2),
        width: Math.max(0.8, x1 - x0 - 0.4).toFixed(2),
        height: bar.toFixed(2),
      }),
    );
  });
  return svg;
}

export interface ChartOptions {
  width: number;
  height: number;
  log: boolean;
}

/** A histogram with labelled axes: value along x, count (or log count) up y. */
export function chart(h: Hist, { width, height: tall, log }: ChartOptions): SVGSVGElement {
  const m = { left: 50, right: 12, top: 8, bottom: 34 };
  const w = width - m.left - m.right;
  const ht = tall - m.top - m.bottom;
  const svg = el("svg", { width, height: tall, viewBox: `0 0 ${width} ${tall}`, class: "nbi-chart", role: "img" });
  const edges = edgesOf(h);
  const lo = edges[0];
  const hi = edges[edges.length - 1];
  const span = hi - lo || 1;
  const top = Math.max(...h.c, 0);
  const x = (v: number) => m.left + ((v - lo) / span) * w;
  const y = (c: number) => m.top + ht - height(c, top, log) * ht;
  const title = el("title", {});
  title.textContent = `Histogram of ${h.c.reduce((a, b) => a + b, 0).toLocaleString("en-US")} values from ${formatStat(lo)} to ${formatStat(hi)}`;
  svg.append(title);
  const bars = el("g", { class: "nbi-bars" });
  h.c.forEach((count, i) => {
    if (!count) return;
    const x0 = x(edges[i]);
    const x1 = x(edges[i + 1]);
    const r = el("rect", {
      x: x0.toFixed(2),
      y: y(count).toFixed(2),
      width: Math.max(0.8, x1 - x0 - 0.5).toFixed(2),
      height: (m.top + ht - y(count)).toFixed(2),
    });
    const tip = el("title", {});
    tip.textContent = `[${formatStat(edges[i])}, ${formatStat(edges[i + 1])}): ${count.toLocaleString("en-US")}`;
    r.append(tip);
    bars.append(r);
  });
  svg.append(bars);
  const axis = el("g", { class: "nbi-axis" });
  axis.append(el("line", { x1: m.left, x2: m.left + w, y1: m.top + ht, y2: m.top + ht }));
  axis.append(el("line", { x1: m.left, x2: m.left, y1: m.top, y2: m.top + ht }));
  const allX = niceTicks(lo, hi, Math.max(3, Math.min(6, Math.floor(w / 55))));
  const xLabel = tickFormat(allX); // neighbours never print alike, even on a narrow range
  for (const v of spacedTicks(allX, x, xLabel)) {
    axis.append(el("line", { x1: x(v), x2: x(v), y1: m.top + ht, y2: m.top + ht + 4 }));
    axis.append(text(xLabel(v), x(v), m.top + ht + 14, "middle"));
  }
  const candidates = log
    ? [0, ...[1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9].filter((c) => c <= top)]
    : niceTicks(0, top, 3);
  // on the log scale 0 and 1 (and the decades of a tall bin) can sit closer than a label's height
  const yTicks: number[] = [];
  for (const c of candidates) if (!yTicks.length || Math.abs(y(c) - y(yTicks[yTicks.length - 1])) >= 12) yTicks.push(c);
  for (const c of yTicks) {
    axis.append(el("line", { x1: m.left - 4, x2: m.left, y1: y(c), y2: y(c) }));
    axis.append(text(formatCompact(c), m.left - 6, y(c) + 3, "end"));
  }
  axis.append(text("value", m.left + w / 2, tall - 4, "middle"));
  const yLabel = text(log ? "count (log)" : "count", 10, m.top + ht / 2, "middle");
  yLabel.setAttribute("transform", `rotate(-90 10 ${m.top + ht / 2})`);
  axis.append(yLabel);
  svg.append(axis);
  return svg;
}

function text(content: string, x: number, y: number, anchor: string): SVGTextElement {
  const t = el("text", { x: x.toFixed(1), y: y.toFixed(1), "text-anchor": anchor });
  t.textContent = content;
  return t;
}
