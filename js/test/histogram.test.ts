import { describe, expect, it } from "vitest";
import { chart, edgesOf, niceTicks, sparkline } from "../src/histogram";

describe("niceTicks", () => {
  it("gives round ticks inside the range, at least as many as asked", () => {
    expect(niceTicks(-4.34, 4.1, 3)).toEqual([-4, -2, 0, 2, 4]);
    expect(niceTicks(0, 1, 3)).toEqual([0, 0.5, 1]);
    expect(niceTicks(0.0012, 0.0031, 3)).toEqual([0.0015, 0.002, 0.0025, 0.003]);
    expect(niceTicks(2, 2)).toEqual([2]);
  });
});

describe("histograms", () => {
  const h = { e: [-1, 1], c: [1, 0, 100, 3] };

  it("expands uniform [lo, hi] edges and keeps explicit ones", () => {
    expect(edgesOf(h)).toEqual([-1, -0.5, 0, 0.5, 1]);
    expect(edgesOf({ e: [0, 1, 5], c: [2, 2] })).toEqual([0, 1, 5]);
  });

  it("draws one bar per non-empty bin, tallest bin full height", () => {
    const svg = sparkline(h, 40, 10);
    const bars = [...svg.querySelectorAll("rect")];
    expect(bars).toHaveLength(3);
    expect(Math.max(...bars.map((b) => Number(b.getAttribute("height"))))).toBe(10);
  });

  it("labels the axes and lifts small bins on a log scale", () => {
    const linear = chart(h, { width: 300, height: 170, log: false });
    const log = chart(h, { width: 300, height: 170, log: true });
    expect(linear.textContent).toContain("value");
    expect(log.textContent).toContain("count (log)");
    const first = (svg: SVGSVGElement) => Number(svg.querySelector(".nbi-bars rect")!.getAttribute("height"));
    expect(first(log)).toBeGreaterThan(first(linear));
  });

  it.each([
    [1000.1, 1000.3],
    [-1e-6, 1e-6],
    [13.72, 13.9],
    [-4.3, 4.1],
  ])("x-axis labels on [%f, %f] are all different and read back near their tick", (lo, hi) => {
    const svg = chart({ e: [lo, hi], c: [3, 5, 8, 5, 3] }, { width: 300, height: 170, log: false });
    const below = [...svg.querySelectorAll(".nbi-axis text")].filter((t) => t.textContent !== "value");
    const labels = below.filter((t) => t.getAttribute("y") === "150.0").map((t) => t.textContent ?? ""); // under the axis
    expect(labels.length).toBeGreaterThanOrEqual(2);
    expect(new Set(labels).size).toBe(labels.length);
    const values = labels.map(Number);
    expect(values.every((v, i) => i === 0 || v > values[i - 1])).toBe(true); // in order, none repeated
    for (const v of values) expect(v).toBeGreaterThanOrEqual(lo - (hi - lo));
  });
});
