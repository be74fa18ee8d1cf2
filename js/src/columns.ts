// The table's columns: one entry each says what the column shows, how it sorts, when it is
// offered and how its cell renders. Adding a column is adding an entry to COLUMNS; a payload
// field the tree nodes do not carry is read with moduleField / tensorField (tree.ts).

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
  /** Shown until the user hides it. */
  initial: boolean;
  /** Offered for this tree (e.g. only once traced). */
  available(tree: Tree): boolean;
  /** The value sorting compares; null sorts last. */
  value(n: TreeNode, tree: Tree): Value;
  /** The cell as plain text. */
  text(n: TreeNode, tree: Tree): string;
  /** Fills the (empty) cell; by default with `text`, which is also its tooltip. */
  render(cell: HTMLElement, n: TreeNode, ctx: CellContext): void;
}

type Spec = Pick<Column, "id" | "label" | "title" | "width" | "value"> & Partial<Column>;

function column(spec: Spec): Column {
  const text = spec.text ?? ((n: TreeNode, t: Tree) => String(spec.value(n, t) ?? ""));
  return {
    numeric: false,
    initial: true,
    available: () => true,
    text,
    render(cell, n, ctx) {
      cell.textContent = text(n, ctx.tree);
      cell.title = cell.textContent;
    },
    ...spec,
  };
}

const stat = (tree: Tree, n: TreeNode, field: string): number | null => {
  const i = tree.statFields.indexOf(field);
  return n.stats && i >= 0 ? (n.stats[i] ?? null) : null;
};

const statColumn = (id: string, title: string, initial: boolean): Column =>
  column({
    id,
    label: id,
    title,
    width: "72px",
    numeric: true,
    initial,
    available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, id),
    text: (n, t) => formatStat(stat(t, n, id), 3),
  });

const TRAIN_RANK = { trainable: 3, partial: 2, frozen: 1, "": null } as const;

export const COLUMNS: Column[] = [
  column({
    id: "name",
    label: "Name",
    title: "Module, parameter or buffer",
    width: "minmax(200px, 2fr)",
    value: (n) => n.key,
    render(cell, n, { row, mode }) {
      cell.style.paddingLeft = `${(row.level - 1) * 14 + 4}px`;
      cell.title = n.path;
      const caret = row.expandable ? (row.expanded ? "▾" : "▸") : "";
      cell.append(
        h("span", "nbi-caret", caret, { "aria-hidden": "true" }),
        h("span", "nbi-key", mode === "tree" ? n.key : n.path),
      );
      if (n.aliasOf) cell.append(h("span", "nbi-tag", `= ${n.aliasOf}`));
      if (n.tiedTo) cell.append(h("span", "nbi-tag", `→ ${n.tiedTo}`));
    },
  }),
  column({
    id: "type",
    label: "Type",
    title: "Module class, or parameter/buffer",
    width: "minmax(100px, 1fr)",
    value: (n) => n.type,
    text: (n) => (n.kind === "group" ? `${n.type} ×${n.count}` : n.type),
  }),
  column({
    id: "params",
    label: "Params",
    title: "Parameters in the subtree (shared storage once) and % of the model",
    width: "128px",
    numeric: true,
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
    value: (n) => TRAIN_RANK[trainableStatus(n.trainable, n.frozen)],
    text: (n) => trainableStatus(n.trainable, n.frozen),
    render(cell, n) {
      const status = trainableStatus(n.trainable, n.frozen);
      if (status) cell.append(h("span", `nbi-badge nbi-${status}`, status === "trainable" ? "✓" : status));
      cell.title = status;
    },
  }),
  column({
    id: "shape",
    label: "Shape",
    title: "Tensor shape; a module's output shapes once traced",
    width: "minmax(100px, 1fr)",
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
    value: (n) => n.memory,
    text: (n) => formatBytes(n.memory),
  }),
  column({
    id: "flops",
    label: "FLOPs",
    title: "Floating point operations of the traced forward pass",
    width: "76px",
    numeric: true,
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
    available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, "std"),
    text: () => "",
    render(cell, n) {
      if (n.hist) cell.append(sparkline(n.hist));
    },
  }),
  statColumn("mean", "Mean of the finite values", true),
  statColumn("std", "Standard deviation of the finite values", true),
  statColumn("min", "Smallest finite value", false),
  statColumn("max", "Largest finite value", false),
  column({
    id: "status",
    label: "Status",
    title: "Same, changed, added, removed or reshaped",
    width: "80px",
    available: (t) => t.has.compare,
    value: (n) => n.status,
  }),
  column({
    id: "rel_change",
    label: "Rel. change",
    title: "‖Δ‖ / ‖a‖ (modules: the largest below)",
    width: "112px",
    numeric: true,
    available: (t) => t.has.compare,
    value: (n) => n.relChange,
    text: (n) => (n.relChange === null ? "" : formatStat(n.relChange)),
  }),
];
