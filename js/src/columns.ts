// The table's columns: what each shows, how it sorts, and when it is offered.

import type { Value } from "./flatten";
import { formatBytes, formatCompact, formatCount, formatShape, formatStat, trainableStatus } from "./format";
import type { Tree, TreeNode } from "./tree";

export interface Column {
  id: string;
  label: string;
  title: string;
  /** A CSS grid track. */
  width: string;
  numeric: boolean;
  /** Shown until the user hides it. */
  initial: boolean;
  available(tree: Tree): boolean;
  value(n: TreeNode, tree: Tree): Value;
  text(n: TreeNode, tree: Tree): string;
}

const always = () => true;
const stat = (tree: Tree, n: TreeNode, field: string): number | null => {
  const i = tree.statFields.indexOf(field);
  return n.stats && i >= 0 ? (n.stats[i] ?? null) : null;
};
const trainRank = { trainable: 3, partial: 2, frozen: 1, "": null } as const;

function statColumn(id: string, title: string, initial: boolean): Column {
  return {
    id, label: id, title, width: "72px", numeric: true, initial,
    available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, id),
    text: (n, t) => formatStat(stat(t, n, id), 3),
  };
}

export const COLUMNS: Column[] = [
  {
    id: "name", label: "Name", title: "Module, parameter or buffer", width: "minmax(200px, 2fr)",
    numeric: false, initial: true, available: always,
    value: (n) => n.key, text: (n) => n.key,
  },
  {
    id: "type", label: "Type", title: "Module class, or parameter/buffer", width: "minmax(100px, 1fr)",
    numeric: false, initial: true, available: always,
    value: (n) => n.type, text: (n) => (n.kind === "group" ? `${n.type} ×${n.count}` : n.type),
  },
  {
    id: "params", label: "Params", title: "Parameters in the subtree (shared storage once) and % of the model",
    width: "128px", numeric: true, initial: true, available: always,
    value: (n) => n.params, text: (n) => formatCount(n.params),
  },
  {
    id: "train", label: "Train", title: "Trainable, frozen, or partly frozen", width: "76px",
    numeric: false, initial: true, available: always,
    value: (n) => trainRank[trainableStatus(n.trainable, n.frozen)],
    text: (n) => trainableStatus(n.trainable, n.frozen),
  },
  {
    id: "shape", label: "Shape", title: "Tensor shape; a module's output shapes once traced", width: "minmax(100px, 1fr)",
    numeric: false, initial: true, available: always,
    value: (n) => formatShape(n.shape) || null, text: (n) => formatShape(n.shape),
  },
  {
    id: "dtype", label: "Dtype", title: "Element type of a tensor", width: "72px",
    numeric: false, initial: false, available: always,
    value: (n) => n.dtype, text: (n) => n.dtype ?? "",
  },
  {
    id: "memory", label: "Memory", title: "Bytes of parameters and buffers (shared storage once)", width: "84px",
    numeric: true, initial: true, available: always,
    value: (n) => n.memory, text: (n) => formatBytes(n.memory),
  },
  {
    id: "flops", label: "FLOPs", title: "Floating point operations of the traced forward pass", width: "76px",
    numeric: true, initial: true, available: (t) => t.has.trace,
    value: (n) => n.flops, text: (n) => formatCompact(n.flops),
  },
  {
    id: "activation", label: "Act. mem", title: "Bytes autograd saved for backward during the trace", width: "84px",
    numeric: true, initial: false, available: (t) => t.has.trace,
    value: (n) => n.activation, text: (n) => formatBytes(n.activation),
  },
  {
    id: "dist", label: "Histogram", title: "Distribution of the values", width: "96px",
    numeric: false, initial: true, available: (t) => t.has.stats,
    value: (n, t) => stat(t, n, "std"), text: () => "",
  },
  statColumn("mean", "Mean of the finite values", true),
  statColumn("std", "Standard deviation of the finite values", true),
  statColumn("min", "Smallest finite value", false),
  statColumn("max", "Largest finite value", false),
  {
    id: "status", label: "Status", title: "Same, changed, added, removed or reshaped", width: "80px",
    numeric: false, initial: true, available: (t) => t.has.compare,
    value: (n) => n.status, text: (n) => n.status ?? "",
  },
  {
    id: "rel_change", label: "Rel. change", title: "‖Δ‖ / ‖a‖ (modules: the largest below)", width: "112px",
    numeric: true, initial: true, available: (t) => t.has.compare,
    value: (n) => n.relChange, text: (n) => (n.relChange === null ? "" : formatStat(n.relChange)),
  },
];
