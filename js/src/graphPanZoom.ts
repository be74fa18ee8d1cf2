// The Graph mode's viewport: where the drawing sits on the canvas and how large (one
// translate + scale on the world group). Ctrl/⌘/Alt + wheel zooms at the pointer, a drag on
// the background pans; graphView.ts calls fit, zoomBy and reveal for its buttons and keys.

import type { Rect } from "./graphLayout";

/** The drawing's size, in layout units. */
interface Size {
  width: number;
  height: number;
}

export class PanZoom {
  private zoom = { k: 1, x: 0, y: 0 };

  constructor(
    private readonly canvas: HTMLElement,
    private readonly svgEl: SVGSVGElement,
    private readonly world: SVGGElement,
  ) {
    this.listen();
  }

  /** The whole drawing on screen; with `readable`, no smaller than names can be read (a tall
   * view then starts at its top, the rest a drag or a key away). */
  fit({ width, height }: Size, readable = false): void {
    const w = this.canvas.clientWidth || 800;
    const h0 = this.canvas.clientHeight || 520;
    const whole = Math.min(w / (width + 20), h0 / (height + 20));
    const k = Math.min(1.5, Math.max(0.03, readable ? Math.max(whole, Math.min(0.7, w / (width + 20))) : whole));
    this.zoom = { k, x: (w - width * k) / 2, y: Math.max(4, (h0 - height * k) / 2) };
    this.apply();
  }

  zoomBy(f: number, cx?: number, cy?: number): void {
    const x = cx ?? (this.canvas.clientWidth || 800) / 2;
    const y = cy ?? (this.canvas.clientHeight || 520) / 2;
    const k = Math.max(0.03, Math.min(6, this.zoom.k * f));
    const r = k / this.zoom.k;
    this.zoom = { k, x: x - (x - this.zoom.x) * r, y: y - (y - this.zoom.y) * r };
    this.apply();
  }

  /** Whether rect `r`'s left edge is off the canvas horizontally. */
  offScreenX(r: Rect): boolean {
    const w = this.canvas.clientWidth || 800;
    const x = this.zoom.x + r.x * this.zoom.k;
    return x < 0 || x > w;
  }

  /** Pan so rect `r` is on screen (centred, when any part of it was off). */
  reveal(r: Rect): void {
    const w = this.canvas.clientWidth || 800;
    const hgt = this.canvas.clientHeight || 520;
    const { k } = this.zoom;
    const x = this.zoom.x + r.x * k;
    const y = this.zoom.y + r.y * k;
    if (x < 0 || x + r.w * k > w || y < 0 || y + r.h * k > hgt) {
      this.zoom = { k, x: w / 2 - (r.x + r.w / 2) * k, y: hgt / 2 - (r.y + r.h / 2) * k };
      this.apply();
    }
  }

  private apply(): void {
    const { k, x, y } = this.zoom;
    this.world.setAttribute("transform", `translate(${x.toFixed(1)},${y.toFixed(1)}) scale(${k.toFixed(4)})`);
  }

  private listen(): void {
    this.svgEl.addEventListener(
      "wheel",
      (e) => {
        if (!e.ctrlKey && !e.metaKey && !e.altKey) return; // plain wheel scrolls the notebook
        e.preventDefault();
        const box = this.svgEl.getBoundingClientRect();
        this.zoomBy(e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - box.left, e.clientY - box.top);
      },
      { passive: false },
    );
    this.svgEl.addEventListener("pointerdown", (e) => {
      if ((e.target as Element).closest(".nbi-graph-node, .nbi-graph-box-title")) return;
      const start = { x: e.clientX, y: e.clientY, zx: this.zoom.x, zy: this.zoom.y };
      const move = (m: PointerEvent) => {
        this.zoom = { ...this.zoom, x: start.zx + m.clientX - start.x, y: start.zy + m.clientY - start.y };
        this.apply();
      };
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    });
  }
}
