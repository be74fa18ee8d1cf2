// The graph view's model and layout on payloads Python built (fixtures from build_payload):
// visibility, lifted edges, folds, side stubs, composed layout geometry and its cache.

import { describe, expect, it } from "vitest";
import { GraphLayout } from "../src/graphLayout";
import { buildGraph, view } from "../src/graphModel";
import { fixture } from "./fixtures";

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
