// The tree model, part 1: nodes built from the payload, and repeated blocks folded.
// Pure: no DOM. Nodes live in one array; a node's `children` are ids into it.

import type { Hist, ModuleColumns, Num, Payload, Shape, TensorColumns } from "./payload";

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
  dtype: string | null;
  stats: Num[] | null;
  hist: Hist | null;
  /** Why stats are missing or changed (from the stats frame's `note`). */
  note: string | null;
  attrs: Record<string, unknown> | null;
  aliasOf: string | null;
  tiedTo: string | null;
  requiresGrad: boolean | null;
  status: string | null;
  /** Relative change; for modules and folds the largest among the tensors below. */
  relChange: Num;
  /** Index into payload.modules or payload.tensors (-1 for folds). */
  source: number;
  /** Members of a fold. */
  count: number;
}

export interface Tree {
  /** What the tree was built from: columns may read fields of it (moduleField, tensorField). */
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
    dtype: null,
    stats: null,
    hist: null,
    note: null,
    attrs: null,
    aliasOf: null,
    tiedTo: null,
    requiresGrad: null,
    status: null,
    relChange: null,
    source: -1,
    count: 0,
  };
}

const add = (a: Num, b: Num): Num => (a === null ? b : b === null ? a : a + b);
const maxOf = (a: Num, b: Num): Num => (a === null ? b : b === null ? a : Math.max(a, b));

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
    n.stats = at(m.stats, i);
    n.hist = at(m.hist, i);
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
    n.note = at(t.note, j);
    n.tiedTo = t.tied_to[j];
    n.requiresGrad = t.requires_grad[j];
    const cmp = at(t.compare, j);
    if (cmp) [n.status, n.relChange] = cmp;
    n.source = j;
    nodes.push(n);
    owner.children.push(n.id);
  }
  for (let i = 0; i < m.key.length; i++) nodes[i].children.push(...moduleChildren[i]);
  for (let i = m.key.length - 1; i >= 0; i--) {
    for (const c of nodes[i].children) nodes[i].relChange = maxOf(nodes[i].relChange, nodes[c].relChange);
  }
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

/** A module node's entry of a payload module column; null for other nodes and absent columns. */
export function moduleField<K extends keyof ModuleColumns>(
  tree: Tree,
  n: TreeNode,
  key: K,
): NonNullable<ModuleColumns[K]>[number] | null {
  return n.kind === "module" ? (tree.payload.modules[key]?.[n.source] ?? null) : null;
}

/** A tensor node's entry of a payload tensor column; null for other nodes and absent columns. */
export function tensorField<K extends keyof TensorColumns>(
  tree: Tree,
  n: TreeNode,
  key: K,
): NonNullable<TensorColumns[K]>[number] | null {
  return n.kind === "tensor" ? (tree.payload.tensors[key]?.[n.source] ?? null) : null;
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
      if (b - a >= minRun) out.push(makeGroup(nodes, parent, kids.slice(a, b)));
      else out.push(...kids.slice(a, b));
      a = b;
    }
    parent.children = out;
  }
  return tree;
}

function makeGroup(nodes: TreeNode[], parent: TreeNode, members: number[]): number {
  const first = nodes[members[0]];
  const last = nodes[members[members.length - 1]];
  const range = `${first.key}–${last.key}`;
  const label = parent.depth === 0 && parent.path === "" ? range : `${parent.key}.${range}`;
  const path = parent.path === "" ? range : `${parent.path}.${range}`;
  const g = blank(nodes.length, "group", `${label} ×${members.length}`, path, first.depth, parent.id);
  g.type = first.type;
  g.shape = first.shape;
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
  }
  nodes.push(g);
  return g.id;
}
