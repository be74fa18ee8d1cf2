// The header (model name, totals) and the toolbar (filter, mode, depth, expand/collapse,
// column chooser) above the tree. Plain DOM; the view wires the callbacks.

import type { Column } from "./columns";
import { button, h } from "./dom";
import type { Mode } from "./flatten";
import { formatBytes, formatCompact, formatCount } from "./format";
import type { Payload } from "./payload";

export interface ToolbarActions {
  query(text: string): void;
  mode(mode: Mode): void;
  depth(depth: number): void;
  expandAll(): void;
  collapseAll(): void;
  column(id: string, shown: boolean): void;
}

function total(label: string, value: string, title: string): HTMLElement {
  const item = h("span", "nbi-total");
  item.title = title;
  item.append(h("span", "nbi-total-label", label), h("span", "nbi-total-value", value));
  return item;
}

/** Model name and totals: parameters unique and by path, trainable, memory, FLOPs. */
export function header(payload: Payload, rootFlops: number | null): HTMLElement {
  const t = payload.totals;
  const box = h("div", "nbi-header");
  const name = h("span", "nbi-model", payload.model.name);
  const framework = h("span", "nbi-framework", payload.model.framework);
  const totals = h("div", "nbi-totals");
  const unique = t.total_params ?? null;
  const byPath = t.total_params_by_path ?? null;
  totals.append(
    total("params", formatCompact(unique), `${formatCount(unique)} unique parameters (shared storage counted once)`),
  );
  if (byPath !== null && byPath !== unique) {
    totals.append(
      total("by path", formatCompact(byPath), `${formatCount(byPath)} counting every path, as naive counters do`),
    );
  }
  totals.append(
    total(
      "trainable",
      formatCompact(t.trainable_params ?? null),
      `${formatCount(t.trainable_params ?? null)} trainable, ${formatCount(t.non_trainable_params ?? null)} frozen`,
    ),
    total(
      "memory",
      formatBytes((t.param_bytes ?? 0) + (t.buffer_bytes ?? 0)),
      `${formatBytes(t.param_bytes ?? null)} parameters + ${formatBytes(t.buffer_bytes ?? null)} buffers`,
    ),
  );
  if (rootFlops !== null)
    totals.append(
      total(
        "FLOPs",
        formatCompact(rootFlops),
        `${formatCount(rootFlops)} floating point operations per traced forward pass`,
      ),
    );
  totals.append(total("modules", formatCount(t.num_modules ?? null), "distinct module objects, root included"));
  box.append(name, framework, totals);
  return box;
}

export function toolbar(columns: Column[], shown: Set<string>, maxDepth: number, act: ToolbarActions): HTMLElement {
  const bar = h("div", "nbi-toolbar");
  const search = h("input", "nbi-search");
  search.type = "search";
  search.placeholder = "Filter by name or type";
  search.setAttribute("aria-label", "Filter rows by name or type");
  search.addEventListener("input", () => act.query(search.value));

  const mode = h("select", "nbi-mode");
  mode.setAttribute("aria-label", "Show the tree, leaf modules or tensors");
  for (const [value, label] of [
    ["tree", "Tree"],
    ["leaves", "Leaf modules"],
    ["tensors", "Tensors"],
  ]) {
    const o = h("option", "", label);
    o.value = value;
    mode.append(o);
  }
  mode.addEventListener("change", () => act.mode(mode.value as Mode));

  const depth = h("select", "nbi-depth");
  depth.setAttribute("aria-label", "Expand to depth");
  const prompt = h("option", "", "Depth…");
  prompt.value = "";
  depth.append(prompt);
  for (let d = 1; d <= maxDepth; d++) {
    const o = h("option", "", `Depth ${d}`);
    o.value = String(d);
    depth.append(o);
  }
  depth.addEventListener("change", () => {
    if (depth.value) act.depth(Number(depth.value));
    depth.value = "";
  });

  const expand = button("nbi-button", "Expand all", () => act.expandAll());
  const collapse = button("nbi-button", "Collapse all", () => act.collapseAll());

  const chooser = h("details", "nbi-columns");
  chooser.append(h("summary", "nbi-button", "Columns"));
  const list = h("div", "nbi-columns-list");
  for (const c of columns) {
    if (c.id === "name") continue;
    const label = h("label", "");
    const box = h("input", "");
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
