// The detail panel of the selected row: a larger histogram (log toggle), the statistics,
// the layer's attributes and its parameter tensors.

import { h } from "./dom";
import { formatBytes, formatCount, formatShape, formatStat, trainableStatus } from "./format";
import { chart } from "./histogram";
import type { Hist } from "./payload";
import type { Tree, TreeNode } from "./tree";
import { type ValueFetchers, valuePanel } from "./values_panel";

export type { ValueFetchers };

/** Fetches a row's full-resolution histogram from the kernel; absent on a static page. */
export type HistFetcher = (name: string, kind: "tensor" | "module") => Promise<Hist | null>;

export interface DetailOptions {
  log: boolean;
  onLog(log: boolean): void;
  fetchHist?: HistFetcher;
  values?: ValueFetchers;
}

const STAT_LABELS: Record<string, string> = {
  numel: "elements",
  abs_mean: "mean |x|",
  l2: "L2 norm",
  zeros: "zero fraction",
  nan: "NaN",
  inf: "±Inf",
};

function table(caption: string, rows: [string, string][]): HTMLElement {
  const t = h("table", "nbi-kv");
  const c = h("caption", "", caption);
  t.append(c);
  for (const [k, v] of rows) {
    const tr = h("tr", "");
    tr.append(h("th", "", k), h("td", "", v));
    t.append(tr);
  }
  return t;
}

function display(value: unknown): string {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isInteger(value) ? formatCount(value) : formatStat(value);
  return typeof value === "string" ? value : JSON.stringify(value);
}

function summary(n: TreeNode): [string, string][] {
  const rows: [string, string][] = [["type", n.kind === "group" ? `${n.type} ×${n.count}` : n.type]];
  if (n.params !== null) rows.push(["parameters", formatCount(n.params)]);
  const status = trainableStatus(n.trainable, n.frozen);
  if (status)
    rows.push(["trainable", `${status} (${formatCount(n.trainable)} trainable, ${formatCount(n.frozen)} frozen)`]);
  if (n.memory !== null) rows.push(["memory", formatBytes(n.memory)]);
  if (n.shape) rows.push([n.kind === "tensor" ? "shape" : "output shapes", formatShape(n.shape)]);
  if (n.dtype) rows.push(["dtype", n.dtype]);
  if (n.kind === "tensor" && n.requiresGrad !== null) rows.push(["requires_grad", String(n.requiresGrad)]);
  if (n.flops !== null) rows.push(["FLOPs", formatCount(n.flops)]);
  if (n.activation !== null) rows.push(["activation memory", formatBytes(n.activation)]);
  if (n.tiedTo) rows.push(["tied to", n.tiedTo]);
  if (n.aliasOf) rows.push(["alias of", n.aliasOf]);
  if (n.problems) {
    const tensorCount = `${n.problemTensors} ${n.problemTensors === 1 ? "tensor" : "tensors"}`;
    rows.push(["problems", n.kind === "tensor" ? n.problems : `${n.problems} (${tensorCount})`]);
  }
  if (n.status) rows.push(["status", n.status]);
  if (n.relChange !== null)
    rows.push([n.kind === "tensor" ? "rel. change" : "largest rel. change", formatStat(n.relChange)]);
  if (n.cosine !== null) rows.push(["cosine", formatStat(n.cosine)]);
  if (n.maxAbsDelta !== null) rows.push(["max |Δ|", formatStat(n.maxAbsDelta)]);
  if (n.meanDrift !== null) rows.push(["mean drift", formatStat(n.meanDrift)]);
  return rows;
}

function tensorTable(tree: Tree, n: TreeNode): HTMLElement | null {
  const tensors = n.children.map((c) => tree.nodes[c]).filter((c) => c.kind === "tensor");
  if (!tensors.length) return null;
  const t = h("table", "nbi-tensors");
  t.append(h("caption", "", "Tensors"));
  const head = h("tr", "");
  for (const label of ["name", "kind", "shape", "dtype", "grad"]) head.append(h("th", "", label));
  t.append(head);
  for (const c of tensors) {
    const tr = h("tr", "");
    const grad = c.kind === "tensor" && c.type === "parameter" ? (c.requiresGrad ? "yes" : "no") : "";
    const name = c.tiedTo ? `${c.key} → ${c.tiedTo}` : c.key;
    tr.append(
      h("td", "", name),
      h("td", "", c.type),
      h("td", "", formatShape(c.shape)),
      h("td", "", c.dtype ?? ""),
      h("td", "", grad),
    );
    t.append(tr);
  }
  return t;
}

/** Fill `panel` with the details of `node`; returns a function that cancels a pending fetch. */
export function renderDetail(panel: HTMLElement, tree: Tree, node: TreeNode | null, opts: DetailOptions): () => void {
  panel.replaceChildren();
  if (!node) {
    panel.append(h("p", "nbi-hint", "Select a row to see its details."));
    return () => {};
  }
  const title = h("h3", "nbi-detail-title", node.kind === "module" && node.path === "" ? node.key : node.path);
  panel.append(title, table("Summary", summary(node)));
  let cancelled = false;
  if (node.histA || node.histB) {
    const box = h("div", "nbi-chart-box nbi-before-after");
    for (const [label, hist] of [
      ["before (a)", node.histA],
      ["after (b)", node.histB],
    ] as const) {
      box.append(h("div", "nbi-chart-caption", label));
      if (hist) box.append(chart(hist, { width: 300, height: 130, log: false }));
      else box.append(h("p", "nbi-hint", "not in this side"));
    }
    panel.append(box);
  }
  if (node.hist) {
    const box = h("div", "nbi-chart-box");
    const toggle = h("label", "nbi-log");
    const check = h("input", "", undefined, { type: "checkbox" });
    check.checked = opts.log;
    check.addEventListener("change", () => opts.onLog(check.checked));
    toggle.append(check, document.createTextNode(" log scale"));
    const scope =
      node.histScope === "weight matrices"
        ? h("div", "nbi-chart-caption", "Weight matrices below (norm scales and biases left out)")
        : "";
    const draw = (hist: Hist) =>
      box.replaceChildren(scope, chart(hist, { width: 300, height: 170, log: opts.log }), toggle);
    draw(node.hist);
    panel.append(box);
    const kind = node.kind === "tensor" ? "tensor" : "module";
    opts.fetchHist?.(node.path, kind).then(
      (fine) => {
        if (!cancelled && fine) draw(fine);
      },
      () => {},
    );
  }
  if (node.stats) {
    const rows = tree.statFields.map((f, i): [string, string] => [STAT_LABELS[f] ?? f, display(node.stats?.[i])]);
    if (node.note) rows.push(["note", node.note]);
    panel.append(table("Statistics", rows));
  }
  if (node.attrs && Object.keys(node.attrs).length) {
    panel.append(
      table(
        "Attributes",
        Object.entries(node.attrs).map(([k, v]): [string, string] => [k, display(v)]),
      ),
    );
  }
  const values = valuePanel(tree, node, opts.values);
  if (values) panel.append(values.el);
  const tensors = tensorTable(tree, node);
  if (tensors) panel.append(tensors);
  return () => {
    cancelled = true;
    values?.destroy();
  };
}
