// The tree table: a virtualized ARIA treegrid over the tree model, with sorting, folding,
// filtering, keyboard navigation and a detail panel for the selected row.

import { Virtualizer, elementScroll, observeElementOffset, observeElementRect } from "@tanstack/virtual-core";
import { COLUMNS, type Column } from "./columns";
import { renderDetail } from "./detail";
import { ancestors, expandedAll, expandedToDepth, flatten, type Mode, type Row, type ViewState } from "./flatten";
import { formatPercent, trainableStatus } from "./format";
import { sparkline } from "./histogram";
import { STYLES } from "./styles";
import { header, toolbar } from "./toolbar";
import { buildTree, foldRepeats, type Tree, type TreeNode } from "./tree";
import type { HistFetcher, Payload } from "./types";

export const ROW_HEIGHT = 24;
const HEADER_HEIGHT = 28;
const VIEW_HEIGHT = 440;
let instances = 0;

export interface ViewOptions {
  onSelect(path: string): void;
  fetchHist?: HistFetcher;
}

function div(cls: string, role?: string): HTMLDivElement {
  const e = document.createElement("div");
  e.className = cls;
  if (role) e.setAttribute("role", role);
  return e;
}

/** Highlight strength for a relative change: 0 below 1e-4, full at 1 and above. */
function heat(rel: number | null): number {
  return rel === null || rel <= 0 ? 0 : Math.max(0, Math.min(1, (Math.log10(rel) + 4) / 4));
}

export class TreeView {
  readonly root: HTMLDivElement;
  tree!: Tree;
  rows: Row[] = [];
  readonly state: ViewState = { expanded: new Set(), sort: null, query: "", mode: "tree" };
  sortColumn: { id: string; descending: boolean } | null = null;
  selected = -1;
  private shown = new Set(COLUMNS.filter((c) => c.initial).map((c) => c.id));
  private log = false;
  private readonly uid = `nbi${++instances}`;
  private readonly grid = div("nbi-grid", "treegrid");
  private readonly head = div("nbi-head", "rowgroup");
  private readonly body = div("nbi-body", "rowgroup");
  private readonly detail = document.createElement("aside");
  private readonly status = div("nbi-status");
  private readonly top = div("nbi-top");
  private readonly virtualizer: Virtualizer<HTMLDivElement, HTMLDivElement>;
  private readonly unmount: () => void;
  private cancelDetail = () => {};

  constructor(host: HTMLElement, payload: Payload, private readonly opts: ViewOptions) {
    performance.mark("nbinspect:render-start");
    this.root = div("nbi");
    const style = document.createElement("style");
    style.textContent = STYLES;
    this.grid.tabIndex = 0;
    this.grid.setAttribute("aria-label", "Module tree");
    this.grid.append(this.head, this.body);
    this.detail.className = "nbi-detail";
    this.detail.setAttribute("aria-label", "Details of the selected row");
    this.status.setAttribute("aria-live", "polite");
    const main = div("nbi-main");
    main.append(this.grid, this.detail);
    this.root.append(style, this.top, main, this.status);
    host.append(this.root);
    this.virtualizer = new Virtualizer<HTMLDivElement, HTMLDivElement>({
      count: 0,
      getScrollElement: () => this.grid,
      estimateSize: () => ROW_HEIGHT,
      overscan: 12,
      scrollMargin: HEADER_HEIGHT,
      scrollPaddingStart: HEADER_HEIGHT,
      scrollToFn: elementScroll,
      observeElementOffset,
      observeElementRect: (v, cb) => observeElementRect(v, (r) => cb({ width: r.width, height: r.height || VIEW_HEIGHT })),
      onChange: () => this.paintRows(),
    });
    this.unmount = this.virtualizer._didMount();
    this.grid.addEventListener("keydown", (e) => this.onKey(e));
    this.setPayload(payload);
    performance.measure("nbinspect:first-render", "nbinspect:render-start");
  }

  /** Show another payload; view state is reset. */
  setPayload(payload: Payload): void {
    this.tree = foldRepeats(buildTree(payload));
    this.state.expanded = expandedToDepth(this.tree, 2);
    this.selected = -1;
    const maxDepth = this.tree.nodes.reduce((d, n) => Math.max(d, n.kind === "module" ? n.depth : 0), 0);
    this.top.replaceChildren(
      header(payload, this.tree.nodes[this.tree.root]?.flops ?? null),
      toolbar(this.available(), this.shown, Math.max(1, maxDepth), {
        query: (q) => this.update(() => (this.state.query = q)),
        mode: (m) => this.setMode(m),
        depth: (d) => this.expandToDepth(d),
        expandAll: () => this.expandAll(),
        collapseAll: () => this.collapseAll(),
        column: (id, on) => this.setColumn(id, on),
      }),
    );
    this.renderHead();
    this.refresh();
    this.renderDetailPanel();
  }

  available(): Column[] {
    return COLUMNS.filter((c) => c.available(this.tree));
  }

  columns(): Column[] {
    return this.available().filter((c) => c.id === "name" || this.shown.has(c.id));
  }

  // ---- actions (the toolbar, header clicks and keys call these; tests and benchmarks too)

  sortBy(id: string): void {
    const column = COLUMNS.find((c) => c.id === id);
    if (!column) return;
    const cur = this.sortColumn;
    const first = column.numeric;
    if (!cur || cur.id !== id) this.sortColumn = { id, descending: first };
    else if (cur.descending === first) this.sortColumn = { id, descending: !first };
    else this.sortColumn = null;
    const sc = this.sortColumn;
    this.state.sort = sc ? { value: (n) => column.value(n, this.tree), descending: sc.descending } : null;
    this.renderHead();
    this.refresh();
  }

  setMode(mode: Mode): void {
    this.update(() => (this.state.mode = mode));
  }

  toggle(id: number): void {
    const e = this.state.expanded;
    this.update(() => (e.has(id) ? e.delete(id) : e.add(id)));
  }

  expandAll(): void {
    this.update(() => (this.state.expanded = expandedAll(this.tree)));
  }

  collapseAll(): void {
    this.update(() => (this.state.expanded = new Set()));
  }

  expandToDepth(depth: number): void {
    this.update(() => (this.state.expanded = expandedToDepth(this.tree, depth)));
  }

  setColumn(id: string, shown: boolean): void {
    if (shown) this.shown.add(id);
    else this.shown.delete(id);
    this.renderHead();
    this.paintRows();
  }

  /** Select a row (and reveal it): the detail panel shows it and `onSelect` hears its path. */
  select(id: number, notify = true): void {
    if (id < 0 || id >= this.tree.nodes.length) return;
    this.selected = id;
    const hidden = ancestors(this.tree, id).filter((a) => !this.state.expanded.has(a));
    if (hidden.length && this.state.mode === "tree" && !this.state.query) {
      for (const a of hidden) this.state.expanded.add(a);
      this.refresh();
    }
    const index = this.rows.findIndex((r) => r.id === id);
    if (index >= 0) this.virtualizer.scrollToIndex(index, { align: "auto" });
    this.paintRows();
    this.renderDetailPanel();
    if (notify) this.opts.onSelect(this.tree.nodes[id].path);
  }

  /** Select the row at `path` (from Python's `selected`; null clears) without echoing it back. */
  selectPath(path: string | null): void {
    const node = path === null ? undefined : this.tree.nodes.find((n) => n.kind !== "group" && n.path === path);
    if (node && node.id !== this.selected) this.select(node.id, false);
    if (path === null && this.selected >= 0) {
      this.selected = -1;
      this.paintRows();
      this.renderDetailPanel();
    }
  }

  destroy(): void {
    this.cancelDetail();
    this.unmount();
    this.root.remove();
  }

  // ---- rendering

  private update(change: () => void): void {
    performance.mark("nbinspect:update-start");
    change();
    this.refresh();
    performance.measure("nbinspect:update", "nbinspect:update-start");
  }

  private refresh(): void {
    this.rows = flatten(this.tree, this.state);
    this.grid.setAttribute("aria-rowcount", String(this.rows.length + 1));
    this.virtualizer.setOptions({ ...this.virtualizer.options, count: this.rows.length });
    this.virtualizer._willUpdate();
    const total = this.virtualizer.getTotalSize();
    this.body.style.height = `${total}px`;
    this.grid.style.height = `${Math.min(VIEW_HEIGHT, total + HEADER_HEIGHT + 2)}px`;
    this.status.textContent = `${this.rows.length.toLocaleString("en-US")} rows`;
    this.paintRows();
  }

  private template(): string {
    return this.columns().map((c) => c.width).join(" ");
  }

  private renderHead(): void {
    const row = div("nbi-row nbi-head-row", "row");
    row.setAttribute("aria-rowindex", "1");
    row.style.gridTemplateColumns = this.template();
    for (const c of this.columns()) {
      const cell = div(`nbi-cell nbi-col-${c.id}${c.numeric ? " nbi-num" : ""}`, "columnheader");
      cell.dataset.column = c.id;
      const button = document.createElement("button");
      button.type = "button";
      button.className = "nbi-sort";
      button.title = `${c.title} (click to sort)`;
      button.textContent = c.label;
      const sorted = this.sortColumn?.id === c.id;
      if (sorted) {
        cell.setAttribute("aria-sort", this.sortColumn?.descending ? "descending" : "ascending");
        button.append(Object.assign(document.createElement("span"), { className: "nbi-arrow", textContent: this.sortColumn?.descending ? " ▼" : " ▲" }));
      }
      button.addEventListener("click", () => this.sortBy(c.id));
      cell.append(button);
      row.append(cell);
    }
    this.head.replaceChildren(row);
  }

  private paintRows(): void {
    const columns = this.columns();
    const template = this.template();
    const out: HTMLElement[] = [];
    for (const item of this.virtualizer.getVirtualItems()) {
      const row = this.rows[item.index];
      if (!row) continue;
      const el = this.rowElement(row, item.index, columns);
      el.style.gridTemplateColumns = template;
      el.style.transform = `translateY(${item.start - HEADER_HEIGHT}px)`;
      out.push(el);
    }
    this.body.replaceChildren(...out);
    const active = this.rows.some((r) => r.id === this.selected) ? `${this.uid}-r${this.selected}` : "";
    if (active) this.grid.setAttribute("aria-activedescendant", active);
    else this.grid.removeAttribute("aria-activedescendant");
  }

  private rowElement(row: Row, index: number, columns: Column[]): HTMLElement {
    const n = this.tree.nodes[row.id];
    const el = div(`nbi-row nbi-kind-${n.kind}${row.id === this.selected ? " nbi-selected" : ""}`, "row");
    el.id = `${this.uid}-r${row.id}`;
    el.dataset.path = n.path;
    el.setAttribute("aria-rowindex", String(index + 2));
    el.setAttribute("aria-level", String(row.level));
    el.setAttribute("aria-selected", String(row.id === this.selected));
    if (row.expandable) el.setAttribute("aria-expanded", String(row.expanded));
    const h = heat(n.relChange);
    if (h > 0) el.style.setProperty("--nbi-heat", `${Math.round(h * 45)}%`);
    if (h > 0) el.classList.add("nbi-heat");
    el.addEventListener("click", (e) => {
      if ((e.target as HTMLElement).closest(".nbi-caret")) {
        this.toggle(row.id);
        return;
      }
      const text = window.getSelection();
      if (text && !text.isCollapsed && el.contains(text.anchorNode)) return; // selecting text in this row
      this.select(row.id);
      this.grid.focus({ preventScroll: true });
    });
    for (const c of columns) el.append(this.cell(c, n, row));
    return el;
  }

  private cell(c: Column, n: TreeNode, row: Row): HTMLElement {
    const cell = div(`nbi-cell nbi-col-${c.id}${c.numeric ? " nbi-num" : ""}`, "gridcell");
    if (c.id === "name") {
      cell.style.paddingLeft = `${(row.level - 1) * 14 + 4}px`;
      const caret = document.createElement("span");
      caret.className = "nbi-caret";
      caret.setAttribute("aria-hidden", "true");
      caret.textContent = row.expandable ? (row.expanded ? "▾" : "▸") : "";
      const key = document.createElement("span");
      key.className = "nbi-key";
      key.textContent = this.state.mode === "tree" ? n.key : n.path;
      cell.append(caret, key);
      cell.title = n.path;
      if (n.aliasOf) cell.append(Object.assign(document.createElement("span"), { className: "nbi-tag", textContent: `= ${n.aliasOf}` }));
      if (n.tiedTo) cell.append(Object.assign(document.createElement("span"), { className: "nbi-tag", textContent: `→ ${n.tiedTo}` }));
      return cell;
    }
    if (c.id === "dist") {
      if (n.hist) cell.append(sparkline(n.hist));
      return cell;
    }
    if (c.id === "train") {
      const status = trainableStatus(n.trainable, n.frozen);
      if (status) cell.append(Object.assign(document.createElement("span"), { className: `nbi-badge nbi-${status}`, textContent: status === "trainable" ? "✓" : status }));
      cell.title = status;
      return cell;
    }
    cell.textContent = c.text(n, this.tree);
    cell.title = cell.textContent;
    if (c.id === "params" && n.params !== null && n.kind !== "tensor") {
      cell.append(Object.assign(document.createElement("span"), { className: "nbi-pct", textContent: formatPercent(n.params, this.tree.totalParams) }));
    }
    return cell;
  }

  private renderDetailPanel(): void {
    this.cancelDetail();
    const node = this.selected >= 0 ? this.tree.nodes[this.selected] : null;
    this.cancelDetail = renderDetail(this.detail, this.tree, node, {
      log: this.log,
      onLog: (log) => {
        this.log = log;
        this.renderDetailPanel();
      },
      fetchHist: this.opts.fetchHist,
    });
  }

  private onKey(e: KeyboardEvent): void {
    if (!this.rows.length) return;
    const index = Math.max(0, this.rows.findIndex((r) => r.id === this.selected));
    const row = this.rows[index];
    const go = (i: number) => this.select(this.rows[Math.max(0, Math.min(this.rows.length - 1, i))].id);
    const keys: Record<string, () => void> = {
      ArrowDown: () => go(this.selected < 0 ? 0 : index + 1),
      ArrowUp: () => go(index - 1),
      PageDown: () => go(index + 15),
      PageUp: () => go(index - 15),
      Home: () => go(0),
      End: () => go(this.rows.length - 1),
      ArrowRight: () => (row.expandable && !row.expanded ? this.toggle(row.id) : row.expanded ? go(index + 1) : undefined),
      ArrowLeft: () => {
        if (row.expanded) this.toggle(row.id);
        else if (this.state.mode === "tree" && this.tree.nodes[row.id].parent >= 0) this.select(this.tree.nodes[row.id].parent);
      },
      Enter: () => (row.expandable ? this.toggle(row.id) : undefined),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    if (this.selected < 0 && e.key !== "ArrowDown") return go(0);
    action();
    if (e.key === "ArrowRight" || e.key === "ArrowLeft" || e.key === "Enter") {
      const i = this.rows.findIndex((r) => r.id === this.selected);
      if (i >= 0) this.virtualizer.scrollToIndex(i, { align: "auto" });
    }
  }
}
