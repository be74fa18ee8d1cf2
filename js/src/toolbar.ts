// The header (model name, totals) and the toolbar (filter, mode, depth, expand/collapse,
// column chooser) above the tree. Plain DOM; the view wires the callbacks.

import type { Column } from "./columns";
import { button, h } from "./dom";
import type { Mode } from "./flatten";
import { columnFormat, formatBytes, formatCompact, formatCount, formatParams } from "./format";
import type { Payload } from "./payload";
import { PROBLEMS } from "./tree";

export interface ToolbarActions {
  query(text: string): void;
  mode(mode: Mode): void;
  depth(depth: number): void;
  expandAll(): void;
  collapseAll(): void;
  column(id: string, shown: boolean): void;
  /** Present when the tree has weight statistics. */
  problemsOnly?: (on: boolean) => void;
  /** Present after a trace: show the dataflow graph instead of the table (or not). */
  graph?: (on: boolean) => void;
  /** Colour the rows by a numeric column (null: none). */
  colourBy(id: string | null): void;
}

function total(label: string, value: string, title: string): HTMLElement {
  const item = h("span", "nbi-total");
  item.title = title;
  item.append(h("span", "nbi-total-label", label), h("span", "nbi-total-value", value));
  return item;
}

/** How a problem reads after "1 tensor ": "with NaN", "all zero", "with exploding values". */
const PROBLEM_PHRASES: Record<string, string> = {
  NaN: "with NaN",
  Inf: "with ±Inf",
  "all zero": "all zero",
  constant: "constant (every value equal)",
  exploding: "with exploding values",
  vanishing: "with vanishing values",
};

/** "2 tensors with NaN", one phrase per problem, counting distinct tensors (a tied path once). */
export function problemSummary(payload: Payload): string[] {
  const t = payload.tensors;
  const counts = new Map<string, number>();
  (t.problems ?? []).forEach((problems, j) => {
    if (!problems || t.tied_to[j]) return;
    for (const p of problems.split(", ")) counts.set(p, (counts.get(p) ?? 0) + 1);
  });
  return PROBLEMS.filter((p) => counts.has(p)).map((p) => {
    const n = counts.get(p) ?? 0;
    return `${n} tensor${n === 1 ? "" : "s"} ${PROBLEM_PHRASES[p] ?? `with ${p}`}`;
  });
}

/** Model name (a comparison: both sides) and totals: parameters unique and by path,
 * trainable, memory, FLOPs; weight problems first when there are any. */
export function header(payload: Payload, rootFlops: number | null): HTMLElement {
  const t = payload.totals;
  const box = h("div", "nbi-header");
  const cmp = payload.comparison;
  const run = payload.timeline;
  const name = h("span", "nbi-model", cmp && !run ? `${cmp.a} → ${cmp.b}` : payload.model.name);
  const fw = payload.model.framework;
  const what = run ? `training run (${fw}) · ${run.title}` : cmp ? `comparison (${fw})` : fw;
  const framework = h("span", "nbi-framework", what);
  const problems = problemSummary(payload);
  if (problems.length) {
    box.append(h("span", "nbi-problems", `⚠ ${problems.join(" · ")}`, { role: "status" }));
  }
  const totals = h("div", "nbi-totals");
  const unique = t.total_params ?? null;
  const byPath = t.total_params_by_path ?? null;
  totals.append(
    total("params", formatParams(unique), `${formatCount(unique)} unique parameters (shared storage counted once)`),
  );
  if (byPath !== null && byPath !== unique) {
    totals.append(
      total(
        "if shared weights were counted at every path",
        formatParams(byPath),
        `${formatCount(byPath)}: what counters that sum every parameter path report (tied weights twice)`,
      ),
    );
  }
  totals.append(
    total(
      "trainable",
      formatParams(t.trainable_params ?? null),
      `${formatCount(t.trainable_params ?? null)} trainable, ${formatCount(t.non_trainable_params ?? null)} frozen`,
    ),
    total(
      "memory",
      formatBytes((t.param_bytes ?? 0) + (t.buffer_bytes ?? 0)),
      `${formatBytes(t.param_bytes ?? null)} parameters + ${formatBytes(t.buffer_bytes ?? null)} buffers`,
    ),
  );
  const plan = typeof t.plan_bytes === "number" ? t.plan_bytes : null;
  if (plan !== null)
    totals.append(
      total(
        "training step",
        formatBytes(plan),
        `${formatBytes(plan)} one training step needs, as planned (${String(t.plan_options ?? "")})`,
      ),
    );
  if (rootFlops !== null) {
    const note = typeof t.flops_note === "string" ? ` ${t.flops_note}` : "";
    totals.append(
      total(
        "FLOPs",
        formatCompact(rootFlops),
        `${formatCount(rootFlops)} floating point operations per traced forward pass.${note}`,
      ),
    );
  }
  if (typeof t.activation_bytes === "number")
    totals.append(
      total("activations", formatBytes(t.activation_bytes), "bytes autograd saved for backward in the trace"),
    );
  totals.append(total("modules", formatCount(t.num_modules ?? null), "distinct module objects, root included"));
  box.prepend(name, framework);
  box.append(totals);
  return box;
}

/** A comparison's per-component summary, as `print(comparison)` has it; null otherwise. */
export function components(payload: Payload): HTMLElement | null {
  const c = payload.comparison?.components;
  if (!c?.component.length) return null;
  const box = h("details", "nbi-components");
  box.open = true;
  box.append(h("summary", "", "Per component"));
  const table = h("table", "nbi-components-table");
  const head = h("tr", "");
  for (const label of ["Component", "Tensors", "Differ", "Change", "Cosine", "Max |Δ|", "Mean drift"])
    head.append(h("th", "", label));
  table.append(head);
  const [change, cosine, delta, drift] = [c.rel_change, c.cosine, c.max_abs_delta, c.mean_drift].map(columnFormat);
  c.component.forEach((name, i) => {
    const tr = h("tr", "");
    tr.append(
      h("td", "", name),
      h("td", "nbi-num", formatCount(c.tensors[i])),
      h("td", "nbi-num", formatCount(c.differ[i])),
      h("td", "nbi-num", change(c.rel_change[i])),
      h("td", "nbi-num", cosine(c.cosine[i])),
      h("td", "nbi-num", delta(c.max_abs_delta[i])),
      h("td", "nbi-num", drift(c.mean_drift[i])),
    );
    table.append(tr);
  });
  box.append(table);
  return box;
}

/** The "Colour by" picker: none, or one of `columns`, `current` chosen. */
function colourPicker(columns: Column[], current: string | null, act: ToolbarActions): HTMLElement {
  const pick = h("select", "nbi-colour", undefined, { "aria-label": "Colour the rows by a column" });
  for (const [value, label] of [["", "Colour: none"], ...columns.map((c) => [c.id, `Colour: ${c.label}`])]) {
    const o = h("option", "", label);
    o.value = value;
    o.selected = value === (current ?? "");
    pick.append(o);
  }
  pick.addEventListener("change", () => act.colourBy(pick.value || null));
  return pick;
}

export function toolbar(
  columns: Column[],
  shown: Set<string>,
  maxDepth: number,
  act: ToolbarActions,
  colour: { columns: Column[]; current: string | null },
): HTMLElement {
  const bar = h("div", "nbi-toolbar");
  const search = h("input", "nbi-search");
  search.type = "search";
  search.placeholder = "Filter by name or type";
  search.setAttribute("aria-label", "Filter rows by name or type");
  search.addEventListener("input", () => act.query(search.value));

  const mode = h("select", "nbi-mode");
  mode.setAttribute("aria-label", "Show the tree, leaf modules, tensors or the dataflow graph");
  for (const [value, label] of [
    ["tree", "Tree"],
    ["leaves", "Leaf modules"],
    ["tensors", "Tensors"],
  ]) {
    const o = h("option", "", label);
    o.value = value;
    mode.append(o);
  }
  if (act.graph) mode.append(h("option", "", "Graph", { value: "graph" }));
  mode.addEventListener("change", () => {
    act.graph?.(mode.value === "graph");
    if (mode.value !== "graph") act.mode(mode.value as Mode);
  });

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
  bar.append(search, mode, depth, expand, collapse, chooser, colourPicker(colour.columns, colour.current, act));
  if (act.problemsOnly) {
    const only = act.problemsOnly;
    const label = h("label", "nbi-only");
    const box = h("input", "", undefined, { type: "checkbox" });
    box.addEventListener("change", () => only(box.checked));
    label.append(box, document.createTextNode(" Problems only"));
    bar.append(label);
  }
  return bar;
}
