// The table's columns: one entry each says what the column shows, how it sorts, when it is
// offered and how its cell renders. Adding a column is adding an entry to COLUMNS.

import { h } from "./dom";
import type { Mode, Row, Value } from "./flatten";
import {
  formatBytes,
  formatCompact,
  formatCount,
  formatPercent,
  formatShape,
  formatStat,
  trainableStatus,
} from "./format";
import { sparkline } from "./histogram";
import type { Tree, TreeNode } from "./tree";

/** What a cell may need besides its node. */
export interface CellContext {
  tree: Tree;
  row: Row;
  mode: Mode;
}

export interface Column {
  id: string;
  label: string;
  title: string;
  /** A CSS grid track. */
  width: string;
  /** Right-aligned; sorts descending first. */
  numeric: boolean;
  /** Shown until the user hides it, room permitting. */
  initial: boolean;
  /** Rank among the initial columns when the width is short (1 is kept longest). */
  priority: number;
  /** The narrowest it can be, in px (chooses how many columns fit). */
  min: number;
  /** Offered for this tree (e.g. only once traced). */
  available(tree: Tree): boolean;
  /** The value sorting compares; null sorts last. */
  value(n: TreeNode, tree: Tree): Value;
  /** The cell as plain text. */
  text(n: TreeNode, tree: Tree): string;
  /** The cell's tooltip, where it should say more than the text (default: the text). */
  tip?(n: TreeNode, tree: Tree): string;
  /** Fills the (empty) cell; by default with `text`, which is also its tooltip. */
  render(cell: HTMLElement, n: TreeNode, ctx: CellContext): void;
}

type Spec = Pick<Column, "id" | "label" | "title" | "width" | "value"> & Partial<Column>;

function column(spec: Spec): Column {
  const text = spec.text ?? ((n: TreeNode, t: Tree) => String(spec.value(n, t) ?? ""));
  const px = /(\d+)px/.exec(spec.width);
  return {
    numeric: false,
    initial: true,
    priority: 50,
    min: px ? Number(px[1]) : 80,
    available: () => true,
    text,
    render(cell, n, ctx) {
      cell.textContent = text(n, ctx.tree);
      cell.title = spec.tip?.(n, ctx.tree) ?? cell.textContent;
    },
    ...spec,
  };
}

/** Short labels for the status column where the frame's value would not fit its width. */
const STATUS_LABELS: Record<string, string> = { dtype_changed: "dtype" };
const STATUS_TITLES: Record<string, string> = {
  dtype_changed: "dtype changed (the values are compared after both are widened to float64)",
};

const stat = (tree: Tree, n: TreeNode, field: string): number | null => {
  const i = tree.statFields.indexOf(field);
  return n.stats && i >= 0 ? (n.stats[i] ?? null) : null;
};

const statColumn = (id: string, label: string, title: string, priority: number, format = formatStat3): Column =>
  column({
    id,
    label,
    title,
    width: "72px",
    numeric: true,
    initial: priority < 50,
    priority,
    available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, id),
    text: (n, t) => format(stat(t, n, id)),
  });

const formatStat3 = (v: number | null) => formatStat(v, 3);

/** The end of a path that tells it apart: the last segment and those before it up to a
 * named (not numbered) one: "mlp.c_fc.weight" -> "c_fc.weight", "mlp.0.weight" -> "mlp.0.weight". */
export function pathTail(path: string): string {
  const parts = path.split(".");
  let start = parts.length - 1;
  while (start > 0 && (start === parts.length - 1 || /^\d+$/.test(parts[start]))) start--;
  return start <= 0 ? "" : parts.slice(start).join(".");
}

/** A path cut in the middle: the head shrinks with an ellipsis, the distinguishing end stays. */
function middleEllipsis(path: string): HTMLElement {
  const box = h("span", "nbi-key nbi-mid");
  const tail = pathTail(path);
  if (!tail) box.append(h("span", "nbi-mid-head", path));
  else box.append(h("span", "nbi-mid-head", path.slice(0, path.length - tail.length)), h("span", "nbi-mid-tail", tail));
  return box;
}

/** The health badge: what is wrong, on the tensor and on every row above it. */
function problemBadge(n: TreeNode): HTMLElement | null {
  if (!n.problems) return null;
  const below = n.kind === "tensor" ? "" : ` in ${n.problemTensors} tensor${n.problemTensors === 1 ? "" : "s"} below`;
  const labels = n.problems.split(", ");
  const more = labels.length > 1 ? ` +${labels.length - 1}` : "";
  return h("span", "nbi-problem", `⚠ ${labels[0]}${more}`, { title: `${n.problems}${below}` });
}

const compareColumn = (id: string, label: string, title: string, value: (n: TreeNode) => number | null): Column =>
  column({
    id,
    label,
    title,
    width: "96px",
    numeric: true,
    priority: 3,
    available: (t) => t.has.compare,
    value,
    text: (n) => formatStat(value(n)),
  });

const TRAIN_RANK = { trainable: 3, partial: 2, frozen: 1, "": null } as const;

export const COLUMNS: Column[] = [
  column({
    id: "name",
    label: "Name",
    title: "Module, parameter or buffer",
    width: "minmax(200px, 2fr)",
    priority: 0,
    min: 200,
    value: (n) => n.key,
    render(cell, n, { row, mode }) {
      cell.style.paddingLeft = `${(row.level - 1) * 14 + 4}px`;
      cell.title = n.path || n.key;
      const caret = row.expandable ? (row.expanded ? "▾" : "▸") : "";
      cell.append(
        h("span", "nbi-caret", caret, { "aria-hidden": "true" }),
        mode === "tree" ? h("span", "nbi-key", n.key) : middleEllipsis(n.path),
      );
      const badge = problemBadge(n);
      if (badge) cell.append(badge);
      if (n.aliasOf) cell.append(h("span", "nbi-tag", `= ${n.aliasOf}`));
      if (n.tiedTo) cell.append(h("span", "nbi-tag", `→ ${n.tiedTo}`));
    },
  }),
  column({
    id: "type",
    label: "Type",
    title: "Module class, or parameter/buffer",
    width: "minmax(100px, 1fr)",
    priority: 1,
    value: (n) => n.type,
    text: (n) => (n.kind === "group" ? `${n.type} ×${n.count}` : n.type),
  }),
  column({
    id: "params",
    label: "Params",
    title: "Parameters in the subtree (shared storage once) and % of the model",
    width: "128px",
    numeric: true,
    priority: 2,
    value: (n) => n.params,
    text: (n) => formatCount(n.params),
    render(cell, n, { tree }) {
      cell.textContent = formatCount(n.params);
      cell.title = cell.textContent;
      if (n.params !== null && n.kind !== "tensor")
        cell.append(h("span", "nbi-pct", formatPercent(n.params, tree.totalParams)));
    },
  }),
  column({
    id: "train",
    label: "Train",
    title: "Trainable, frozen, or partly frozen",
    width: "76px",
    priority: 12,
    value: (n) => TRAIN_RANK[trainableStatus(n.trainable, n.frozen)],
    text: (n) => trainableStatus(n.trainable, n.frozen),
    render(cell, n) {
      const status = trainableStatus(n.trainable, n.frozen);
      if (status) cell.append(h("span", `nbi-badge nbi-${status}`, status === "trainable" ? "✓" : status));
      cell.title = status;
    },
  }),
  column({
    id: "input",
    label: "Input shape",
    title: "Shapes the module received in the traced forward pass",
    width: "minmax(100px, 1fr)",
    priority: 5,
    available: (t) => t.has.trace,
    value: (n) => formatShape(n.inputShape) || null,
    text: (n) => formatShape(n.inputShape),
  }),
  column({
    id: "shape",
    label: "Shape",
    title: "Tensor shape; a module's output shapes once traced",
    width: "minmax(100px, 1fr)",
    priority: 4,
    value: (n) => formatShape(n.shape) || null,
    text: (n) => formatShape(n.shape),
  }),
  column({
    id: "dtype",
    label: "Dtype",
    title: "Element type of a tensor",
    width: "72px",
    initial: false,
    value: (n) => n.dtype,
  }),
  column({
    id: "memory",
    label: "Memory",
    title: "Bytes of parameters and buffers (shared storage once)",
    width: "84px",
    numeric: true,
    priority: 6,
    value: (n) => n.memory,
    text: (n) => formatBytes(n.memory),
  }),
  column({
    id: "flops",
    label: "FLOPs",
    title: "Floating point operations of the traced forward pass",
    width: "76px",
    numeric: true,
    priority: 7,
    available: (t) => t.has.trace,
    value: (n) => n.flops,
    text: (n) => formatCompact(n.flops),
  }),
  column({
    id: "activation",
    label: "Act. mem",
    title: "Bytes autograd saved for backward during the trace",
    width: "84px",
    numeric: true,
    initial: false,
    available: (t) => t.has.trace,
    value: (n) => n.activation,
    text: (n) => formatBytes(n.activation),
  }),
  column({
    id: "dist",
    label: "Histogram",
    title: "Distribution of the values",
    width: "96px",
    priority: 8,
    available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, "std"),
    text: () => "",
    render(cell, n) {
      if (n.hist) cell.append(sparkline(n.hist));
      cell.title = n.histScope === "weight matrices" ? "Weight matrices below (norm scales and biases left out)" : "";
    },
  }),
  statColumn("mean", "Mean", "Mean of the finite values", 9),
  statColumn("std", "Std", "Standard deviation of the finite values", 10),
  statColumn("min", "Min", "Smallest finite value", 50),
  statColumn("max", "Max", "Largest finite value", 50),
  statColumn("nan", "NaN", "NaN elements (modules: in the subtree)", 50, formatCount),
  statColumn("inf", "Inf", "±Inf elements (modules: in the subtree)", 50, formatCount),
  statColumn("zeros", "Zeros", "Fraction of the elements that are exactly 0", 50, (v) => formatPercent(v, 1)),
  column({
    id: "status",
    label: "Status",
    title: "Same, changed, dtype (changed dtype), reshaped, added or removed",
    width: "80px",
    priority: 1,
    available: (t) => t.has.compare,
    value: (n) => n.status,
    text: (n) => (n.status === null ? "" : (STATUS_LABELS[n.status] ?? n.status)),
    tip: (n) => (n.status === null ? "" : (STATUS_TITLES[n.status] ?? n.status)),
  }),
  column({
    id: "rel_change",
    label: "Rel. change",
    title: "‖Δ‖ / ‖a‖ (modules: the largest below)",
    width: "112px",
    numeric: true,
    priority: 2,
    available: (t) => t.has.compare,
    value: (n) => n.relChange,
    text: (n) => (n.relChange === null ? "" : formatStat(n.relChange)),
  }),
  compareColumn("cosine", "Cosine", "Cosine similarity of a and b (modules: over the subtree)", (n) => n.cosine),
  compareColumn("max_abs_delta", "Max |Δ|", "Largest |b − a| (modules: in the subtree)", (n) => n.maxAbsDelta),
  compareColumn("mean_drift", "Mean drift", "mean(b) − mean(a) (modules: over the subtree)", (n) => n.meanDrift),
];

/** The initial columns that fit in `width` px, most important first (all when width is 0,
 * i.e. unknown). */
export function defaultColumns(available: Column[], width: number): Set<string> {
  const initial = available.filter((c) => c.initial).sort((a, b) => a.priority - b.priority);
  const out = new Set<string>();
  let used = 16; // borders and the scrollbar
  for (const c of initial) {
    if (width > 0 && c.id !== "name" && used + c.min > width) continue;
    used += c.min;
    out.add(c.id);
  }
  return out;
}
