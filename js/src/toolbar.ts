// The header (model name, totals) and the toolbar (filter, mode, depth, expand/collapse,
// column chooser) above the tree. Plain DOM; the view wires the callbacks.

import type { Column } from "./columns";
import type { Mode } from "./flatten";
import { formatBytes, formatCompact, formatCount } from "./format";
import type { Payload } from "./types";

export interface ToolbarActions {
  query(text: string): void;
  mode(mode: Mode): void;
  depth(depth: number): void;
  expandAll(): void;
  collapseAll(): void;
  column(id: string, shown: boolean): void;
}

function make<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function total(label: string, value: string, title: string): HTMLElement {
  const item = make("span", "nbi-total");
  item.title = title;
  item.append(make("span", "nbi-total-label", label), make("span", "nbi-total-value", value));
  return item;
}

/** Model name and totals: parameters unique and by path, trainable, memory, FLOPs. */
export function header(payload: Payload, rootFlops: number | null): HTMLElement {
  const t = payload.totals;
  const box = make("div", "nbi-header");
  const name = make("span", "nbi-model", payload.model.name);
  const framework = make("span", "nbi-framework", payload.model.framework);
  const totals = make("div", "nbi-totals");
  const unique = t.total_params ?? null;
  const byPath = t.total_params_by_path ?? null;
  totals.append(
    total("params", formatCompact(unique), `${formatCount(unique)} unique parameters (shared storage counted once)`),
  );
  if (byPath !== null && byPath !== unique) {
    totals.append(total("by path", formatCompact(byPath), `${formatCount(byPath)} counting every path, as naive counters do`));
  }
  totals.append(
    total("trainable", formatCompact(t.trainable_params ?? null), `${formatCount(t.trainable_params ?? null)} trainable, ${formatCount(t.non_trainable_params ?? null)} frozen`),
    total("memory", formatBytes((t.param_bytes ?? 0) + (t.buffer_bytes ?? 0)), `${formatBytes(t.param_bytes ?? null)} parameters + ${formatBytes(t.buffer_bytes ?? null)} buffers`),
  );
  if (rootFlops !== null) totals.append(total("FLOPs", formatCompact(rootFlops), `${formatCount(rootFlops)} floating point operations per traced forward pass`));
  totals.append(total("modules", formatCount(t.num_modules ?? null), "distinct module objects, root included"));
  box.append(name, framework, totals);
  return box;
}

export function toolbar(columns: Column[], shown: Set<string>, maxDepth: number, act: ToolbarActions): HTMLElement {
  const bar = make("div", "nbi-toolbar");
  const search = make("input", "nbi-search");
  search.type = "search";
  search.placeholder = "Filter by name or type";
  search.setAttribute("aria-label", "Filter rows by name or type");
  search.addEventListener("input", () => act.query(search.value));

  const mode = make("select", "nbi-mode");
  mode.setAttribute("aria-label", "Show the tree, leaf modules or tensors");
  for (const [value, label] of [["tree", "Tree"], ["leaves", "Leaf modules"], ["tensors", "Tensors"]]) {
    const o = make("option", "", label);
    o.value = value;
    mode.append(o);
  }
  mode.addEventListener("change", () => act.mode(mode.value as Mode));

  const depth = make("select", "nbi-depth");
  depth.setAttribute("aria-label", "Expand to depth");
  const prompt = make("option", "", "Depth…");
  prompt.value = "";
  depth.append(prompt);
  for (let d = 1; d <= maxDepth; d++) {
    const o = make("option", "", `Depth ${d}`);
    o.value = String(d);
    depth.append(o);
  }
  depth.addEventListener("change", () => {
    if (depth.value) act.depth(Number(depth.value));
    depth.value = "";
  });

  const expand = make("button", "nbi-button", "Expand all");
  expand.type = "button";
  expand.addEventListener("click", () => act.expandAll());
  const collapse = make("button", "nbi-button", "Collapse all");
  collapse.type = "button";
  collapse.addEventListener("click", () => act.collapseAll());

  const chooser = make("details", "nbi-columns");
  chooser.append(make("summary", "nbi-button", "Columns"));
  const list = make("div", "nbi-columns-list");
  for (const c of columns) {
    if (c.id === "name") continue;
    const label = make("label", "");
    const box = make("input", "");
    box.type = "checkbox";
    box.checked = shown.has(c.id);
    box.dataset.column = c.id;
    box.addEventListener("change", () => act.column(c.id, box.checked));
    label.append(box, document.createTextNode(` ${c.label}`));
    list.append(label);
  }
  chooser.append(list);
  bar.append(search, mode, depth, expand, collapse, chooser);
  return bar;
}
