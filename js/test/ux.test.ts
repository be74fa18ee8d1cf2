import { describe, expect, it } from "vitest";
import { COLUMNS, defaultColumns, pathTail } from "../src/columns";
import { flatten } from "../src/flatten";
import { spacedTicks } from "../src/histogram";
import { problemSummary } from "../src/toolbar";
import { buildTree } from "../src/tree";
import { fixture } from "./fixtures";

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
    // Python's health roll-up of the fold holding that tensor's block
    const fold = p.folds.rows.findIndex((members) => members.some((m) => rows.includes(m)));
    (p.folds.problems as (string | null)[])[fold] = "NaN";
    (p.folds.problem_tensors as number[])[fold] = 1;
    return p;
  };

  it("says how many tensors have each problem", () => {
    expect(problemSummary(sick())).toEqual(["1 tensor with NaN"]);
    expect(problemSummary(fixture("tiny_lm"))).toEqual([]);
  });

  it("filters to the problems and the rows above them; folds carry Python's roll-up", () => {
    const t = buildTree(sick());
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
