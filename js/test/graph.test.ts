// The graph view's model and layout on payloads Python built (fixtures from build_payload):
// visibility, lifted edges, folds, side stubs, composed layout geometry and its cache.

import { afterEach, describe, expect, it } from "vitest";
import { GraphLayout } from "../src/graphLayout";
import { buildGraph, inputLabel, label, view } from "../src/graphModel";
import { scaled } from "../src/graphSvg";
import { initialExpansion } from "../src/graphView";
import { fixture } from "./fixtures";
import { mount, unmountAll } from "./mount";

afterEach(unmountAll);

const data = () => {
  const g = fixture("tiny_lm").graph;
  if (!g) throw new Error("tiny_lm fixture has no graph");
  return g;
};

describe("graph layout", () => {
  it("places every child inside its box, and the layout holds every rect", () => {
    const g = buildGraph(data());
    const expanded = new Set(g.expandable.flatMap((e, i) => (e ? [i] : [])));
    const v = view(g, { expanded, unfolded: new Set() });
    const l = new GraphLayout().layout(g, v, new Set(), expanded, true);
    for (const [item, box] of v.box) {
      const r = l.rects.get(item);
      if (!r) continue;
      expect(r.x + r.w).toBeLessThanOrEqual(l.width + 0.5);
      expect(r.y + r.h).toBeLessThanOrEqual(l.height + 0.5);
      if (box < 0) continue;
      const b = l.rects.get(box)!;
      expect(r.x).toBeGreaterThanOrEqual(b.x - 0.5);
      expect(r.y).toBeGreaterThanOrEqual(b.y - 0.5);
      expect(r.x + r.w).toBeLessThanOrEqual(b.x + b.w + 0.5);
      expect(r.y + r.h).toBeLessThanOrEqual(b.y + b.h + 0.5);
    }
  });
});

const byName = (g: ReturnType<typeof buildGraph>, name: string, kind = "call") =>
  g.data.nodes.name.findIndex((n, i) => n === name && g.data.nodes.kind[i] === kind);

/** Edges of a view as "producer > consumer" names (inputs/outputs by kind). */
function named(g: ReturnType<typeof buildGraph>, v: ReturnType<typeof view>): string[] {
  const d = g.data.nodes;
  const nm = (i: number) => (d.kind[i] === "call" ? d.name[i] || "<root>" : `${d.kind[i]}:${d.name[i]}`);
  return v.edges.map((e) => `${nm(e.src)} > ${nm(e.dst)}`).sort();
}

describe("graph model (tiny_lm traced in Python)", () => {
  it("collapsed root: input -> model -> output", () => {
    const g = buildGraph(data());
    const v = view(g, { expanded: new Set(), unfolded: new Set() });
    expect(named(g, v)).toEqual(["<root> > output:output", "input:0 > <root>"]);
  });

  it("the first view expands the root, folds the blocks and hides the position arange", () => {
    const g = buildGraph(data());
    const v = view(g, { expanded: initialExpansion(g), unfolded: new Set() });
    // TinyLM.forward: x = tok_emb(idx) + pos_emb(arange); blocks; lm_head(ln_f(x))
    expect(named(g, v)).toEqual(
      [
        "input:0 > tok_emb",
        "tok_emb > op:add",
        "pos_emb > op:add",
        "op:add > blocks.0",
        "blocks.0 > ln_f",
        "ln_f > lm_head",
        "lm_head > output:output",
      ].sort(),
    );
    expect(v.hiddenConstants).toBe(1);
    expect(v.nodes).not.toContain(byName(g, "blocks.1"));
    expect(label(g, byName(g, "blocks.0"), new Set())).toBe("blocks.0–1 ×2");
    expect(label(g, byName(g, "0", "input"), new Set())).toBe("input"); // the only positional argument, not "0"
  });

  it("inputs: a positional argument is 'input' (numbered when there are several), a keyword keeps its name", () => {
    expect(inputLabel("0", false)).toBe("input");
    expect(inputLabel("0", true)).toBe("input 0");
    expect(inputLabel("1.mask", true)).toBe("input 1.mask");
    expect(inputLabel("input_ids", true)).toBe("input_ids");
    expect(inputLabel("batch.0", false)).toBe("batch.0");
  });

  it("an expanded folded block stands for every member: its last op feeds ln_f, no edge between members", () => {
    const g = buildGraph(data());
    const b0 = byName(g, "blocks.0");
    const v = view(g, { expanded: new Set([...initialExpansion(g), b0]), unfolded: new Set() });
    const edges = named(g, v);
    expect(edges).toContain("op:add > ln_f"); // blocks.1's residual add, drawn as blocks.0's
    expect(edges).toContain("op:add > blocks.0.ln_1");
    expect(edges.filter((e) => e.includes("blocks.1"))).toEqual([]);
    expect(edges).toContain("blocks.0.ln_1 > blocks.0.attn");
    expect(edges).toContain("blocks.0.attn > op:add");
  });

  it("unfolded, both blocks show and connect", () => {
    const g = buildGraph(data());
    const b0 = byName(g, "blocks.0");
    const v = view(g, { expanded: initialExpansion(g), unfolded: new Set([b0]) });
    expect(named(g, v)).toContain("blocks.0 > blocks.1");
    expect(label(g, b0, new Set([b0]))).toBe("blocks.0");
  });

  it("equal blocks share one layout: unfolding and expanding both lays out blocks.1 from the cache", () => {
    const g = buildGraph(data());
    const b0 = byName(g, "blocks.0");
    const b1 = byName(g, "blocks.1");
    expect(g.data.nodes.signature[b0]).toBe(g.data.nodes.signature[b1]);
    const expanded = new Set([...initialExpansion(g), b0, b1]);
    const unfolded = new Set([b0]);
    const layouter = new GraphLayout();
    const v = view(g, { expanded, unfolded });
    const l = layouter.layout(g, v, unfolded, expanded, true);
    expect(l.computed).toBe(v.boxes.length + 1 - 1); // every box and the top, blocks.1 a cache hit
    const r0 = l.rects.get(b0)!;
    const r1 = l.rects.get(b1)!;
    expect([r1.w, r1.h]).toEqual([r0.w, r0.h]);
    const again = layouter.layout(g, v, unfolded, expanded, true);
    expect(again.computed).toBe(1); // only the top, never cached
  });
});

describe("colour scales", () => {
  const opt = (scale: "linear" | "log" | "diverging", domain: [number, number]) => ({
    key: "k",
    label: "k",
    unit: "",
    scale,
    domain,
    values: [],
  });
  it("maps the domain's ends to 0 and 1, zero to the middle of a diverging scale", () => {
    expect(scaled(5, opt("linear", [5, 15]))).toBe(0);
    expect(scaled(15, opt("linear", [5, 15]))).toBe(1);
    expect(scaled(999, opt("log", [0, 999]))).toBeCloseTo(1);
    expect(scaled(9, opt("log", [0, 999]))).toBeCloseTo(1 / 3); // log10(10) / log10(1000)
    expect(scaled(0, opt("diverging", [-2, 4]))).toBe(0.5);
    expect(scaled(-4, opt("diverging", [-2, 4]))).toBe(0);
  });
});

describe("Graph mode in the widget (jsdom)", () => {
  const open = (selected: string | null = null) => {
    const { model, el } = mount(fixture("tiny_lm"), selected);
    const mode = el.querySelector<HTMLSelectElement>(".nbi-mode")!;
    mode.value = "graph";
    mode.dispatchEvent(new Event("change"));
    return { model, el };
  };
  const node = (el: HTMLElement, name: string) =>
    [...el.querySelectorAll<SVGGElement>(".nbi-graph-node")].find(
      (n) => n.querySelector(".nbi-graph-label")?.textContent === name,
    )!;

  it("is offered after a trace and replaces the table", () => {
    const { el } = open();
    expect(el.querySelector<HTMLElement>(".nbi-grid")!.hidden).toBe(true);
    expect(el.querySelectorAll(".nbi-graph-node")).toHaveLength(8);
    expect(el.querySelector(".nbi-graph-status")!.textContent).toBe("8 nodes, 7 edges, 1 constant ops hidden");
    expect(mount(fixture("folds")).el.querySelector('.nbi-mode option[value="graph"]')).toBeNull(); // not traced
  });

  it("a click selects the module for the tree, the detail panel and Python", () => {
    const { model, el } = open();
    node(el, "ln_f").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(model.state.selected).toBe("ln_f");
    expect(el.querySelector(".nbi-detail-title")!.textContent).toContain("ln_f");
    expect(node(el, "ln_f").classList.contains("nbi-selected")).toBe(true);
    // an op selects the call it ran in
    node(el, "add").dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(model.state.selected).toBe("");
  });

  it("Python's selection reveals and marks the node", () => {
    const { model, el } = open();
    model.change("selected", "blocks.0.attn.qkv");
    const qkv = node(el, "qkv");
    expect(qkv.classList.contains("nbi-selected")).toBe(true); // blocks.0 and attn were expanded to show it
  });

  it("colours by FLOPs with a legend, search highlights, the keyboard walks the dataflow", () => {
    const { el } = open();
    const colour = el.querySelector<HTMLSelectElement>(".nbi-graph-colour")!;
    colour.value = "flops";
    colour.dispatchEvent(new Event("change"));
    expect(el.querySelector(".nbi-graph-legend")!.textContent).toContain("FLOPs");
    expect(node(el, "lm_head").querySelector("rect")!.getAttribute("style")).toMatch(/fill:rgb/);
    const search = el.querySelector<HTMLInputElement>(".nbi-search")!;
    search.value = "emb";
    search.dispatchEvent(new Event("input"));
    expect([...el.querySelectorAll(".nbi-graph-node.nbi-match")].map((n) => n.getAttribute("data-node"))).toHaveLength(
      2,
    );
    const graph = el.querySelector<HTMLElement>(".nbi-graph")!;
    graph.dispatchEvent(new KeyboardEvent("keydown", { key: "Home", bubbles: true }));
    graph.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    expect(el.querySelector(".nbi-graph-node.nbi-focus .nbi-graph-label")!.textContent).toBe("tok_emb");
    graph.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    expect(el.querySelector(".nbi-graph-node.nbi-focus .nbi-graph-label")!.textContent).toBe("add");
    graph.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    graph.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true })); // expand blocks.0–1 ×2
    expect(el.querySelector(".nbi-graph-box-title")).not.toBeNull();
  });
});

describe("names from the model are text, never markup", () => {
  it("a hostile module name shows as itself", () => {
    const p = fixture("tiny_lm");
    const hostile = '<img src=x onerror="alert(1)">&amp;';
    const at = p.graph!.nodes.name.indexOf("ln_f");
    p.graph!.nodes.name[at] = hostile;
    p.graph!.nodes.type[at] = "<b>T</b>";
    const { el } = mount(p);
    const mode = el.querySelector<HTMLSelectElement>(".nbi-mode")!;
    mode.value = "graph";
    mode.dispatchEvent(new Event("change"));
    expect(el.querySelector(".nbi-graph img, .nbi-graph b")).toBeNull();
    const texts = [...el.querySelectorAll(".nbi-graph-label")].map((t) => t.textContent);
    expect(texts).toContain(hostile);
    expect([...el.querySelectorAll(".nbi-graph-type")].map((t) => t.textContent)).toContain("<b>T</b>");
  });
});

describe("selection of a hidden member", () => {
  it("unfolds its run so the selected call is drawn", () => {
    const { model, el } = mount(fixture("tiny_lm"));
    const mode = el.querySelector<HTMLSelectElement>(".nbi-mode")!;
    mode.value = "graph";
    mode.dispatchEvent(new Event("change"));
    model.change("selected", "blocks.1.mlp");
    const selected = el.querySelector(".nbi-graph-node.nbi-selected");
    expect(selected?.getAttribute("aria-label")).toMatch(/^blocks\.1\.mlp, Sequential/);
  });
});
