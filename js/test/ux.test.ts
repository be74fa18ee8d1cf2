import { describe, expect, it } from "vitest";
import { COLUMNS, defaultColumns, pathTail } from "../src/columns";
import { flatten } from "../src/flatten";
import { edgesOf, spacedTicks } from "../src/histogram";
import type { Hist } from "../src/payload";
import { problemSummary } from "../src/toolbar";
import { buildTree, foldRepeats, mergeHists, mergeStats, type TreeNode } from "../src/tree";
import { fixture } from "./fixtures";

const FIELDS = ["numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf"];

/** A node holding the statistics of `values` (computed here, the independent reference). */
function part(values: number[], nan = 0): TreeNode {
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / n;
  const std = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / n);
  const stats = [
    n + nan,
    mean,
    std,
    Math.min(...values),
    Math.max(...values),
    values.reduce((a, b) => a + Math.abs(b), 0) / n,
    Math.sqrt(values.reduce((a, b) => a + b * b, 0)),
    values.filter((v) => v === 0).length / (n + nan),
    nan,
    0,
  ];
  return { stats } as unknown as TreeNode;
}

describe("mergeStats", () => {
  it("pools moments as if the parts were one tensor", () => {
    const a = [1, 2, 3, 0];
    const b = [-4, 10, 0.5];
    const all = [...a, ...b];
    const merged = mergeStats(FIELDS, [part(a), part(b, 2)]) ?? [];
    const whole = part(all).stats ?? [];
    expect(merged[0]).toBe(9); // 7 values and 2 NaN
    for (const f of ["mean", "std", "min", "max", "abs_mean", "l2"]) {
      const i = FIELDS.indexOf(f);
      expect(merged[i]).toBeCloseTo(whole[i] as number, 10);
    }
    expect(merged[FIELDS.indexOf("zeros")]).toBeCloseTo(1 / 9, 12); // one 0 among 9 elements
    expect(merged[FIELDS.indexOf("nan")]).toBe(2);
  });
});

describe("mergeHists", () => {
  it("keeps every count and puts them on the range holding all", () => {
    const a: Hist = { e: [0, 1], c: [4, 0, 0, 4] };
    const b: Hist = { e: [2, 3], c: [1, 1, 1, 1] };
    const m = mergeHists([a, null, b]) as Hist;
    expect(edgesOf(m)[0]).toBe(0);
    expect(edgesOf(m)[4]).toBe(3);
    expect(m.c.reduce((x, y) => x + y, 0)).toBe(12);
    // bins of width 0.75: a's 4 at [0, 0.25) and 4 at [0.75, 1]; b's quarter at [2, 2.25) in the third
    expect(m.c).toEqual([4, 4, 1, 3]);
  });
});

describe("pathTail", () => {
  it("keeps the end that tells paths apart", () => {
    expect(pathTail("transformer.h.0.mlp.c_fc.weight")).toBe("c_fc.weight");
    expect(pathTail("blocks.0.mlp.0.weight")).toBe("mlp.0.weight");
    expect(pathTail("weight")).toBe("");
  });
});

describe("spacedTicks", () => {
  it("drops every other tick until labels sit apart, keeping 0", () => {
    const ticks = [-0.08, -0.06, -0.04, -0.02, 0, 0.02, 0.04, 0.06, 0.08];
    const x = (v: number) => 100 + v * 1000; // 20 px between ticks: "-0.08" labels need ~38
    const kept = spacedTicks(ticks, x, String);
    expect(kept).toContain(0);
    expect(kept.length).toBeLessThan(ticks.length);
    for (let i = 1; i < kept.length; i++) expect(x(kept[i]) - x(kept[i - 1])).toBeGreaterThanOrEqual(38);
  });
});

describe("health in the tree", () => {
  const sick = () => {
    const p = fixture("tiny_lm");
    const j = p.tensors.key.findIndex((k, i) => k === "weight" && p.modules.key[p.tensors.module[i]] === "qkv");
    (p.tensors.problems as (string | null)[])[j] = "NaN";
    const rows: number[] = [];
    for (let m = p.tensors.module[j]; m >= 0; m = p.modules.parent[m]) rows.push(m);
    for (const m of rows) {
      (p.modules.problems as (string | null)[])[m] = "NaN";
      (p.modules.problem_tensors as number[])[m] = 1;
    }
    return p;
  };

  it("says how many tensors have each problem", () => {
    expect(problemSummary(sick())).toEqual(["1 tensor with NaN"]);
    expect(problemSummary(fixture("tiny_lm"))).toEqual([]);
  });

  it("filters to the problems and the rows above them; folds carry the union", () => {
    const t = foldRepeats(buildTree(sick()));
    const rows = flatten(t, { expanded: new Set(), sort: null, query: "", mode: "tree", problemsOnly: true });
    const paths = rows.map((r) => t.nodes[r.id].path);
    expect(paths[paths.length - 1]).toMatch(/attn\.qkv\.weight$/);
    expect(rows.every((r) => t.nodes[r.id].problems === "NaN")).toBe(true);
    const fold = t.nodes.find((n) => n.kind === "group");
    expect(fold?.problems).toBe("NaN");
    expect(fold?.problemTensors).toBe(1);
  });
});

describe("defaultColumns", () => {
  it("keeps the most important columns that fit, all when the width is unknown", () => {
    const t = buildTree(fixture("tiny_lm"));
    const offered = COLUMNS.filter((c) => c.available(t));
    const all = defaultColumns(offered, 0);
    expect(all).toEqual(new Set(offered.filter((c) => c.initial).map((c) => c.id)));
    const narrow = defaultColumns(offered, 500);
    const width = offered.filter((c) => narrow.has(c.id)).reduce((a, c) => a + c.min, 16);
    expect(width).toBeLessThanOrEqual(500);
    expect(narrow.has("name") && narrow.has("type") && narrow.has("params")).toBe(true);
    expect(narrow.has("train")).toBe(false);
  });
});
