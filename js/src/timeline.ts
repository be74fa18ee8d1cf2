// Metrics over training steps (nbinspect.track): a row of small plots above the tree.
// Reads the payload's optional `timeline` field (render/payload.py `timeline()`); the tree
// itself shows the last interval's change through the compare columns.

import { h, svg } from "./dom";
import { formatStat } from "./format";
import type { Timeline as TimelineData, TimelineSeries } from "./payload";

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
  const box = h("div", "nbi-timeline-card");
  box.dataset.key = series.key;
  const last = [...series.values].reverse().find((v) => v !== null) ?? null;
  const points = sparkPoints(steps, series.values);
  const chart = svg("svg", {
    width: WIDTH,
    height: HEIGHT,
    role: "img",
    "aria-label": `${series.key} over ${points.length} measurements`,
  });
  chart.append(svg("polyline", { points: points.map((p) => p.join(",")).join(" ") }));
  if (points.length <= 30) for (const [cx, cy] of points) chart.append(svg("circle", { cx, cy, r: 2 }));
  box.title = steps
    .map((s, i) => `step ${s}: ${series.values[i] === null ? "–" : formatStat(series.values[i], 6)}`)
    .join("\n");
  box.append(
    h("div", "nbi-timeline-key", series.key),
    h("div", "nbi-timeline-value", last === null ? "–" : formatStat(last, 4)),
    chart,
  );
  return box;
}

/** The timeline strip; `update` redraws it from a payload's `timeline` (hidden when absent). */
export class Timeline {
  readonly root = h("div", "nbi-timeline", undefined, { "aria-label": "Metrics over training steps" });

  constructor(host: HTMLElement) {
    host.append(this.root);
  }

  update(data: TimelineData | undefined): void {
    this.root.hidden = !data;
    if (!data) {
      this.root.replaceChildren();
      return;
    }
    const measured = data.steps.length;
    const title = h(
      "div",
      "nbi-timeline-title",
      `Training dynamics: ${data.title} · ${measured} measurement${measured === 1 ? "" : "s"} · the tree's Rel. change is ‖Δ‖/‖W‖ over the last interval`,
    );
    this.root.replaceChildren(h("style", "", STYLES), title, ...data.series.map((s) => card(data.steps, s)));
  }
}
