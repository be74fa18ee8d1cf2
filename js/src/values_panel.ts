// The value view in the detail panel: the heatmap of a tensor, of a module's weights (its
// largest tensor first, a picker for the others), and for a comparison Δ = b − a, a, b or
// a and b side by side on one colour scale.

import { h } from "./dom";
import { formatShape } from "./format";
import { Heatmap } from "./heatmap";
import type { LocateFetcher, RegionFetcher } from "./heatmapRegion";
import type { Tree, TreeNode } from "./tree";

export interface ValueFetchers {
  region?: RegionFetcher;
  locate?: LocateFetcher;
}

const SIDES: [string, string][] = [
  ["delta", "Δ = b − a"],
  ["a", "a (before)"],
  ["b", "b (after)"],
  ["both", "a and b side by side"],
];

function tensorsOf(tree: Tree, node: TreeNode): TreeNode[] {
  if (node.kind === "tensor") return [node];
  if (node.kind !== "module") return [];
  return node.children.map((c) => tree.nodes[c]).filter((c) => c.kind === "tensor" && Array.isArray(c.shape));
}

const numel = (n: TreeNode) => (n.shape as number[]).reduce((p, d) => p * d, 1);

/** The value view for `node`, or null when it has no tensors or there is no kernel to ask. */
export function valuePanel(
  tree: Tree,
  node: TreeNode,
  fetchers: ValueFetchers | undefined,
): { el: HTMLElement; destroy(): void } | null {
  const region = fetchers?.region;
  const tensors = tensorsOf(tree, node).filter(
    (t) => Array.isArray(t.shape) && !Array.isArray((t.shape as unknown[])[0]),
  );
  if (!tensors.length) return null;
  const el = h("section", "nbi-values", undefined, { "aria-label": "Values" });
  el.style.gridColumn = "1 / -1";
  const head = h("div", "nbi-heat-bar");
  el.append(h("div", "nbi-chart-caption", "Values"), head);
  if (!region) {
    el.append(h("p", "nbi-hint", "The values are read from the model by a running kernel; this page has none."));
    return { el, destroy() {} };
  }
  let shown: Heatmap[] = [];
  const body = h("div", "");
  el.append(body);
  const pick = h("select", "", undefined, { "aria-label": "Tensor shown" });
  const sorted = [...tensors].sort((a, b) => numel(b) - numel(a));
  for (const t of sorted) pick.append(h("option", "", `${t.key} ${formatShape(t.shape)}`, { value: t.path }));
  if (sorted.length > 1) head.append(pick);
  const compare = tree.has.compare;
  const side = h("select", "", undefined, { "aria-label": "Side shown" });
  for (const [v, t] of SIDES) side.append(h("option", "", t, { value: v }));
  if (compare) head.append(side);
  const show = () => {
    for (const m of shown) m.destroy();
    const t = sorted.find((x) => x.path === pick.value) ?? sorted[0];
    const shape = t.shape as number[];
    let share = (_limit: number) => {};
    const make = (s: string | null, caption?: string) =>
      new Heatmap({
        tensor: t.path,
        shape,
        side: s,
        caption,
        fetch: region,
        locate: fetchers?.locate,
        onLimit: (limit) => share(limit),
      });
    if (!compare) shown = [make(null)];
    else if (side.value !== "both") shown = [make(side.value, SIDES.find(([v]) => v === side.value)?.[1])];
    else {
      const a = make("a", "a (before)");
      const b = make("b", "b (after)");
      let top = 0; // one colour scale for both: the larger of the two overviews' limits
      share = (limit: number) => {
        if (limit <= top) return;
        top = limit;
        a.setLimit(top);
        b.setLimit(top);
      };
      shown = [a, b];
    }
    body.replaceChildren(...shown.map((m) => m.root));
  };
  pick.addEventListener("change", show);
  side.addEventListener("change", show);
  show();
  return {
    el,
    destroy() {
      for (const m of shown) m.destroy();
    },
  };
}
