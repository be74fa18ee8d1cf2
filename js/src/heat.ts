// Colouring the rows by a numeric column (as graph viewers colour nodes by user data): a
// log heat scale over the column's positive values, and its legend. Pure but for `legend`.

import type { Column } from "./columns";
import { h } from "./dom";
import { formatBytes, formatCompact, formatParams, formatStat } from "./format";
import type { Tree, TreeNode } from "./tree";

export interface HeatScale {
  column: Column;
  /** The smallest and largest value the scale spans (positive). */
  lo: number;
  hi: number;
  /** 0 (no colour) to 1 (full) for a node. */
  of(n: TreeNode): number;
}

/** The change column's fixed span: 1e-4 (invisible) to 1 (a tensor replaced), comparable
 * between comparisons. */
const CHANGE_SPAN: [number, number] = [1e-4, 1];

/** A log scale of `column` over the tree's nodes (the root left out: it holds the sums), or
 * null when no value is positive. A value at `lo` gets a faint tint, one at `hi` the full. */
export function heatScale(tree: Tree, column: Column): HeatScale | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const n of tree.nodes) {
    if (n.id === tree.root) continue;
    const v = column.value(n, tree);
    if (typeof v !== "number" || !(v > 0) || !Number.isFinite(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (column.id === "rel_change") [lo, hi] = CHANGE_SPAN;
  if (!(hi > 0)) return null;
  const a = Math.log10(lo);
  const span = Math.log10(hi) - a;
  return {
    column,
    lo,
    hi,
    of(n) {
      const v = column.value(n, tree);
      if (typeof v !== "number" || !(v > 0)) return 0;
      if (span <= 0) return 1;
      const t = (Math.log10(v) - a) / span;
      return Math.max(0, Math.min(1, column.id === "rel_change" ? t : 0.08 + 0.92 * t));
    },
  };
}

/** The columns rows can be coloured by: the numeric ones but the counts of problems. */
export const colourable = (c: Column): boolean => c.numeric && c.id !== "nan" && c.id !== "inf";

/** A legend end in the column's unit. */
function formatEnd(id: string, v: number): string {
  if (id === "params") return formatParams(v);
  if (id === "memory" || id === "activation") return formatBytes(v);
  if (id === "flops") return formatCompact(v);
  return formatStat(v, 3);
}

/** "Colour: FLOPs  12.0 K ▕gradient▏ 3.3 M (log)", the ends in the column's unit. */
export function legend(scale: HeatScale): HTMLElement {
  const id = scale.column.id;
  const box = h("div", "nbi-legend", undefined, { role: "note" });
  box.title = `Rows coloured by ${scale.column.label}, on a log scale`;
  box.append(
    h("span", "nbi-legend-label", `Colour: ${scale.column.label}`),
    h("span", "nbi-legend-end", formatEnd(id, scale.lo)),
    h("span", "nbi-legend-bar", undefined, { "aria-hidden": "true" }),
    h("span", "nbi-legend-end", `${formatEnd(id, scale.hi)}${id === "rel_change" ? " and more" : ""} (log scale)`),
  );
  return box;
}
