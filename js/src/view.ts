// The tree table: a virtualized ARIA treegrid over the tree model, with sorting, folding,
// filtering, keyboard navigation and a detail panel for the selected row.
//
// One state object holds everything the user can change; every action changes it and calls
// render(), which redoes only the parts whose inputs changed (state parts are replaced, never
// mutated, so a changed part is a new object).

import { elementScroll, observeElementOffset, observeElementRect, Virtualizer } from "@tanstack/virtual-core";
import { COLUMNS, type Column, contentWidths, defaultColumns, type Measure, measurer, nameWidth } from "./columns";
import { type HistFetcher, renderDetail, type ValueFetchers } from "./detail";
import { button, h } from "./dom";
import { ancestors, expandedAll, expandedToDepth, flatten, type Mode, type Row } from "./flatten";
import { GRAPH_STYLES } from "./graphSvg";
import { GraphView } from "./graphView";
import { colourable, type HeatScale, heatScale, legend } from "./heat";
import type { Payload } from "./payload";
import { DETAIL_BESIDE_FROM, DETAIL_BESIDE_WIDTH, STYLES } from "./styles";
import { components, header, toolbar } from "./toolbar";
import { buildTree, type Tree, type TreeNode } from "./tree";

export const ROW_HEIGHT = 24;
const HEADER_HEIGHT = 28;
const VIEW_HEIGHT = 440;
let instances = 0;

export interface ViewOptions {
  onSelect(path: string): void;
  fetchHist?: HistFetcher;
  /** The value view's requests to the kernel (js/src/heatmap.ts). */
  values?: ValueFetchers;
}

export interface ViewState {
  tree: Tree;
  /** Ids of the expanded rows. */
  expanded: Set<number>;
  sort: { column: string; descending: boolean } | null;
  query: string;
  mode: Mode;
  /** Ids of the columns shown (the name column always is). */
  shown: Set<string>;
  /** Id of the selected row, -1 for none. */
  selected: number;
  /** Detail histogram on a log scale. */
  log: boolean;
  /** Only rows with weight problems. */
  problemsOnly: boolean;
  /** Column widths the user dragged, in px, by column id. */
  widths: Record<string, number>;
  /** The numeric column the rows are coloured by (heat.ts), or null. */
  colorBy: string | null;
}

/** Where a node is in any tree of the same model: its kind and path (ids change between payloads). */
const placeOf = (n: TreeNode): string => `${n.kind}:${n.path}`;

/** True when any of `deps` differs (by identity) from what it was at the last call for `key`. */
class Changes {
  private last = new Map<string, unknown[]>();
  since(key: string, deps: unknown[]): boolean {
    const before = this.last.get(key);
    this.last.set(key, deps);
    return !before || deps.some((d, i) => d !== before[i]);
  }
}

export class TreeView {
  readonly root = h("div", "nbi");
  state!: ViewState;
  rows: Row[] = [];
  private columns: Column[] = [];
  private readonly uid = `nbi${++instances}`;
  private readonly grid = h("div", "nbi-grid", undefined, { role: "treegrid", "aria-label": "Module tree" });
  private readonly head = h("div", "nbi-head", undefined, { role: "rowgroup" });
  private readonly body = h("div", "nbi-body", undefined, { role: "rowgroup" });
  private readonly detail = h("aside", "nbi-detail", undefined, { "aria-label": "Details of the selected row" });
  private readonly status = h("div", "nbi-status", undefined, { "aria-live": "polite" });
  private readonly top = h("div", "nbi-top");
  private readonly virtualizer: Virtualizer<HTMLDivElement, HTMLDivElement>;
  private readonly unmount: () => void;
  private readonly changes = new Changes();
  private template: HTMLElement = h("div");
  private heat: HeatScale | null = null;
  private readonly legendSlot = h("div", "nbi-legend-slot");
  private cancelDetail = () => {};
  /** The Graph mode, made when first shown. */
  graph: GraphView | null = null;
  private readonly graphHost = h("div", "nbi-graph-host", undefined, { hidden: "" });
  /** Whether the user chose the columns (else they follow the width). */
  private chosenColumns = false;
  /** Each column's width from its content, per tree (columns.contentWidths). */
  private fitted: Record<string, number> = {};
  private measures: { text: Measure; code: Measure; small: Measure } | null = null;
  // absent outside a browser (jsdom): the columns then stay as first chosen
  private readonly resize = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => this.fitColumns());

  constructor(
    host: HTMLElement,
    payload: Payload,
    private readonly opts: ViewOptions,
  ) {
    performance.mark("nbinspect:render-start");
    this.grid.tabIndex = 0;
    this.grid.append(this.head, this.body);
    const main = h("div", "nbi-main");
    main.append(this.grid, this.graphHost, this.detail);
    this.root.append(h("style", "", STYLES + GRAPH_STYLES), this.top, main, this.status);
    host.append(this.root);
    this.grid.addEventListener("keydown", (e) => this.onKey(e));
    this.body.addEventListener("click", (e) => this.onClick(e));
    // @tanstack/virtual-core is pinned exactly: _didMount and _willUpdate are its adapter hooks.
    this.virtualizer = new Virtualizer<HTMLDivElement, HTMLDivElement>({
      count: 0,
      getScrollElement: () => this.grid,
      estimateSize: () => ROW_HEIGHT,
      overscan: 12,
      scrollMargin: HEADER_HEIGHT,
      scrollPaddingStart: HEADER_HEIGHT,
      scrollToFn: elementScroll,
      observeElementOffset,
      observeElementRect: (v, cb) =>
        observeElementRect(v, (r) => cb({ width: r.width, height: r.height || VIEW_HEIGHT })),
      onChange: () => this.render(),
    });
    this.unmount = this.virtualizer._didMount();
    this.setPayload(payload);
    this.resize?.observe(this.root);
    this.virtualizer._willUpdate();
    performance.measure("nbinspect:first-render", "nbinspect:render-start");
  }

  /** Show another payload. Of the same model (a live view's next measurement) the user's place
   * stays: expanded rows, selection, scroll, sort, filter, mode and columns. Another model
   * starts afresh (the toolbar is rebuilt); chosen columns, widths, sort and log scale stay. */
  setPayload(payload: Payload): void {
    const tree = buildTree(payload);
    this.showGraph(false);
    this.graph = null;
    const before = this.state;
    const offered = COLUMNS.filter((c) => c.available(tree));
    this.fitted = contentWidths(offered, tree, this.measure().text, this.measure().small);
    const same = before !== undefined && sameModel(before.tree, tree);
    if (same) {
      const ids = new Map(tree.nodes.map((n) => [placeOf(n), n.id]));
      const moved = (id: number) => (id >= 0 ? (ids.get(placeOf(before.tree.nodes[id])) ?? -1) : -1);
      const expanded = new Set([...before.expanded].map(moved).filter((id) => id >= 0));
      const shown = this.chosenColumns
        ? before.shown
        : defaultColumns(offered, this.tableWidth(), this.fitWidths(tree));
      const top = this.grid.scrollTop;
      const left = this.grid.scrollLeft;
      this.state = { ...before, tree, expanded, shown, selected: moved(before.selected) };
      this.top.firstElementChild?.replaceWith(this.header()); // the toolbar keeps its filter text
      this.render();
      this.grid.scrollTop = top;
      this.grid.scrollLeft = left;
      return;
    }
    this.state = {
      tree,
      expanded: expandedToDepth(tree, 2),
      sort: before?.sort ?? null,
      query: "",
      mode: "tree",
      shown:
        this.chosenColumns && before ? before.shown : defaultColumns(offered, this.tableWidth(), this.fitWidths(tree)),
      selected: -1,
      log: before?.log ?? false,
      problemsOnly: false,
      widths: before?.widths ?? {},
      colorBy: tree.has.compare ? "rel_change" : null,
    };
    this.buildTop();
    this.render();
  }

  /** Text measures in the widget's fonts (of the cells, the names, the small tags). */
  private measure(): { text: Measure; code: Measure; small: Measure } {
    if (!this.measures) {
      const style = typeof getComputedStyle === "undefined" ? null : getComputedStyle(this.root);
      const size = Number.parseFloat(style?.fontSize ?? "") || 13;
      const family = style?.fontFamily || "system-ui, sans-serif";
      const code = "ui-monospace, SFMono-Regular, Menlo, monospace";
      this.measures = {
        text: measurer(`600 ${size}px ${family}`), // bold: the header labels are, and it errs wide
        code: measurer(`${size * 0.95}px ${code}`),
        small: measurer(`600 ${size * 0.85}px ${family}`),
      };
    }
    return this.measures;
  }

  private header(): HTMLElement {
    const { tree } = this.state;
    return header(tree.payload, tree.nodes[tree.root]?.flops ?? null);
  }

  private buildTop(): void {
    const { tree, shown } = this.state;
    const payload = tree.payload;
    const maxDepth = tree.nodes.reduce((d, n) => Math.max(d, n.kind === "module" ? n.depth : 0), 0);
    const parts = [
      this.header(),
      toolbar(
        this.available(),
        shown,
        Math.max(1, maxDepth),
        {
          query: (query) => this.update({ query }),
          mode: (mode) => this.update({ mode }),
          depth: (d) => this.expandToDepth(d),
          expandAll: () => this.expandAll(),
          collapseAll: () => this.collapseAll(),
          column: (id, on) => this.setColumn(id, on),
          problemsOnly: tree.has.stats ? (on) => this.update({ problemsOnly: on }) : undefined,
          colourBy: (id) => this.update({ colorBy: id }),
          graph: payload.graph ? (on) => this.showGraph(on) : undefined,
        },
        { columns: this.available().filter(colourable), current: this.state.colorBy },
      ),
      this.legendSlot,
    ];
    const summary = components(payload);
    if (summary) parts.push(summary);
    this.top.replaceChildren(...parts);
  }

  /** The table's width: the widget's, less the details panel where that sits beside it. */
  private tableWidth(): number {
    const width = this.root.clientWidth;
    return width > DETAIL_BESIDE_FROM ? width - DETAIL_BESIDE_WIDTH : width;
  }

  /** Until the user picks columns, the initial ones that fit the width. */
  private fitColumns(): void {
    if (this.chosenColumns) return;
    const shown = defaultColumns(this.available(), this.tableWidth(), this.fitWidths(this.state.tree));
    if ([...shown].join() === [...this.state.shown].join()) return;
    this.update({ shown });
    for (const box of this.top.querySelectorAll<HTMLInputElement>("input[data-column]"))
      box.checked = shown.has(box.dataset.column ?? "");
  }

  /** The columns this tree offers. */
  available(): Column[] {
    return COLUMNS.filter((c) => c.available(this.state.tree));
  }

  // ---- actions (the toolbar, header and row clicks and keys call these; tests and benchmarks too)

  /** Show the dataflow graph in place of the table (one selection and detail panel for both). */
  showGraph(on: boolean): void {
    const data = this.state?.tree.payload.graph;
    if (on && data && !this.graph) {
      const { tree } = this.state;
      this.graph = new GraphView(
        data,
        {
          select: (path) => {
            const node = tree.nodes.find((n) => n.kind === "module" && n.path === path);
            if (node) this.select(node.id);
          },
        },
        tree.payload.model.name,
      );
      this.graphHost.append(this.graph.root);
    }
    this.graphHost.hidden = !on;
    this.grid.hidden = on;
    if (on && this.graph) {
      const s = this.state;
      this.graph.setQuery(s.query);
      this.graph.setSelected(s.selected >= 0 ? s.tree.nodes[s.selected].path : null);
      this.graph.fit();
    }
  }

  /** Cycle a column's sort: its natural direction (numbers descending first), reversed, off. */
  sortBy(id: string): void {
    const column = COLUMNS.find((c) => c.id === id);
    if (!column) return;
    const cur = this.state.sort;
    const first = column.numeric;
    if (!cur || cur.column !== id) this.update({ sort: { column: id, descending: first } });
    else this.update({ sort: cur.descending === first ? { column: id, descending: !first } : null });
    this.virtualizer.scrollToOffset(0); // the top of the new order
    this.grid.scrollTop = 0;
  }

  /** A column's width in px (the user dragged its edge). */
  setWidth(id: string, px: number): void {
    this.update({ widths: { ...this.state.widths, [id]: Math.max(40, Math.round(px)) } });
  }

  toggle(id: number): void {
    const expanded = new Set(this.state.expanded);
    if (!expanded.delete(id)) expanded.add(id);
    this.update({ expanded });
  }

  expandAll(): void {
    if (this.graph && !this.graphHost.hidden) this.graph.expandAll();
    else this.update({ expanded: expandedAll(this.state.tree) });
  }

  collapseAll(): void {
    if (this.graph && !this.graphHost.hidden) this.graph.collapseAll();
    else this.update({ expanded: new Set() });
  }

  expandToDepth(depth: number): void {
    if (this.graph && !this.graphHost.hidden) this.graph.expandToDepth(depth);
    else this.update({ expanded: expandedToDepth(this.state.tree, depth) });
  }

  setColumn(id: string, shown: boolean): void {
    this.chosenColumns = true;
    const next = new Set(this.state.shown);
    if (shown) next.add(id);
    else next.delete(id);
    this.update({ shown: next });
  }

  /** Select a row (and reveal it): the detail panel shows it and `onSelect` hears its path. */
  select(id: number, notify = true): void {
    const { tree, expanded, mode, query } = this.state;
    if (id < 0 || id >= tree.nodes.length) return;
    const hidden = ancestors(tree, id).filter((a) => !expanded.has(a));
    const reveal = hidden.length > 0 && mode === "tree" && !query;
    this.update({ selected: id, expanded: reveal ? new Set([...expanded, ...hidden]) : expanded });
    this.scrollToSelected();
    if (notify) this.opts.onSelect(tree.nodes[id].path);
  }

  /** Select the row at `path` (from Python's `selected`; null clears) without echoing it back. */
  selectPath(path: string | null): void {
    if (path === null) {
      this.update({ selected: -1 });
      return;
    }
    const node = this.state.tree.nodes.find((n) => n.kind !== "group" && n.path === path);
    if (node && node.id !== this.state.selected) this.select(node.id, false);
  }

  destroy(): void {
    this.resize?.disconnect();
    this.cancelDetail();
    this.unmount();
    this.root.remove();
  }

  // ---- rendering: the one path every change takes

  private update(change: Partial<ViewState>): void {
    performance.mark("nbinspect:update-start");
    this.state = { ...this.state, ...change };
    this.render();
    if (this.graph && !this.graphHost.hidden) {
      const { query, selected, tree } = this.state;
      this.graph.setQuery(query);
      this.graph.setSelected(selected >= 0 ? tree.nodes[selected].path : null);
    }
    performance.measure("nbinspect:update", "nbinspect:update-start");
  }

  private render(): void {
    const s = this.state;
    if (this.changes.since("columns", [s.tree, s.shown, s.widths, s.mode])) {
      this.columns = this.available().filter((c) => c.id === "name" || s.shown.has(c.id));
      this.template = this.rowTemplate();
    }
    if (this.changes.since("heat", [s.tree, s.colorBy])) {
      const column = this.available().find((c) => c.id === s.colorBy);
      this.heat = column ? heatScale(s.tree, column) : null;
      this.legendSlot.replaceChildren(...(this.heat ? [legend(this.heat)] : []));
    }
    if (this.changes.since("rows", [s.tree, s.expanded, s.sort, s.query, s.mode, s.problemsOnly])) this.layoutRows();
    if (this.changes.since("head", [this.columns, s.sort])) this.renderHead();
    this.paintRows();
    if (this.changes.since("detail", [s.tree, s.selected, s.log])) this.renderDetailPanel();
  }

  private layoutRows(): void {
    const { tree, sort } = this.state;
    const column = sort && COLUMNS.find((c) => c.id === sort.column);
    const order =
      column && sort ? { value: (n: TreeNode) => column.value(n, tree), descending: sort.descending } : null;
    this.rows = flatten(tree, { ...this.state, sort: order });
    this.grid.setAttribute("aria-rowcount", String(this.rows.length + 1));
    this.virtualizer.setOptions({ ...this.virtualizer.options, count: this.rows.length });
    const total = this.virtualizer.getTotalSize();
    this.body.style.height = `${total}px`;
    this.grid.style.height = `${Math.min(VIEW_HEIGHT, total + HEADER_HEIGHT + 2)}px`;
    const count = this.rows.length;
    this.status.textContent = `${count.toLocaleString("en-US")} ${count === 1 ? "row" : "rows"}`;
  }

  private scrollToSelected(): void {
    const index = this.rows.findIndex((r) => r.id === this.state.selected);
    if (index >= 0) this.virtualizer.scrollToIndex(index, { align: "auto" });
  }

  /** The name column's content width in `mode`, up to 45% of the table (the numbers must stay in reach). */
  private nameWidth(tree: Tree, mode: Mode): number {
    const m = this.measure();
    return nameWidth(tree, mode, m.code, m.small, Math.max(200, Math.round((this.tableWidth() || 1000) * 0.45)));
  }

  /** Every column's width from its content (the name column's in tree mode), for choosing
   * which fit; dragged widths win. */
  private fitWidths(tree: Tree): Record<string, number> {
    return { ...this.fitted, name: this.nameWidth(tree, "tree"), ...(this.state?.widths ?? {}) };
  }

  /** Dragged widths first, else each column's content width; the name column takes what is
   * left, at least its content. */
  private gridColumns(): string {
    const { widths, tree, mode } = this.state;
    return this.columns
      .map((c) => {
        if (widths[c.id]) return `${widths[c.id]}px`;
        if (c.id === "name") return `minmax(${this.nameWidth(tree, mode)}px, 1fr)`;
        return this.fitted[c.id] ? `${this.fitted[c.id]}px` : c.width;
      })
      .join(" ");
  }

  private renderHead(): void {
    const row = h("div", "nbi-row nbi-head-row", undefined, { role: "row", "aria-rowindex": "1" });
    row.style.gridTemplateColumns = this.gridColumns();
    const sort = this.state.sort;
    for (const c of this.columns) {
      const cell = h("div", `nbi-cell nbi-col-${c.id}${c.numeric ? " nbi-num" : ""}`, undefined, {
        role: "columnheader",
      });
      cell.dataset.column = c.id;
      const sortButton = button("nbi-sort", c.label, () => this.sortBy(c.id));
      sortButton.title = `${c.title} (click to sort)`;
      if (sort?.column === c.id) {
        cell.setAttribute("aria-sort", sort.descending ? "descending" : "ascending");
        sortButton.append(h("span", "nbi-arrow", sort.descending ? " ▼" : " ▲"));
      }
      cell.append(sortButton, this.resizeHandle(c.id, cell));
      row.append(cell);
    }
    this.head.replaceChildren(row);
  }

  /** A drag handle on a header cell's right edge that sets the column's width. */
  private resizeHandle(id: string, cell: HTMLElement): HTMLElement {
    const handle = h("span", "nbi-resize", undefined, { "aria-hidden": "true", title: "Drag to resize" });
    handle.addEventListener("pointerdown", (e) => {
      e.preventDefault();
      e.stopPropagation();
      const start = e.clientX;
      const width = cell.getBoundingClientRect().width;
      const move = (m: PointerEvent) => this.setWidth(id, width + m.clientX - start);
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
    handle.addEventListener("click", (e) => e.stopPropagation());
    return handle;
  }

  /** An empty row with one cell per shown column, cloned for every visible row. */
  private rowTemplate(): HTMLElement {
    const row = h("div", "nbi-row", undefined, { role: "row" });
    row.style.gridTemplateColumns = this.gridColumns();
    for (const c of this.columns)
      row.append(h("div", `nbi-cell nbi-col-${c.id}${c.numeric ? " nbi-num" : ""}`, undefined, { role: "gridcell" }));
    return row;
  }

  private paintRows(): void {
    const out: HTMLElement[] = [];
    for (const item of this.virtualizer.getVirtualItems()) {
      const row = this.rows[item.index];
      if (!row) continue;
      const el = this.rowElement(row, item.index);
      el.style.transform = `translateY(${item.start - HEADER_HEIGHT}px)`;
      out.push(el);
    }
    this.body.replaceChildren(...out);
    const { selected } = this.state;
    if (this.rows.some((r) => r.id === selected))
      this.grid.setAttribute("aria-activedescendant", `${this.uid}-r${selected}`);
    else this.grid.removeAttribute("aria-activedescendant");
  }

  private rowElement(row: Row, index: number): HTMLElement {
    const { tree, mode, selected } = this.state;
    const n = tree.nodes[row.id];
    const el = this.template.cloneNode(true) as HTMLElement;
    el.classList.add(`nbi-kind-${n.kind}`);
    if (row.id === selected) el.classList.add("nbi-selected");
    el.id = `${this.uid}-r${row.id}`;
    el.dataset.id = String(row.id);
    el.dataset.path = n.path;
    el.setAttribute("aria-rowindex", String(index + 2));
    el.setAttribute("aria-level", String(row.level));
    el.setAttribute("aria-selected", String(row.id === selected));
    if (row.expandable) el.setAttribute("aria-expanded", String(row.expanded));
    const warmth = this.heat?.of(n) ?? 0;
    if (warmth > 0) {
      el.style.setProperty("--nbi-heat", `${Math.round(warmth * 45)}%`);
      el.classList.add("nbi-heat");
    }
    const ctx = { tree, row, mode };
    for (let i = 0; i < this.columns.length; i++) this.columns[i].render(el.children[i] as HTMLElement, n, ctx);
    return el;
  }

  private renderDetailPanel(): void {
    this.cancelDetail();
    const { tree, selected, log } = this.state;
    this.cancelDetail = renderDetail(this.detail, tree, selected >= 0 ? tree.nodes[selected] : null, {
      log,
      onLog: (on) => this.update({ log: on }),
      fetchHist: this.opts.fetchHist,
      values: this.opts.values,
    });
  }

  // ---- input

  /** One listener for every row: the caret toggles, anything else selects. */
  private onClick(e: MouseEvent): void {
    const target = e.target as HTMLElement;
    const el = target.closest<HTMLElement>("[role=row]");
    if (!el?.dataset.id) return;
    const id = Number(el.dataset.id);
    if (target.closest(".nbi-caret")) {
      this.toggle(id);
      return;
    }
    const text = window.getSelection();
    if (text && !text.isCollapsed && el.contains(text.anchorNode)) return; // selecting text in this row
    this.select(id);
    this.grid.focus({ preventScroll: true });
  }

  private onKey(e: KeyboardEvent): void {
    if (!this.rows.length) return;
    const { tree, selected, mode } = this.state;
    const index = Math.max(
      0,
      this.rows.findIndex((r) => r.id === selected),
    );
    const row = this.rows[index];
    const go = (i: number) => this.select(this.rows[Math.max(0, Math.min(this.rows.length - 1, i))].id);
    const keys: Record<string, () => void> = {
      ArrowDown: () => go(selected < 0 ? 0 : index + 1),
      ArrowUp: () => go(index - 1),
      PageDown: () => go(index + 15),
      PageUp: () => go(index - 15),
      Home: () => go(0),
      End: () => go(this.rows.length - 1),
      ArrowRight: () =>
        row.expandable && !row.expanded ? this.toggle(row.id) : row.expanded ? go(index + 1) : undefined,
      ArrowLeft: () => {
        if (row.expanded) this.toggle(row.id);
        else if (mode === "tree" && tree.nodes[row.id].parent >= 0) this.select(tree.nodes[row.id].parent);
      },
      Enter: () => (row.expandable ? this.toggle(row.id) : undefined),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    if (selected < 0 && e.key !== "ArrowDown") {
      go(0);
      return;
    }
    action();
    if (e.key === "ArrowRight" || e.key === "ArrowLeft" || e.key === "Enter") this.scrollToSelected();
  }
}

/** Whether two trees are of one model (the same modules and tensors, by path): a live view's
 * next payload, whose rows the user's place carries over to. */
function sameModel(a: Tree, b: Tree): boolean {
  if (a.nodes.length !== b.nodes.length || a.payload.model.name !== b.payload.model.name) return false;
  return a.nodes.every((n, i) => placeOf(n) === placeOf(b.nodes[i]));
}
