// The heatmap's index arithmetic (on cases nbinspect/core/plane.py wrote), its readout,
// its text alternative, the states it says, and that a late answer to an old request is
// dropped. The canvas itself is drawn in chromium (tests/browser/test_heatmap.py).

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Heatmap } from "../src/heatmap";
import { rgba } from "../src/heatmapPaint";
import {
  cellIndex,
  cellOf,
  defaultPlane,
  type Plane,
  planeSize,
  type RegionHeader,
  type RegionRequest,
} from "../src/heatmapRegion";

interface Case {
  shape: number[];
  plane: Plane;
  cell: [number, number];
  index: number[];
}
const CASES: Case[] = JSON.parse(readFileSync(join(import.meta.dirname, "plane_cases.json"), "utf-8"));

describe("plane arithmetic", () => {
  it("maps cells to indices as Python does, and back", () => {
    for (const c of CASES) {
      expect(cellIndex(c.shape, c.plane, ...c.cell)).toEqual(c.index);
      expect(cellOf(c.shape, c.plane, c.index)).toEqual(c.cell);
    }
  });
  it("lays out the default plane: rows = first axis, experts x outputs for 3-D", () => {
    expect(defaultPlane([4, 6, 3])).toEqual({ rows: [0, 1], cols: [2], fixed: [] });
    expect(planeSize([5, 3, 2, 2], defaultPlane([5, 3, 2, 2]))).toEqual([5, 12]);
    expect(planeSize([9], defaultPlane([9]))).toEqual([1, 9]);
  });
  it("packs colours as ImageData words", () => {
    expect(rgba("#ff0080")).toBe(0xff8000ff);
    expect(rgba("#00000000")).toBe(0);
  });
});

const PALETTE = Array.from({ length: 256 }, (_, i) => `#${i.toString(16).padStart(2, "0").repeat(3)}`);
const BASE = {
  palette: PALETTE,
  special: { nan: 251, posinf: 252, neginf: 253, zero: 254, empty: 255 },
  flags: { nan: 1, posinf: 2, neginf: 4, outlier: 8, zero: 16, partial: 32 },
};

function answer(req: RegionRequest, exact: boolean): [RegionHeader, DataView[]] {
  const grid: [number, number] = [2, 3];
  const header: RegionHeader = {
    ...BASE,
    seq: req.seq,
    state: "ok",
    message: "",
    tensor: req.tensor,
    shape: [40, 30],
    dtype: "float32",
    plane: defaultPlane([40, 30]),
    rows: exact ? [10, 12] : [0, 40],
    cols: exact ? [5, 8] : [0, 30],
    block: exact ? [1, 1] : [20, 10],
    grid,
    exact,
    stat: "mean",
    limits: [-0.5, 0.5],
    counts: { nan: 1, posinf: 0, neginf: 0, zero_blocks: 0, outlier_blocks: 0 },
    bad: [[1, 2, 1, 0, 0]],
  };
  const values = new Float64Array([0.1, -0.2, 0.3, 0.25, 0.5, Number.NaN]);
  const buf = (a: ArrayBufferView) => new DataView(a.buffer);
  return [
    header,
    [
      buf(new Uint8Array([125, 100, 150, 140, 250, 251])),
      buf(new Uint8Array([0, 0, 0, 0, 0, 33])),
      buf(values),
      buf(new Float32Array([0.2, 0.4, 0.6, 0.5, 0.9, 0.7])),
    ],
  ];
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe("Heatmap", () => {
  it("says what it shows, reads a block and jumps to the flagged one", async () => {
    const asked: RegionRequest[] = [];
    const map = new Heatmap({
      tensor: "w",
      shape: [40, 30],
      fetch: async (req) => {
        asked.push(req);
        return answer(req, false);
      },
    });
    document.body.append(map.root);
    await settle();
    expect(asked[0]).toMatchObject({ tensor: "w", rows: [0, 40], cols: [0, 30], plane: defaultPlane([40, 30]) });
    const box = map.root.querySelector(".nbi-heat-box") as HTMLElement;
    expect(box.getAttribute("role")).toBe("img");
    expect(box.getAttribute("aria-label")).toBe(
      "Heatmap of w, 40 × 30 float32; rows 0–39, columns 0–29, each pixel 20 × 10 values (mean); " +
        "colours from -0.5 to 0.5; in view: 1 NaN, 0 +Inf, 0 −Inf, 0 all-zero blocks, 0 outlier blocks.",
    );
    expect(map.describe(0, 1)).toBe("rows 0–19, cols 10–19: [0, 10] … [19, 19]\nmean -0.2, max |x| 0.4");
    // the keyboard: focus puts the cursor on (0, 0); n goes to the next NaN/Inf/outlier block
    box.dispatchEvent(new Event("focus"));
    box.dispatchEvent(new KeyboardEvent("keydown", { key: "n" }));
    const readout = map.root.querySelector(".nbi-heat-readout") as HTMLElement;
    expect(readout.textContent).toBe("rows 20–39, cols 20–29: [20, 20] … [39, 29]\nmean NaN, max |x| 0.7; 1 NaN");
    expect(box.getAttribute("aria-describedby")).toBe(readout.id);
    map.destroy();
  });

  it("shows single values with their index when exact", async () => {
    const map = new Heatmap({ tensor: "w", shape: [40, 30], fetch: async (req) => answer(req, true) });
    await settle();
    expect(map.describe(1, 1)).toBe("w[11, 6] = 0.5");
    expect(map.describe(1, 2)).toBe("w[11, 7] = NaN");
    map.destroy();
  });

  it("drops an answer to an older request and says why a tensor has no values", async () => {
    const pending: (() => void)[] = [];
    let n = 0;
    const map = new Heatmap({
      tensor: "w",
      shape: [40, 30],
      fetch: (req) => {
        n++;
        if (n === 1) return new Promise((r) => pending.push(() => r(answer(req, false))));
        const meta: RegionHeader = {
          ...BASE,
          seq: req.seq,
          state: "meta",
          message: "on the meta device",
          tensor: "w",
          shape: [40, 30],
        };
        return Promise.resolve([meta, []]);
      },
    });
    await settle();
    map.zoomAt(0.5, 0.5, 0.5); // a second request while the first is pending
    await new Promise((r) => setTimeout(r, 80));
    expect(pending).toHaveLength(1);
    pending[0]();
    await settle();
    expect(map.root.querySelector(".nbi-heat-msg")?.textContent).toBe("No values: on the meta device");
    expect(map.root.querySelector(".nbi-heat-box canvas")).toBeNull();
    map.destroy();
  });
});
