// The training-dynamics strip: sparkline geometry and rendering from a payload's timeline.

import { afterEach, describe, expect, it } from "vitest";
import { sparkPoints, Timeline } from "../src/timeline";
import { payload } from "./fixtures";
import { mount, unmountAll } from "./mount";

afterEach(unmountAll);

describe("sparkPoints", () => {
  it("spans the width by step and the height by value, skipping missing values", () => {
    const pts = sparkPoints([10, 20, 30, 40], [1, null, 3, 2], 106, 46);
    expect(pts).toEqual([
      [3, 43],
      [69.7, 3],
      [103, 23],
    ]);
  });

  it("draws a constant series flat in the middle, and nothing without values", () => {
    expect(sparkPoints([1, 2], [5, 5], 100, 40)).toEqual([
      [3, 20],
      [97, 20],
    ]);
    expect(sparkPoints([1], [null], 100, 40)).toEqual([]);
  });
});

describe("Timeline", () => {
  it("renders one card per series with its last value, and hides without data", () => {
    const host = document.createElement("div");
    const line = new Timeline(host);
    line.update({
      title: "steps 4→6",
      steps: [2, 4, 6],
      series: [
        { key: "param_change/norm_l2", values: [0.5, 0.25, 0.125] },
        { key: "sparse/kl_at_1e-06", values: [null, null, null] },
      ],
    });
    const cards = host.querySelectorAll(".nbi-timeline-card");
    expect(cards).toHaveLength(2);
    expect(cards[0].querySelector(".nbi-timeline-value")?.textContent).toBe("0.125");
    expect(cards[0].querySelectorAll("circle")).toHaveLength(3);
    expect(cards[1].querySelector(".nbi-timeline-value")?.textContent).toBe("–");
    expect(host.querySelector(".nbi-timeline-title")?.textContent).toContain("steps 4→6 · 3 measurements");
    line.update(undefined);
    expect(line.root.hidden).toBe(true);
    expect(host.querySelectorAll(".nbi-timeline-card")).toHaveLength(0);
  });
});

describe("the widget with a timeline", () => {
  it("draws the strip above the tree and redraws it when the payload changes", () => {
    const first = {
      ...payload(),
      timeline: { title: "steps 0→2", steps: [2], series: [{ key: "param_change/norm_l2", values: [1] }] },
    };
    const { model, el } = mount(first);
    expect(el.firstElementChild?.className).toBe("nbi-timeline");
    expect(el.querySelectorAll(".nbi-timeline circle")).toHaveLength(1);
    model.change("payload", {
      ...payload(),
      timeline: { title: "steps 2→4", steps: [2, 4], series: [{ key: "param_change/norm_l2", values: [1, 0.5] }] },
    });
    expect(el.querySelectorAll(".nbi-timeline circle")).toHaveLength(2);
    expect(el.querySelector(".nbi-timeline-value")?.textContent).toBe("0.5");
    expect(el.querySelector("[role=treegrid]")).not.toBeNull();
    unmountAll();
    expect(el.querySelector(".nbi-timeline")).toBeNull();
  });
});
