// The payloads Python really builds (fixtures from build_payload) render, and a payload of
// another version is refused with a message instead of a broken table.

import { afterEach, describe, expect, it } from "vitest";
import { incompatible } from "../src/index";
import { PAYLOAD_VERSION } from "../src/payload";
import { buildTree } from "../src/tree";
import { FIXTURES, fixture } from "./fixtures";
import { mount, unmountAll } from "./mount";

afterEach(unmountAll);

describe("fixtures from build_payload", () => {
  it("cover every example model, a comparison and a folding model", () => {
    expect(FIXTURES).toEqual(
      expect.arrayContaining(["cnn", "mlp", "tiny_lm", "shared", "frozen", "compare_tiny_lm", "folds"]),
    );
  });

  it.each(FIXTURES)("%s: every module, tensor and fold becomes a node, and the widget renders it", (name) => {
    const p = fixture(name);
    expect(p.version).toBe(PAYLOAD_VERSION);
    const tree = buildTree(p);
    expect(tree.nodes).toHaveLength(p.modules.key.length + p.tensors.key.length + p.folds.rows.length);
    const groups = tree.nodes.filter((n) => n.kind === "group");
    expect(groups.map((g) => g.path)).toEqual(p.folds.path);
    groups.forEach((g, j) => {
      expect(g.children).toEqual(p.folds.rows[j]);
      expect(g.stats).toEqual(p.folds.stats?.[j] ?? null);
    });
    const { el } = mount(p);
    expect(el.querySelector(".nbi-error")).toBeNull();
    expect(el.querySelectorAll(".nbi-body [role=row]").length).toBeGreaterThan(0);
    expect(el.querySelector(".nbi-header")!.textContent).toContain(p.model.name);
  });

  it("shows totals and traced columns in the shared number format", () => {
    const { el } = mount(fixture("tiny_lm"));
    const header = el.querySelector(".nbi-header")!.textContent;
    expect(header).toContain("118.5 K"); // unique parameters
    expect(header).toContain("134.9 K"); // by path: the tied head counted twice
    expect(header).toContain("463.0 KiB");
    expect(header).toContain("7.6 M"); // FLOPs of the traced forward pass
    const root = el.querySelector('.nbi-body [role=row][data-path=""]')!;
    expect(root.querySelector(".nbi-col-params")!.textContent).toBe("118,528100.0%");
    expect(root.querySelector(".nbi-col-memory")!.textContent).toBe("463.0 KiB");
  });
});

describe("payload version", () => {
  it("accepts this version and explains any other", () => {
    expect(incompatible(fixture("mlp"))).toBeNull();
    const old = { ...fixture("mlp"), version: PAYLOAD_VERSION + 1 };
    expect(incompatible(old)).toMatch(/reads payload version \d+ but was sent version \d+.*reinstall nbinspect/);
  });

  it("renders the message instead of the table", () => {
    const { el } = mount({ ...fixture("mlp"), version: 0 });
    expect(el.querySelector("[role=alert]")!.textContent).toContain("was sent version 0");
    expect(el.querySelector("[role=treegrid]")).toBeNull();
  });
});
