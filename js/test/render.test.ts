// Rendering against a fake anywidget model in jsdom.

import { afterEach, describe, expect, it } from "vitest";
import type { Payload } from "../src/payload";
import { payload } from "./fixtures";
import { mount, unmountAll } from "./mount";

afterEach(unmountAll);

/** The mounted widget, its grid and its rows. */
function mountGrid(p: Payload = payload(), selected: string | null = null) {
  const { model, el } = mount(p, selected);
  const grid = el.querySelector<HTMLElement>("[role=treegrid]")!;
  const rows = () => [...el.querySelectorAll<HTMLElement>(".nbi-body [role=row]")];
  const row = (path: string) => rows().find((r) => r.dataset.path === path);
  return { model, el, grid, rows, row };
}

const key = (grid: HTMLElement, k: string) =>
  grid.dispatchEvent(new KeyboardEvent("keydown", { key: k, bubbles: true }));

describe("render", () => {
  it("is an ARIA treegrid with levels, expansion state and column headers", () => {
    const { grid, rows, row, el } = mountGrid();
    expect(grid.getAttribute("aria-rowcount")).toBe(String(rows().length + 1));
    expect(row("")!.getAttribute("aria-level")).toBe("1");
    expect(row("")!.getAttribute("aria-expanded")).toBe("true");
    expect(row("blocks")!.getAttribute("aria-level")).toBe("2");
    expect(row("stem.weight")!.hasAttribute("aria-expanded")).toBe(false);
    const headers = [...el.querySelectorAll("[role=columnheader]")].map((h) => h.textContent);
    expect(headers).toEqual([
      "Name",
      "Type",
      "Params",
      "Train",
      "Shape",
      "Memory",
      "Histogram",
      "Mean",
      "Std",
      "Status",
      "Change",
      "Cosine",
      "Max |Δ|",
      "Mean drift",
    ]);
    expect(el.querySelector(".nbi-header")!.textContent).toContain("Net");
  });

  it("expands a fold on click and marks the sorted column", () => {
    const { row, el } = mountGrid();
    const fold = row("blocks.0–3")!;
    expect(fold.getAttribute("aria-expanded")).toBe("false");
    expect(fold.textContent).toContain("blocks.0–3 ×4");
    fold.querySelector<HTMLElement>(".nbi-caret")!.click();
    expect(row("blocks.0–3")!.getAttribute("aria-expanded")).toBe("true");
    expect(row("blocks.2")!.getAttribute("aria-level")).toBe("4");
    const params = el.querySelector<HTMLElement>('[role=columnheader][data-column="params"] button')!;
    params.click();
    expect(el.querySelector('[role=columnheader][data-column="params"]')!.getAttribute("aria-sort")).toBe("descending");
    params.click();
    expect(el.querySelector('[role=columnheader][data-column="params"]')!.getAttribute("aria-sort")).toBe("ascending");
    params.click();
    expect(el.querySelector('[role=columnheader][data-column="params"]')!.hasAttribute("aria-sort")).toBe(false);
  });

  it("sends the selected path to the model and shows details", () => {
    const { model, row, el } = mountGrid();
    row("stem")!.click();
    expect(model.state.selected).toBe("stem");
    expect(model.saved).toBe(1);
    expect(row("stem")!.getAttribute("aria-selected")).toBe("true");
    const detail = el.querySelector(".nbi-detail")!;
    expect(detail.textContent).toContain("in_features");
    expect(detail.querySelector(".nbi-tensors")!.textContent).toContain("[8, 5]");
    row("stem.weight")!.click();
    expect(detail.querySelector("svg.nbi-chart")).not.toBeNull();
    expect(detail.textContent).toContain("count");
  });

  it("moves with the arrow keys and expands with Enter", () => {
    const { model, grid, row } = mountGrid();
    key(grid, "ArrowDown");
    expect(model.state.selected).toBe(""); // the root module
    key(grid, "ArrowDown");
    key(grid, "ArrowDown");
    expect(model.state.selected).toBe("stem.weight");
    key(grid, "ArrowLeft");
    expect(model.state.selected).toBe("stem");
    key(grid, "ArrowLeft");
    expect(row("stem")!.getAttribute("aria-expanded")).toBe("false");
    key(grid, "Enter");
    expect(row("stem")!.getAttribute("aria-expanded")).toBe("true");
  });

  it("draws an inline histogram for rows with stats and colours changed rows", () => {
    const { row } = mountGrid();
    expect(row("stem.weight")!.querySelector("svg.nbi-spark rect")).not.toBeNull();
    // no module roll-up stats in this fixture: a module's histogram is of its weight matrices
    expect(row("stem")!.querySelector("svg.nbi-spark")).not.toBeNull();
    expect(row("stem")!.querySelector(".nbi-col-dist")!.getAttribute("title")).toContain("Weight matrices");
    expect(row("stem.weight")!.classList.contains("nbi-heat")).toBe(true);
    expect(row("head.weight")!.classList.contains("nbi-heat")).toBe(false);
  });

  it("labels a changed dtype so that it fits the status column, with the full status as its title", () => {
    const p = payload();
    const i = p.tensors.key.findIndex((k, j) => `${p.modules.key[p.tensors.module[j]]}.${k}` === "stem.weight");
    p.tensors.compare![i] = ["dtype_changed", p.tensors.compare![i]![1]];
    const { row } = mountGrid(p);
    const cell = row("stem.weight")!.querySelector(".nbi-col-status")!;
    expect(cell.textContent).toBe("dtype");
    expect(cell.getAttribute("title")).toContain("dtype changed");
    expect(row("head.weight")!.querySelector(".nbi-col-status")!.textContent).toBe("same");
  });

  it("filters from the search box and hides columns", () => {
    const { el, rows } = mountGrid();
    const search = el.querySelector<HTMLInputElement>(".nbi-search")!;
    search.value = "head";
    search.dispatchEvent(new Event("input"));
    expect(rows().map((r) => r.dataset.path)).toEqual(["", "head", "head.weight"]);
    const box = el.querySelector<HTMLInputElement>('.nbi-columns input[data-column="type"]')!;
    box.checked = false;
    box.dispatchEvent(new Event("change"));
    expect(el.querySelector('[role=columnheader][data-column="type"]')).toBeNull();
  });

  it("renders strings as text, never as markup", () => {
    const p = payload();
    p.modules.type[1] = "<script>alert(1)</script>";
    p.modules.key[1] = "<img src=x onerror=alert(1)>";
    p.modules.attrs[1] = { extra_repr: "<b>bold</b>" };
    const { el, rows, model } = mountGrid(p);
    const stem = rows()[1];
    expect(stem.textContent).toContain("<script>alert(1)</script>");
    expect(el.querySelector("script, img, b")).toBeNull();
    stem.click();
    expect(model.state.selected).toBe("<img src=x onerror=alert(1)>");
    expect(el.querySelector(".nbi-detail")!.textContent).toContain("<b>bold</b>");
    expect(el.querySelector("script, img, b")).toBeNull();
  });

  it("opens at the row the model already has selected and follows payload changes", () => {
    const { row, model, rows } = mountGrid(payload(), "blocks.2.fc");
    expect(row("blocks.2.fc")!.getAttribute("aria-selected")).toBe("true");
    model.change("selected", "head.weight"); // set from Python
    expect(row("head.weight")!.getAttribute("aria-selected")).toBe("true");
    model.change("selected", null);
    expect(rows().some((r) => r.getAttribute("aria-selected") === "true")).toBe(false);
    expect(model.saved).toBe(0);
    const next = payload();
    next.model.name = "Other";
    model.change("payload", next);
    expect(rows()[0].textContent).toContain("Other");
  });

  it("reads the payload a kernel sends as JSON bytes (a DataView), the same as the object", () => {
    const bytes = (p: Payload) => new DataView(new TextEncoder().encode(JSON.stringify(p)).buffer);
    const fromObject = mountGrid(payload(), "blocks.2.fc");
    const paths = fromObject.rows().map((r) => r.dataset.path);
    unmountAll();
    const { model, rows, row } = mountGrid(bytes(payload()) as unknown as Payload, "blocks.2.fc");
    expect(rows().map((r) => r.dataset.path)).toEqual(paths);
    expect(row("blocks.2.fc")!.getAttribute("aria-selected")).toBe("true");
    const next = payload();
    next.model.name = "Other";
    model.change("payload", bytes(next) as unknown as Payload);
    expect(rows()[0].textContent).toContain("Other");
  });

  it("keeps expansion, selection, filter and sort across five live updates of the same model", () => {
    const { model, el, rows, row, grid } = mountGrid();
    const caret = (path: string) => row(path)!.querySelector<HTMLElement>(".nbi-caret")!;
    caret("blocks.0–3").click(); // open the fold
    caret("blocks.4").click();
    row("blocks.4.fc")!.click();
    el.querySelector<HTMLElement>('[data-column="params"] .nbi-sort')!.click();
    const search = el.querySelector<HTMLInputElement>(".nbi-search")!;
    const before = rows().map((r) => r.dataset.path);
    const params = (p: Payload, k: number) => p.modules.params.map((v) => (v === null ? v : v + k));
    for (let k = 1; k <= 5; k++) {
      const next = payload();
      next.modules.params = params(next, k); // the numbers move, the model stays
      model.change("payload", next);
      expect(rows().map((r) => r.dataset.path)).toEqual(before);
      expect(row("blocks.4.fc")!.getAttribute("aria-selected")).toBe("true");
      expect(row("blocks.4")!.getAttribute("aria-expanded")).toBe("true");
      expect(grid.querySelector('[aria-sort="descending"]')?.getAttribute("data-column")).toBe("params");
      expect(el.querySelector(".nbi-detail-title")?.textContent).toBe("blocks.4.fc");
    }
    expect(el.querySelector(".nbi-search")).toBe(search); // the toolbar (and what is typed in it) stays
    const other = payload();
    other.model.name = "Other";
    model.change("payload", other); // another model starts afresh
    expect(rows().some((r) => r.getAttribute("aria-selected") === "true")).toBe(false);
  });
});
