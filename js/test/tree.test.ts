import { describe, expect, it } from "vitest";
import { ancestors, comparator, expandedAll, expandedToDepth, flatten, matches, type RowOptions } from "../src/flatten";
import { buildTree } from "../src/tree";
import { payload } from "./fixtures";

const tree = () => buildTree(payload());
const byPath = (t: ReturnType<typeof tree>, path: string) => t.nodes.find((n) => n.path === path)!;
const state = (over: Partial<RowOptions> = {}): RowOptions => ({
  expanded: new Set(),
  sort: null,
  query: "",
  mode: "tree",
  ...over,
});
const paths = (t: ReturnType<typeof tree>, s: RowOptions) => flatten(t, s).map((r) => t.nodes[r.id].path);

describe("buildTree", () => {
  it("gives modules dotted paths and tensors under their module, tensors first", () => {
    const t = buildTree(payload());
    expect(t.nodes[0].key).toBe("Net");
    expect(t.nodes[0].path).toBe("");
    const stem = byPath(t as never, "stem");
    expect(stem.children.map((c) => t.nodes[c].path)).toEqual(["stem.weight"]);
    expect(byPath(t as never, "blocks.3.fc.weight").depth).toBe(4);
    expect(t.has).toEqual({ trace: false, stats: true, compare: true });
  });

  it("rolls the largest relative change up to every ancestor", () => {
    const t = buildTree(payload());
    expect(t.nodes[0].relChange).toBe(0.5);
    expect(byPath(t, "head").relChange).toBe(0);
  });
});

describe("folds", () => {
  it("shows each fold of payload.folds as one group in place of its members", () => {
    const p = payload();
    expect(p.folds.label).toEqual(["0–3 ×4"]); // Python folded blocks.0–3 and left the odd blocks.4
    const t = buildTree(p);
    const blocks = byPath(t, "blocks");
    const kids = blocks.children.map((c) => t.nodes[c]);
    expect(kids.map((k) => k.key)).toEqual(["blocks.0–3 ×4", "4"]);
    expect(kids[0].kind).toBe("group");
    expect(kids[0].path).toBe("blocks.0–3");
    expect(kids[0].count).toBe(4);
    expect(kids[0].params).toBe(4 * 64);
    expect(kids[0].children.map((c) => t.nodes[c].path)).toEqual(["blocks.0", "blocks.1", "blocks.2", "blocks.3"]);
    expect(ancestors(t, byPath(t, "blocks.2").id)).toEqual([kids[0].id, blocks.id, 0]);
  });

  it("reads the group's histogram and statistics from the payload instead of pooling them", () => {
    const p = payload();
    const t = buildTree(p);
    const group = t.nodes.find((n) => n.kind === "group")!;
    expect(group.hist).toEqual(p.folds.hist?.[0]);
    expect(group.histScope).toBe("weight matrices");
    expect(group.stats).toBeNull(); // the members have no module statistics in this payload, so neither has the fold
  });

  it("folds nothing Python did not fold, however alike the rows look", () => {
    const p = payload();
    p.folds = { path: [], label: [], rows: [] };
    const t = buildTree(p);
    expect(t.nodes.some((n) => n.kind === "group")).toBe(false);
    expect(byPath(t, "blocks").children.map((c) => t.nodes[c].key)).toEqual(["0", "1", "2", "3", "4"]);
  });

  it("keeps folds collapsed at any depth but opens them with expand all", () => {
    const t = tree();
    expect(paths(t, state({ expanded: expandedToDepth(t, 9) }))).not.toContain("blocks.0");
    expect(paths(t, state({ expanded: expandedAll(t) }))).toContain("blocks.0.fc.weight");
  });
});

describe("flatten", () => {
  it("shows only the root when nothing is expanded, and levels follow nesting", () => {
    const t = tree();
    expect(flatten(t, state())).toEqual([{ id: 0, level: 1, expandable: true, expanded: false }]);
    const rows = flatten(t, state({ expanded: expandedToDepth(t, 1) }));
    expect(rows.map((r) => [t.nodes[r.id].path, r.level])).toEqual([
      ["", 1],
      ["stem", 2],
      ["blocks", 2],
      ["head", 2],
    ]);
  });

  it("sorts within each parent so the tree stays a tree", () => {
    const t = tree();
    const s = state({ expanded: expandedAll(t), sort: { value: (n) => n.params, descending: true } });
    const got = paths(t, s);
    expect(got.slice(0, 4)).toEqual(["", "blocks", "blocks.0–3", "blocks.0"]);
    expect(got.indexOf("head")).toBe(got.length - 2); // smallest child of the root comes last
    expect(got.at(-1)).toBe("head.weight");
    for (const row of flatten(t, s)) {
      const parent = t.nodes[row.id].parent;
      if (parent >= 0) expect(got.indexOf(t.nodes[parent].path)).toBeLessThan(got.indexOf(t.nodes[row.id].path));
    }
  });

  it("puts missing values last in both directions and breaks ties by tree order", () => {
    const t = buildTree(payload());
    for (const descending of [false, true]) {
      const cmp = comparator((n) => n.flops, descending);
      expect(cmp(t.nodes[1], t.nodes[2])).toBeLessThan(0);
    }
    const cmp = comparator((n) => (n.kind === "tensor" ? null : n.params), false);
    const sorted = t.nodes.slice().sort(cmp);
    expect(sorted.at(-1)!.kind).toBe("tensor");
  });

  it("lists leaf modules or tensors globally in the flat modes", () => {
    const t = tree();
    const leaves = paths(t, state({ mode: "leaves", sort: { value: (n) => n.params, descending: false } }));
    expect(leaves).toEqual(["head", "blocks.4.fc", "stem", "blocks.0.fc", "blocks.1.fc", "blocks.2.fc", "blocks.3.fc"]);
    const tensors = flatten(t, state({ mode: "tensors" }));
    expect(tensors.every((r) => t.nodes[r.id].kind === "tensor" && r.level === 1)).toBe(true);
    expect(tensors).toHaveLength(7);
  });

  it("filters by name or type, keeping ancestors open and dropping the rest", () => {
    const t = tree();
    expect(paths(t, state({ query: "head" }))).toEqual(["", "head", "head.weight"]);
    expect(paths(t, state({ query: "BLOCKS.2.FC" }))).toEqual([
      "",
      "blocks",
      "blocks.0–3",
      "blocks.2",
      "blocks.2.fc",
      "blocks.2.fc.weight",
    ]);
    const byType = paths(t, state({ query: "linear", mode: "leaves" }));
    expect(byType).toHaveLength(7);
    expect(paths(t, state({ query: "no such thing" }))).toEqual([]);
    const hit = matches(t, "stem");
    expect(hit[0]).toBe(1);
    expect(hit[byPath(t, "stem").id]).toBe(2);
  });
});
