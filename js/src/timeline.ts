// Metrics over training steps (nbinspect.track): a row of small plots above the tree.
// Reads the payload's optional `timeline` field (render/payload.py `timeline()`); the tree
// itself shows the last interval's change through the compare columns.

import { formatStat } from "./format";
import type { Timeline as TimelineData, TimelineSeries } from "./payload";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 168;
const HEIGHT = 44;

const STYLES = `
.nbi-timeline { display: flex; flex-wrap: wrap; gap: 8px; align-items: stretch; margin: 0 0 8px;
  font: 12px var(--jp-ui-font-family, system-ui, sans-serif); color: var(--jp-ui-font-color1, #000000de); }
.nbi-timeline-title { flex-basis: 100%; color: var(--jp-ui-font-color2, #0000008a); }
.nbi-timeline-card { border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 4px; padding: 4px 6px;
  background: var(--jp-layout-color1, #fff); }
.nbi-timeline-key { max-width: ${WIDTH}px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  color: var(--jp-ui-font-color2, #0000008a); }
.nbi-timeline-value { font-variant-numeric: tabular-nums; font-weight: 600; }
.nbi-timeline svg { display: block; }
.nbi-timeline polyline { fill: none; stroke: var(--jp-brand-color1, #1976d2); stroke-width: 1.5; }
.nbi-timeline circle { fill: var(--jp-brand-color1, #1976d2); }
`;

/** Points of a sparkline: x by step, y scaled to the finite values' range (flat when constant). */
export function sparkPoints(
  steps: number[],
  values: (number | null)[],
  width = WIDTH,
  height = HEIGHT,
): [number, number][] {
  const pairs = steps
    .map((s, i) => [s, values[i]] as const)
    .filter((p): p is readonly [number, number] => p[1] !== null && Number.isFinite(p[1]));
  if (!pairs.length) return [];
  const x0 = pairs[0][0];
  const x1 = pairs[pairs.length - 1][0];
  let lo = Infinity;
  let hi = -Infinity;
  for (const [, v] of pairs) [lo, hi] = [Math.min(lo, v), Math.max(hi, v)];
  const pad = 3;
  const x = (s: number) => (x1 === x0 ? width / 2 : pad + ((s - x0) / (x1 - x0)) * (width - 2 * pad));
  const y = (v: number) => (hi === lo ? height / 2 : height - pad - ((v - lo) / (hi - lo)) * (height - 2 * pad));
  return pairs.map(([s, v]) => [Number(x(s).toFixed(1)), Number(y(v).toFixed(1))]);
}

function card(steps: number[], series: TimelineSeries): HTMLElement {
  const box = document.createElement("div");
  box.className = "nbi-timeline-card";
  box.dataset.key = series.key;
  const key = document.createElement("div");
  key.className = "nbi-timeline-key";
  key.textContent = series.key;
  const last = [...series.values].reverse().find((v) => v !== null) ?? null;
  const value = document.createElement("div");
  value.className = "nbi-timeline-value";
  value.textContent = last === null ? "–" : formatStat(last, 4);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(WIDTH));
  svg.setAttribute("height", String(HEIGHT));
  svg.setAttribute("role", "img");
  const points = sparkPoints(steps, series.values);
  svg.setAttribute("aria-label", `${series.key} over ${points.length} measurements`);
  const line = document.createElementNS(SVG, "polyline");
  line.setAttribute("points", points.map((p) => p.join(",")).join(" "));
  svg.append(line);
  if (points.length <= 30) {
    for (const [px, py] of points) {
      const dot = document.createElementNS(SVG, "circle");
      dot.setAttribute("cx", String(px));
      dot.setAttribute("cy", String(py));
      dot.setAttribute("r", "2");
      svg.append(dot);
    }
  }
  box.title = steps
    .map((s, i) => `step ${s}: ${series.values[i] === null ? "–" : formatStat(series.values[i], 6)}`)
    .join("\n");
  box.append(key, value, svg);
  return box;
}

/** The timeline strip; `update` redraws it from a payload's `timeline` (hidden when absent). */
export class Timeline {
  readonly root = document.createElement("div");

  constructor(host: HTMLElement) {
    this.root.className = "nbi-timeline";
    this.root.setAttribute("aria-label", "Metrics over training steps");
    host.append(this.root);
  }

  update(data: TimelineData | undefined): void {
    this.root.hidden = !data;
    if (!data) {
      this.root.replaceChildren();
      return;
    }
    const style = document.createElement("style");
    style.textContent = STYLES;
    const title = document.createElement("div");
    title.className = "nbi-timeline-title";
    const measured = data.steps.length;
    title.textContent = `Training dynamics: ${data.title} · ${measured} measurement${measured === 1 ? "" : "s"} · the tree's Rel. change is ‖Δ‖/‖W‖ over the last interval`;
    this.root.replaceChildren(style, title, ...data.series.map((s) => card(data.steps, s)));
  }
}
