// The tree model, part 1: nodes built from the payload, repeated blocks folded as the payload
// says (Python decides the folds and pools their statistics: nothing is re-folded or re-pooled
// here). Pure: no DOM. Nodes live in one array; a node's `children` are ids into it.

import type { Hist, Num, Payload, Shape } from "./payload";

export type Kind = "module" | "tensor" | "group";

export interface TreeNode {
  id: number;
  kind: Kind;
  /** Last path segment; for a fold, "blocks.0–11 ×12". */
  key: string;
  /** Dotted path ('' is the root module); for a fold, "<parent>.<first>–<last>". */
  path: string;
  /** Module depth (root 0); tensors one deeper than their module. */
  depth: number;
  parent: number;
  children: number[];
  type: string;
  params: Num;
  trainable: Num;
  frozen: Num;
  memory: Num;
  flops: Num;
  activation: Num;
  shape: Shape;
  /** A module's input shapes once traced. */
  inputShape: Shape;
  dtype: string | null;
  stats: Num[] | null;
  hist: Hist | null;
  /** What a module's `hist` counts: "weight matrices" or "all values". */
  histScope: string | null;
  /** Weight problems, comma-separated ("NaN, all zero"); modules and folds: the union below. */
  problems: string | null;
  /** Distinct tensors with a problem (a tensor: 1 or 0). */
  problemTensors: number;
  /** Why stats are missing or changed (from the stats frame's `note`). */
  note: string | null;
  attrs: Record<string, unknown> | null;
  aliasOf: string | null;
  tiedTo: string | null;
  requiresGrad: boolean | null;
  status: string | null;
  /** Relative change; for modules and folds the largest among the tensors below. */
  relChange: Num;
  cosine: Num;
  maxAbsDelta: Num;
  meanDrift: Num;
  /** A tensor's values in a and in b, over one range. */
  histA: Hist | null;
  histB: Hist | null;
  /** Index into payload.modules, payload.tensors or payload.folds. */
  source: number;
  /** Members of a fold. */
  count: number;
}

export interface Tree {
  /** What the tree was built from. */
  payload: Payload;
  nodes: TreeNode[];
  root: number;
  statFields: string[];
  totalParams: number;
  has: { trace: boolean; stats: boolean; compare: boolean };
}

const at = <T>(list: T[] | undefined, i: number): T | null => (list ? (list[i] ?? null) : null);

function blank(id: number, kind: Kind, key: string, path: string, depth: number, parent: number): TreeNode {
  return {
    id,
    kind,
    key,
    path,
    depth,
    parent,
    children: [],
    type: "",
    params: null,
    trainable: null,
    frozen: null,
    memory: null,
    flops: null,
    activation: null,
    shape: null,
    inputShape: null,
    dtype: null,
    stats: null,
    hist: null,
    histScope: null,
    problems: null,
    problemTensors: 0,
    note: null,
    attrs: null,
    aliasOf: null,
    tiedTo: null,
    requiresGrad: null,
    status: null,
    relChange: null,
    cosine: null,
    maxAbsDelta: null,
    meanDrift: null,
    histA: null,
    histB: null,
    source: -1,
    count: 0,
  };
}

const add = (a: Num, b: Num): Num => (a === null ? b : b === null ? a : a + b);
const maxOf = (a: Num, b: Num): Num => (a === null ? b : b === null ? a : Math.max(a, b));

/** Nodes for every module and tensor, tensors before the child modules of their module, and
 * one "group" node per fold of `payload.folds` in place of its members (which become its
 * children: collapsed by default, expanding it shows them). */
export function buildTree(payload: Payload): Tree {
  const m = payload.modules;
  const t = payload.tensors;
  const nodes: TreeNode[] = [];
  const moduleChildren: number[][] = m.key.map(() => []);
  for (let i = 0; i < m.key.length; i++) {
    const parent = m.parent[i];
    const path = parent < 0 ? "" : nodes[parent].path === "" ? m.key[i] : `${nodes[parent].path}.${m.key[i]}`;
    const n = blank(
      i,
      "module",
      parent < 0 ? payload.model.name : m.key[i],
      path,
      parent < 0 ? 0 : nodes[parent].depth + 1,
      parent,
    );
    n.type = m.type[i];
    n.params = m.params[i];
    n.trainable = m.trainable[i];
    n.frozen = m.frozen[i];
    n.memory = add(m.param_bytes[i], m.buffer_bytes[i]);
    n.flops = at(m.flops, i);
    n.activation = at(m.activation_bytes, i);
    n.shape = at(m.output_shapes, i);
    n.inputShape = at(m.input_shapes, i);
    n.stats = at(m.stats, i);
    n.hist = at(m.hist, i);
    n.histScope = at(m.hist_scope, i);
    n.problems = at(m.problems, i) || null;
    n.problemTensors = at(m.problem_tensors, i) ?? 0;
    n.cosine = at(m.cosine, i);
    n.maxAbsDelta = at(m.max_abs_delta, i);
    n.meanDrift = at(m.mean_drift, i);
    n.note = at(m.note, i);
    n.attrs = m.attrs[i];
    n.aliasOf = m.alias_of[i];
    n.source = i;
    nodes.push(n);
    if (parent >= 0) moduleChildren[parent].push(i);
  }
  for (let j = 0; j < t.key.length; j++) {
    const owner = nodes[t.module[j]];
    const path = owner.path === "" ? t.key[j] : `${owner.path}.${t.key[j]}`;
    const n = blank(nodes.length, "tensor", t.key[j], path, owner.depth + 1, owner.id);
    n.type = t.kind[j];
    n.params = t.kind[j] === "parameter" ? t.numel[j] : null;
    n.trainable = t.kind[j] === "parameter" && t.requires_grad[j] ? t.numel[j] : 0;
    n.frozen = t.kind[j] === "parameter" && !t.requires_grad[j] ? t.numel[j] : 0;
    n.memory = t.bytes[j];
    n.shape = t.shape[j];
    n.dtype = t.dtype[j];
    n.stats = at(t.stats, j);
    n.hist = at(t.hist, j);
    n.problems = at(t.problems, j) || null;
    n.problemTensors = n.problems ? 1 : 0;
    n.note = at(t.note, j);
    n.cosine = at(t.cosine, j);
    n.maxAbsDelta = at(t.max_abs_delta, j);
    n.meanDrift = at(t.mean_drift, j);
    n.histA = at(t.hist_a, j);
    n.histB = at(t.hist_b, j);
    n.tiedTo = t.tied_to[j];
    n.requiresGrad = t.requires_grad[j];
    const cmp = at(t.compare, j);
    if (cmp) [n.status, n.relChange] = cmp;
    n.source = j;
    nodes.push(n);
    owner.children.push(n.id);
  }
  for (let i = 0; i < m.key.length; i++) nodes[i].children.push(...moduleChildren[i]);
  // a module's relative change is the largest below it: it shows where a change is, even collapsed
  for (let i = m.key.length - 1; i >= 0; i--)
    for (const c of nodes[i].children) nodes[i].relChange = maxOf(nodes[i].relChange, nodes[c].relChange);
  const f = payload.folds;
  for (let j = 0; j < f.rows.length; j++) addGroup(nodes, payload, j);
  return {
    payload,
    nodes,
    root: 0,
    statFields: payload.stat_fields,
    totalParams: payload.totals.total_params ?? nodes[0]?.params ?? 0,
    has: {
      trace: m.flops !== undefined,
      stats: t.stats !== undefined || m.stats !== undefined,
      compare: t.compare !== undefined,
    },
  };
}

/** The problem labels in the order Python lists them (nbinspect/analyze/health.py). */
export const PROBLEMS = ["NaN", "Inf", "all zero", "constant", "exploding", "vanishing"];

/** The group node of fold `j` (payload.folds), put among its parent's children in place of its
 * members. Its statistics, histogram and health are Python's, pooled from the members' values;
 * only the members' exact integer counts are added here, and their largest changes taken. */
function addGroup(nodes: TreeNode[], payload: Payload, j: number): void {
  const f = payload.folds;
  const members = f.rows[j];
  const first = nodes[members[0]];
  const parent = nodes[first.parent];
  const key = parent.depth === 0 && parent.path === "" ? f.label[j] : `${parent.key}.${f.label[j]}`;
  const g = blank(nodes.length, "group", key, f.path[j], first.depth, parent.id);
  g.type = first.type;
  g.shape = first.shape;
  g.inputShape = first.inputShape;
  g.count = members.length;
  g.children = members.slice();
  g.source = j;
  g.stats = at(f.stats, j);
  g.hist = at(f.hist, j);
  g.histScope = at(f.hist_scope, j);
  g.problems = at(f.problems, j) || null;
  g.problemTensors = at(f.problem_tensors, j) ?? 0;
  for (const id of members) {
    const n = nodes[id];
    n.parent = g.id;
    g.params = add(g.params, n.params);
    g.trainable = add(g.trainable, n.trainable);
    g.frozen = add(g.frozen, n.frozen);
    g.memory = add(g.memory, n.memory);
    g.flops = add(g.flops, n.flops);
    g.activation = add(g.activation, n.activation);
    g.relChange = maxOf(g.relChange, n.relChange);
    g.maxAbsDelta = maxOf(g.maxAbsDelta, n.maxAbsDelta);
  }
  const at0 = parent.children.indexOf(members[0]);
  parent.children.splice(at0, members.length, g.id);
  nodes.push(g);
}
