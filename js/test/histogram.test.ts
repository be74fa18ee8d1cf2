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
});
