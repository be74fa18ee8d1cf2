// The table's columns: one entry each says what the column shows, how it sorts, when it is
// offered and how its cell renders. Adding a column is adding an entry to COLUMNS.

import { h } from "./dom";
import type { Mode, Row, Value } from "./flatten";
import {
  columnFormat,
  formatBytes,
  formatCompact,
  formatCount,
  formatPercent,
  formatShape,
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
  /** A count the table never drops for want of room (it scrolls sideways instead). */
  keep: boolean;
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
    keep: false,
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

const formats = new WeakMap<Tree, Map<string, (v: number | null) => string>>();

/** The one format of column `id` in `tree`, chosen from all its values (format.columnFormat). */
function formatOf(tree: Tree, id: string, value: (n: TreeNode) => number | null): (v: number | null) => string {
  const byColumn = formats.get(tree) ?? new Map<string, (v: number | null) => string>();
  formats.set(tree, byColumn);
  const f = byColumn.get(id) ?? columnFormat(tree.nodes.map(value));
  byColumn.set(id, f);
  return f;
}

const statColumn = (
  id: string,
  label: string,
  title: string,
  priority: number,
  format?: (v: number | null) => string,
): Column =>
  column({
    id,
    label,
    title,
    width: "72px",
    numeric: true,
    initial: priority < 50,
    priority,
    available: (t) => t.has.values,
    value: (n, t) => stat(t, n, id),
    text: (n, t) => (format ?? formatOf(t, id, (m) => stat(t, m, id)))(stat(t, n, id)),
  });

/** The end of a path that tells it apart from its neighbours: the last two names and,
 * within the four segments before them, everything from the nearest block index on:
 * "transformer.h.11.mlp.c_proj.weight" -> "11.mlp.c_proj.weight", "a.b.c.d" -> "c.d". */
export function pathTail(path: string): string {
  const parts = path.split(".");
  let start = Math.max(0, parts.length - 2);
  while (start > 0 && /^\d+$/.test(parts[start])) start--; // "mlp.0.weight": the name before an index
  for (let i = start - 1; i >= Math.max(0, start - 4); i--)
    if (/^\d+$/.test(parts[i])) {
      start = i;
      break;
    }
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
  return h("span", "nbi-problem", `⚠ ${n.problems}`, { title: `${n.problems}${below}` });
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
    text: (n, t) => formatOf(t, id, value)(value(n)),
  });

/** FLOPs where the counter counted some: 0 below a module means "not counted" (norms,
 * activations, lookups), which the cell says rather than claiming none ran. */
const NOT_COUNTED = "–";
const flopsText = (n: TreeNode): string => (n.flops === 0 ? NOT_COUNTED : formatCompact(n.flops));
function flopsTip(n: TreeNode, tree: Tree): string {
  const note = typeof tree.payload.totals.flops_note === "string" ? ` ${tree.payload.totals.flops_note}` : "";
  if (n.flops === 0) return `not counted (no matrix multiply, convolution or attention ran here).${note}`;
  return n.flops === null ? "" : `${formatCount(n.flops)} FLOPs.${note}`;
}

/** What the Change column (and the row colour of a comparison) measures: one definition. */
export const CHANGE_TITLE =
  "Change = ‖b − a‖ / max(‖a‖, ‖b‖): 0 (same) to 2 (sign flipped), defined for tensors that start at zero; " +
  "a module or fold: over all its elements as one tensor (print(comparison)'s Overall is the root's)";

const TRAIN_RANK = { trainable: 3, partial: 2, frozen: 1, "": null } as const;

export const COLUMNS: Column[] = [
  column({
    id: "name",
    label: "Name",
    title: "Module, parameter or buffer",
    width: "minmax(200px, 2fr)",
    priority: 0,
    min: 200,
    keep: true,
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
    keep: true,
    value: (n) => n.params,
    text: (n) => formatCount(n.params),
    tip: (n, t) => `${formatCount(n.params)} ${formatPercent(n.params, t.totalParams)}`.trim(),
    render(cell, n, { tree }) {
      cell.textContent = formatCount(n.params);
      cell.title = this.tip?.(n, tree) ?? "";
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
    keep: true,
    value: (n) => n.memory,
    text: (n) => formatBytes(n.memory),
  }),
  column({
    id: "flops",
    label: "FLOPs",
    title: "Floating point operations of the traced forward pass (– where none were counted: see the tooltip)",
    width: "76px",
    numeric: true,
    priority: 7,
    keep: true,
    available: (t) => t.has.trace,
    value: (n) => n.flops,
    text: flopsText,
    tip: flopsTip,
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
    available: (t) => t.has.values,
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
    keep: true,
    available: (t) => t.has.compare,
    value: (n) => n.status,
    text: (n) => (n.status === null ? "" : (STATUS_LABELS[n.status] ?? n.status)),
    tip: (n) => (n.status === null ? "" : (STATUS_TITLES[n.status] ?? n.status)),
  }),
  column({
    id: "rel_change",
    label: "Change",
    title: CHANGE_TITLE,
    width: "112px",
    numeric: true,
    priority: 2,
    keep: true,
    available: (t) => t.has.compare,
    value: (n) => n.relChange,
    text: (n, t) => formatOf(t, "rel_change", (m) => m.relChange)(n.relChange),
  }),
  compareColumn("cosine", "Cosine", "Cosine similarity of a and b (modules: over the subtree)", (n) => n.cosine),
  compareColumn("max_abs_delta", "Max |Δ|", "Largest |b − a| (modules: in the subtree)", (n) => n.maxAbsDelta),
  compareColumn("mean_drift", "Mean drift", "mean(b) − mean(a) (modules: over the subtree)", (n) => n.meanDrift),
];

/** The initial columns that fit in `width` px, most important first (all when width is 0,
 * i.e. unknown), `widths` giving each column's px where known. Counts (`keep`) always
 * stay: when they do not fit, the table scrolls sideways. */
export function defaultColumns(available: Column[], width: number, widths: Record<string, number> = {}): Set<string> {
  const initial = available.filter((c) => c.initial).sort((a, b) => a.priority - b.priority);
  const px = (c: Column) => widths[c.id] ?? c.min;
  const kept = initial.filter((c) => c.keep);
  const out = new Set(kept.map((c) => c.id));
  let used = 16 + kept.reduce((sum, c) => sum + px(c), 0); // borders and the scrollbar, then the counts
  for (const c of initial) {
    if (c.keep || (width > 0 && used + px(c) > width)) continue;
    used += px(c);
    out.add(c.id);
  }
  return out;
}

const CELL_PADDING = 12; // .nbi-cell's padding, both sides
const MAX_TEXT_COLUMN = 280; // a shape list or class name longer than this is cut (its tooltip has it)

/** Text width in px in the widget's font: measured on a canvas in a browser, estimated from
 * the character count elsewhere (jsdom), generously so nothing is cut. */
export type Measure = (text: string) => number;

/** A canvas measure in `font` (a CSS font shorthand), or a character-count estimate. */
export function measurer(font: string): Measure {
  const ctx = typeof document !== "undefined" ? document.createElement("canvas").getContext?.("2d") : null;
  if (!ctx) return (text) => text.length * 8;
  ctx.font = font;
  return (text) => Math.ceil(ctx.measureText(text).width);
}

/** The few nodes worth measuring: the `k` largest by `score` (a cheap stand-in for width). */
function widest(nodes: TreeNode[], score: (n: TreeNode) => number, k = 4): TreeNode[] {
  const top: TreeNode[] = [];
  for (const n of nodes) {
    const s = score(n);
    if (top.length < k || s > score(top[top.length - 1])) {
      top.push(n);
      top.sort((a, b) => score(b) - score(a));
      if (top.length > k) top.pop();
    }
  }
  return top;
}

/** Each column's width in px, from its content in `tree`: numbers are never cut. A numeric
 * column's widest texts are those of its largest, most negative and smallest values (the
 * digits a format adds); a text column's are its longest. */
export function contentWidths(columns: Column[], tree: Tree, measure: Measure, pct: Measure): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of columns) {
    if (c.id === "name" || c.id === "dist" || c.id === "train") continue;
    const num = (n: TreeNode) => {
      const v = c.value(n, tree);
      return typeof v === "number" && Number.isFinite(v) ? v : null;
    };
    const candidates = c.numeric
      ? [
          ...widest(tree.nodes, (n) => Math.abs(num(n) ?? 0)),
          ...widest(tree.nodes, (n) => -(num(n) ?? 0)),
          ...widest(tree.nodes, (n) => {
            const v = Math.abs(num(n) ?? 0);
            return v > 0 ? 1 / v : 0;
          }),
        ]
      : tree.nodes;
    let longest = c.label;
    for (const n of candidates) {
      const text = c.text(n, tree);
      if (text.length > longest.length) longest = text;
    }
    let px = Math.max(measure(longest), measure(c.label) + 14) + CELL_PADDING + 2; // + the sort arrow
    if (c.id === "params") px += pct("100.0%") + 6;
    out[c.id] = Math.ceil(c.numeric ? px : Math.min(px, MAX_TEXT_COLUMN));
  }
  return out;
}

/** The name column's width: room for the deepest indent plus its key (the full path in the
 * flat modes), tags and badge, at most `most` px (the rest is cut, with the path on hover).
 * Measured on the few rows that need the most by a character count. */
export function nameWidth(tree: Tree, mode: Mode, measure: Measure, small: Measure, most: number): number {
  const shown = mode === "tree" ? tree.nodes : tree.nodes.filter((n) => n.kind !== "group");
  const text = (n: TreeNode) => (mode === "tree" ? n.key : n.path);
  const indent = (n: TreeNode) => (mode === "tree" ? n.depth * 14 : 0);
  const extra = (n: TreeNode) =>
    (n.problems ? n.problems.length + 3 : 0) +
    (n.aliasOf ? n.aliasOf.length + 3 : 0) +
    (n.tiedTo ? n.tiedTo.length + 3 : 0);
  let px = 200;
  for (const n of widest(shown, (m) => indent(m) + 8 * (text(m).length + extra(m)), 6)) {
    const badge = n.problems ? small(`⚠ ${n.problems}`) + 14 : 0;
    const tags = (n.aliasOf ? small(`= ${n.aliasOf}`) + 10 : 0) + (n.tiedTo ? small(`→ ${n.tiedTo}`) + 10 : 0);
    px = Math.max(px, indent(n) + 4 + 14 + measure(text(n)) + badge + tags + CELL_PADDING + 8);
  }
  return Math.ceil(Math.min(px, most));
}
