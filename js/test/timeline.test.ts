// The training-dynamics charts: smoothing, scales and rendering from a payload's timeline,
// and the user's choices kept across live updates.

import { afterEach, describe, expect, it } from "vitest";
import { logTicks, nearestIndex, smooth, Timeline, wantsLog, yTickLabel, yTicks } from "../src/timeline";
import { payload } from "./fixtures";
import { mount, unmountAll } from "./mount";

afterEach(unmountAll);

describe("smooth", () => {
  it("is TensorBoard's debiased moving average, by hand", () => {
    // w = 0.5: m1 = 0.5*2 = 1 -> /0.5 = 2; m2 = 0.5*1 + 0.5*4 = 2.5 -> /0.75 = 3.333...
    const out = smooth([2, 4, null], 0.5);
    expect(out[0]).toBeCloseTo(2, 12);
    expect(out[1]).toBeCloseTo(2.5 / 0.75, 12);
    expect(out[2]).toBeNull();
    expect(smooth([1, 5], 0)).toEqual([1, 5]);
  });
});

describe("scales", () => {
  it("wants a log axis for positive values spanning more than a factor of 20, as manager.plot", () => {
    expect(wantsLog([1e-4, 1e-2, null])).toBe(true);
    expect(wantsLog([1, 10])).toBe(false);
    expect(wantsLog([-1, 100])).toBe(false);
  });

  it("puts log ticks on powers of ten", () => {
    expect(logTicks(2e-4, 3e-2)).toEqual([1e-4, 1e-3, 1e-2, 1e-1]);
  });

  it("finds the nearest step", () => {
    expect(nearestIndex([0, 50, 100], 70)).toBe(1);
    expect(nearestIndex([0, 50, 100], 80)).toBe(2);
  });
});

describe("y tick labels", () => {
  // narrow ranges (a loss flattening out, a value far from 0 that barely moves) and wide ones
  const RANGES: [number, number][] = [
    [13.72, 13.9],
    [0.001, 0.0012],
    [1e6, 1e6 + 3],
    [-1, 1],
    [0, 1e-9],
    [1.0001, 1.0002],
    [-2.5e-7, -2.4e-7],
    [99990, 100010],
    [0, 1e6],
    [-5e5, 5e5],
    [0.5, 123456],
    [3, 4],
  ];

  it("tells neighbouring ticks apart and reads back within half a step", () => {
    for (const [lo, hi] of RANGES) {
      const ticks = yTicks(lo, hi, false);
      const label = yTickLabel(ticks, false);
      const texts = ticks.map(label);
      expect(new Set(texts).size, `${lo}..${hi}: ${texts}`).toBe(ticks.length);
      expect(ticks.length).toBeGreaterThanOrEqual(2);
      const step = Math.min(...ticks.slice(1).map((t, i) => t - ticks[i]));
      ticks.forEach((t, i) => {
        expect(Math.abs(Number(texts[i]) - t), `${lo}..${hi}: ${texts[i]} for ${t}`).toBeLessThanOrEqual(
          step / 2 + Math.abs(t) * 1e-12,
        );
      });
    }
  });

  it("labels the reported case 13.72..13.9 with two decimals", () => {
    const ticks = yTicks(13.72, 13.9, false);
    expect(ticks.map(yTickLabel(ticks, false))).toEqual(["13.75", "13.80", "13.85", "13.90"]);
    const big = yTicks(1e6, 1e6 + 3, false);
    expect(big.map(yTickLabel(big, false))).toEqual(["1000000", "1000001", "1000002", "1000003"]);
    const tiny = yTicks(0, 1e-9, false);
    expect(tiny.map(yTickLabel(tiny, false))[0]).toBe("0");
    expect(tiny.map(yTickLabel(tiny, false)).at(-1)).toBe("1.0e-9");
  });

  it("keeps log axes on powers of ten, and tells two close ends apart", () => {
    const ticks = yTicks(2e-4, 3e-2, true);
    expect(ticks.map(yTickLabel(ticks, true))).toEqual(["0.001", "0.01"]);
    const ends = yTicks(13.72, 13.74, true); // no power of ten inside: the two ends
    expect(ends).toEqual([13.72, 13.74]);
    expect(ends.map(yTickLabel(ends, true))).toEqual(["13.72", "13.74"]);
  });

  it("draws the narrow series' axis without repeated labels", () => {
    const host = document.createElement("div");
    new Timeline(host).update({
      title: "",
      steps: [1, 2, 3, 4],
      series: [{ key: "loss", values: [13.9, 13.8, 13.75, 13.72] }],
      shown: 1,
    });
    const texts = [...host.querySelectorAll(".nbi-tick text")].map((t) => t.textContent ?? "");
    const y = texts.filter((t) => t.includes("."));
    expect(y).toEqual(["13.75", "13.80", "13.85", "13.90"]);
  });
});

const data = {
  title: "steps 0→6, measured every 2 steps",
  steps: [2, 4, 6],
  series: [
    { key: "param_change/norm_l2", values: [0.5, 0.25, 0.125] },
    { key: "sparse/kl_at_1e-06", values: [null, null, null] },
    { key: "gradient/norm", values: [3, 2, 1] },
  ],
  shown: 2,
};

describe("Timeline", () => {
  it("draws a chart with axes per shown series, the rest in the picker, and hides without data", () => {
    const host = document.createElement("div");
    const line = new Timeline(host);
    line.update(data);
    const cards = host.querySelectorAll(".nbi-timeline-card");
    expect(cards).toHaveLength(2);
    expect(cards[0].querySelector(".nbi-timeline-value")?.textContent).toBe("step 6: 0.125");
    expect(cards[0].querySelectorAll("circle")).toHaveLength(3);
    const ticks = [...cards[0].querySelectorAll(".nbi-tick text")].map((t) => t.textContent);
    expect(ticks).toContain("4"); // a step on the x axis
    expect(cards[1].querySelector(".nbi-timeline-value")?.textContent).toBe("–");
    expect(host.querySelectorAll(".nbi-timeline-picker input")).toHaveLength(3);
    expect(host.querySelector(".nbi-timeline-title")?.textContent).toContain("3 measurements");
    line.update(undefined);
    expect(line.root.hidden).toBe(true);
    expect(host.querySelectorAll(".nbi-timeline-card")).toHaveLength(0);
  });

  it("keeps the metrics the user picked across updates", () => {
    const host = document.createElement("div");
    const line = new Timeline(host);
    line.update(data);
    const pick = host.querySelector<HTMLInputElement>('.nbi-timeline-picker input[data-key="gradient/norm"]')!;
    pick.checked = true;
    pick.dispatchEvent(new Event("change"));
    expect(host.querySelectorAll(".nbi-timeline-card")).toHaveLength(3);
    line.update({ ...data, steps: [2, 4, 6, 8], series: data.series.map((s) => ({ ...s, values: [...s.values, 1] })) });
    const keys = [...host.querySelectorAll<HTMLElement>(".nbi-timeline-card")].map((c) => c.dataset.key);
    expect(keys).toEqual(["param_change/norm_l2", "sparse/kl_at_1e-06", "gradient/norm"]);
  });
});

describe("the widget with a timeline", () => {
  it("draws the charts above the tree and redraws them when the payload changes", () => {
    const first = {
      ...payload(),
      timeline: { title: "steps 0→2", steps: [2], series: [{ key: "param_change/norm_l2", values: [1] }], shown: 1 },
    };
    const { model, el } = mount(first);
    expect(el.firstElementChild?.className).toBe("nbi-timeline");
    expect(el.querySelectorAll(".nbi-timeline circle")).toHaveLength(1);
    model.change("payload", {
      ...payload(),
      timeline: {
        title: "steps 2→4",
        steps: [2, 4],
        series: [{ key: "param_change/norm_l2", values: [1, 0.5] }],
        shown: 1,
      },
    });
    expect(el.querySelectorAll(".nbi-timeline circle")).toHaveLength(2);
    expect(el.querySelector(".nbi-timeline-value")?.textContent).toBe("step 4: 0.5");
    expect(el.querySelector("[role=treegrid]")).not.toBeNull();
    unmountAll();
    expect(el.querySelector(".nbi-timeline")).toBeNull();
  });
});
