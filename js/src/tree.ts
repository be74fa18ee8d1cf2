// The tree model, part 1: nodes built from the payload, and repeated blocks folded.
// Pure: no DOM. Nodes live in one array; a node's `children` are ids into it.

import { edgesOf } from "./histogram";
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
  /** Index into payload.modules or payload.tensors (-1 for folds). */
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
const minOf = (a: Num, b: Num): Num => (a === null ? b : b === null ? a : Math.min(a, b));

/** Nodes for every module and tensor, tensors before the child modules of their module. */
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

/** The statistics of several parts taken together: counts add, moments pool (by element
 * counts), extremes take the extreme; null when no part has statistics. */
export function mergeStats(fields: string[], parts: TreeNode[]): Num[] | null {
  const have = parts.filter((p) => p.stats);
  if (!have.length || !fields.length) return null;
  const get = (p: TreeNode, f: string) => {
    const i = fields.indexOf(f);
    return i >= 0 ? (p.stats?.[i] ?? null) : null;
  };
  const sum = (f: string) => have.reduce<Num>((acc, p) => add(acc, get(p, f)), null);
  const n = sum("numel") ?? 0;
  // finite elements weigh the moments; NaN/Inf are counted apart
  const finite = (p: TreeNode) => (get(p, "numel") ?? 0) - (get(p, "nan") ?? 0) - (get(p, "inf") ?? 0);
  const total = have.reduce((acc, p) => acc + finite(p), 0);
  const weighted = (f: string) =>
    total > 0 ? have.reduce((acc, p) => acc + (get(p, f) ?? 0) * finite(p), 0) / total : null;
  const mean = weighted("mean");
  const second =
    total > 0
      ? have.reduce((acc, p) => acc + ((get(p, "std") ?? 0) ** 2 + (get(p, "mean") ?? 0) ** 2) * finite(p), 0) / total
      : null;
  const value: Record<string, Num> = {
    numel: n,
    mean,
    std: mean !== null && second !== null ? Math.sqrt(Math.max(0, second - mean * mean)) : null,
    min: have.reduce<Num>((acc, p) => minOf(acc, get(p, "min")), null),
    max: have.reduce<Num>((acc, p) => maxOf(acc, get(p, "max")), null),
    abs_mean: weighted("abs_mean"),
    l2: Math.sqrt(have.reduce((acc, p) => acc + (get(p, "l2") ?? 0) ** 2, 0)),
    zeros: n > 0 ? have.reduce((acc, p) => acc + (get(p, "zeros") ?? 0) * (get(p, "numel") ?? 0), 0) / n : null,
    nan: sum("nan"),
    inf: sum("inf"),
  };
  return fields.map((f) => value[f] ?? null);
}

/** Histograms added on the range that holds them all: each one's cumulative counts are
 * interpolated at the new edges (as nbinspect/analyze/moments.py rebin_sum does). */
export function mergeHists(hists: (Hist | null)[]): Hist | null {
  const have = hists.filter((x): x is Hist => x !== null && x.c.length > 0);
  if (!have.length) return null;
  const bins = Math.max(...have.map((x) => x.c.length));
  const lo = Math.min(...have.map((x) => edgesOf(x)[0]));
  const hi = Math.max(...have.map((x) => edgesOf(x)[x.c.length]));
  const out = new Array<number>(bins).fill(0);
  const at = Array.from({ length: bins + 1 }, (_, i) => lo + ((hi - lo) * i) / bins);
  for (const x of have) {
    const e = edgesOf(x);
    const cum = [0];
    for (const c of x.c) cum.push(cum[cum.length - 1] + c);
    const cdf = (v: number) => {
      if (v <= e[0]) return 0;
      if (v >= e[e.length - 1]) return cum[cum.length - 1];
      let k = 0;
      while (e[k + 1] < v) k++;
      return cum[k] + ((cum[k + 1] - cum[k]) * (v - e[k])) / (e[k + 1] - e[k] || 1);
    };
    let previous = 0;
    for (let i = 0; i < bins; i++) {
      const next = Math.round(cdf(at[i + 1]));
      out[i] += next - previous;
      previous = next;
    }
  }
  return { e: [lo, hi], c: out };
}

const isIndex = (key: string) => /^\d+$/.test(key);

/** A structural signature per node: equal ids mean same types, keys, shapes and dtypes below. */
export function signatures(tree: Tree): Int32Array {
  const ids = new Map<string, number>();
  const sig = new Int32Array(tree.nodes.length);
  const intern = (s: string) => {
    let id = ids.get(s);
    if (id === undefined) {
      id = ids.size;
      ids.set(s, id);
    }
    return id;
  };
  for (let i = tree.nodes.length - 1; i >= 0; i--) {
    const n = tree.nodes[i];
    if (n.kind === "tensor") {
      sig[i] = intern(`T${n.key}:${n.shape ? n.shape.join("x") : "?"}:${n.dtype}:${n.requiresGrad}`);
    } else {
      const parts = n.children.map((c) => `${isIndex(tree.nodes[c].key) ? "#" : tree.nodes[c].key}=${sig[c]}`);
      sig[i] = intern(`M${n.type}(${parts.join(",")})`);
    }
  }
  return sig;
}

/** Fold runs of at least `minRun` consecutive numbered siblings with equal structure into one
 * "group" node (collapsed by default; expanding it shows the members). Changes `tree` in place
 * and returns it. */
export function foldRepeats(tree: Tree, minRun = 2): Tree {
  const sig = signatures(tree);
  const nodes = tree.nodes;
  const count = nodes.length;
  for (let i = 0; i < count; i++) {
    const parent = nodes[i];
    if (parent.kind !== "module") continue;
    const out: number[] = [];
    const kids = parent.children;
    for (let a = 0; a < kids.length; ) {
      let b = a + 1;
      const first = nodes[kids[a]];
      if (first.kind === "module" && isIndex(first.key)) {
        while (
          b < kids.length &&
          nodes[kids[b]].kind === "module" &&
          sig[kids[b]] === sig[kids[a]] &&
          nodes[kids[b]].key === String(Number(nodes[kids[b - 1]].key) + 1)
        )
          b++;
      }
      if (b - a >= minRun) out.push(makeGroup(nodes, parent, kids.slice(a, b), tree.statFields));
      else out.push(...kids.slice(a, b));
      a = b;
    }
    parent.children = out;
  }
  return tree;
}

function makeGroup(nodes: TreeNode[], parent: TreeNode, members: number[], statFields: string[]): number {
  const first = nodes[members[0]];
  const last = nodes[members[members.length - 1]];
  const range = `${first.key}–${last.key}`;
  const label = parent.depth === 0 && parent.path === "" ? range : `${parent.key}.${range}`;
  const path = parent.path === "" ? range : `${parent.path}.${range}`;
  const g = blank(nodes.length, "group", `${label} ×${members.length}`, path, first.depth, parent.id);
  g.type = first.type;
  g.shape = first.shape;
  g.inputShape = first.inputShape;
  g.histScope = first.histScope;
  g.count = members.length;
  g.children = members;
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
    g.problemTensors += n.problemTensors;
  }
  const labels = new Set(members.flatMap((id) => (nodes[id].problems ?? "").split(", ").filter(Boolean)));
  g.problems = labels.size ? PROBLEMS.filter((p) => labels.has(p)).join(", ") : null;
  const parts = members.map((id) => nodes[id]);
  g.stats = mergeStats(statFields, parts);
  g.hist = mergeHists(parts.map((p) => p.hist));
  nodes.push(g);
  return g.id;
}
