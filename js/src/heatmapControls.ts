// A heatmap's toolbar: the statistic per block, zoom out / in / fit, "keep colours", and for
// a tensor of more than two axes the two shown (the rest fixed at an index each). Every
// control changes the viewport (heatmapRegion.ts) and asks the widget (heatmap.ts) to fetch.

import { h } from "./dom";
import { defaultPlane, type Viewport } from "./heatmapRegion";

/** What the controls ask of the widget. */
export interface ControlActions {
  /** Fetch the current view. */
  request(): void;
  zoomAt(fx: number, fy: number, factor: number): void;
  /** The whole plane again. */
  reset(): void;
}

export class HeatmapControls {
  readonly bar = h("div", "nbi-heat-bar");
  readonly axesBar = h("div", "nbi-heat-bar");
  readonly keepBox = h("input", "", undefined, { type: "checkbox" });
  readonly axesSelect = h("select", "", undefined, { "aria-label": "Axes shown" });

  constructor(
    private readonly view: Viewport,
    private readonly act: ControlActions,
  ) {
    this.build();
  }

  private build(): void {
    const stat = h("select", "", undefined, { "aria-label": "Value shown per block" });
    for (const [v, t] of [
      ["mean", "mean"],
      ["absmax", "max |x|"],
    ])
      stat.append(h("option", "", t, { value: v }));
    stat.addEventListener("change", () => {
      this.view.stat = stat.value as "mean" | "absmax";
      this.view.limit = null;
      this.act.request();
    });
    const fit = h("label", "nbi-heat-chip", undefined, { title: "Zoom and pan keep the colours of this view" });
    this.keepBox.addEventListener("change", () => {
      this.view.keepScale = this.keepBox.checked;
      this.act.request();
    });
    fit.append(this.keepBox, document.createTextNode("keep colours"));
    const zoomBtn = (text: string, label: string, fn: () => void) => {
      const b = h("button", "", text, { type: "button", "aria-label": label, title: label });
      b.addEventListener("click", fn);
      return b;
    };
    this.bar.append(
      stat,
      zoomBtn("−", "Zoom out", () => this.act.zoomAt(0.5, 0.5, 2)),
      zoomBtn("+", "Zoom in", () => this.act.zoomAt(0.5, 0.5, 0.5)),
      zoomBtn("fit", "Show the whole tensor", () => this.act.reset()),
      fit,
    );
    if (this.view.shape.length > 2) this.buildAxes();
  }

  /** For more than two axes: the axes shown (rows, columns) and the index of each other one. */
  private buildAxes(): void {
    const shape = this.view.shape;
    const n = shape.length;
    const mode = this.axesSelect;
    mode.append(h("option", "", `all values (${defaultPlane(shape).rows.join("·")} × rest)`, { value: "split" }));
    for (let a = 0; a < n; a++)
      for (let b = 0; b < n; b++)
        if (a !== b) mode.append(h("option", "", `axis ${a} × axis ${b}`, { value: `${a},${b}` }));
    const fixedBox = h("span", "nbi-heat-chip");
    const apply = () => {
      fixedBox.replaceChildren();
      if (mode.value === "split") {
        this.view.plane = defaultPlane(shape);
      } else {
        const [a, b] = mode.value.split(",").map(Number);
        const others = shape.map((_, i) => i).filter((i) => i !== a && i !== b);
        const fixed: [number, number][] = others.map((i) => [i, 0]);
        for (const pair of fixed) {
          const input = h("input", "", undefined, {
            type: "number",
            min: "0",
            max: String(shape[pair[0]] - 1),
            value: "0",
            "aria-label": `Index of axis ${pair[0]}`,
          });
          input.addEventListener("change", () => {
            pair[1] = Math.max(0, Math.min(shape[pair[0]] - 1, Math.trunc(Number(input.value)) || 0));
            input.value = String(pair[1]);
            this.act.request();
          });
          fixedBox.append(document.createTextNode(` axis ${pair[0]} =`), input);
        }
        // rows/columns must be listed in increasing axis order: a > b shows the transpose
        this.view.plane = { rows: [a], cols: [b], fixed };
      }
      this.act.reset();
    };
    mode.addEventListener("change", apply);
    this.axesBar.append(mode, fixedBox);
  }

  /** Say "all values" in the axes picker, and show them. */
  showAllValues(): void {
    this.axesSelect.value = "split";
    this.axesSelect.dispatchEvent(new Event("change"));
  }
}
