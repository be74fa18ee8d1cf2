// What a heatmap asks the kernel, and which part of the tensor it asks for. The `_region`
// request and its answer (analyze/value_view.py), the plane arithmetic (as core/plane.py),
// the viewport (plane, rows, columns, statistic, colour limit: zoom and pan change it) and
// its requests: debounced, the latest one wins, the answer's buffers decoded into per-block
// arrays. No DOM: heatmap.ts wires it to the widget, heatmapPaint.ts draws the answer.

/** A `_region` request (analyze/value_view.py validates it). */
export interface RegionRequest {
  seq: number;
  tensor: string;
  side: string | null;
  plane: Plane | null;
  rows: [number, number] | null;
  cols: [number, number] | null;
  height: number;
  width: number;
  stat: "mean" | "absmax";
  limit: number | null;
  label?: string;
}

export interface Plane {
  rows: number[];
  cols: number[];
  fixed: [number, number][];
}

export interface RegionHeader {
  seq: number;
  state: "ok" | "meta" | "unavailable" | "error";
  message: string;
  tensor: string;
  shape: number[];
  dtype?: string;
  plane?: Plane;
  rows?: [number, number];
  cols?: [number, number];
  block?: [number, number];
  grid?: [number, number];
  exact?: boolean;
  stat?: string;
  limits?: [number, number];
  counts?: { nan: number; posinf: number; neginf: number; zero_blocks: number; outlier_blocks: number };
  bad?: [number, number, number, number, number][];
  palette: string[];
  special: Record<"nan" | "posinf" | "neginf" | "zero" | "empty", number>;
  flags: Record<"nan" | "posinf" | "neginf" | "outlier" | "zero" | "partial", number>;
  seconds?: number;
}

/** Sends a request to the kernel; resolves to the header and its buffers. */
export type RegionFetcher = (req: RegionRequest) => Promise<[RegionHeader, DataView[]]>;

export interface LocateRow {
  what: string;
  index: number[];
  value: number | null;
  total: number;
}
/** Asks the kernel where the bad values of one tensor are. */
export type LocateFetcher = (tensor: string, side: string | null) => Promise<LocateRow[]>;

/** The default plane: rows = the first axis (experts × outputs for 3-D), columns the rest. */
export function defaultPlane(shape: number[]): Plane {
  const n = shape.length;
  if (n <= 1) return { rows: [], cols: n ? [0] : [], fixed: [] };
  const rows = n === 3 ? [0, 1] : [0];
  return { rows, cols: shape.map((_, i) => i).slice(rows.length), fixed: [] };
}

/** Picture rows and columns of a plane (as core/plane.py). */
export function planeSize(shape: number[], plane: Plane): [number, number] {
  const prod = (axes: number[]) => axes.reduce((p, a) => p * shape[a], 1);
  return [prod(plane.rows), prod(plane.cols)];
}

/** The tensor index of picture cell (row, col) (as core/plane.py's Plane.index). */
export function cellIndex(shape: number[], plane: Plane, row: number, col: number): number[] {
  const out = shape.map(() => 0);
  for (const [axis, i] of plane.fixed) out[axis] = i;
  for (const [axes, start] of [
    [plane.rows, row],
    [plane.cols, col],
  ] as const) {
    let flat = start;
    for (let k = axes.length - 1; k >= 0; k--) {
      out[axes[k]] = flat % shape[axes[k]];
      flat = Math.floor(flat / shape[axes[k]]);
    }
  }
  return out;
}

/** The picture cell (row, col) of a tensor index on `plane` (inverse of cellIndex). */
export function cellOf(shape: number[], plane: Plane, index: number[]): [number, number] {
  const flat = (axes: number[]) => axes.reduce((f, a) => f * shape[a] + index[a], 0);
  return [flat(plane.rows), flat(plane.cols)];
}

/** An answer decoded: its header and the per-block arrays its buffers hold. */
export interface Region {
  header: RegionHeader;
  /** Palette index per grid cell, row-major. */
  index: Uint8Array;
  flags: Uint8Array;
  values: Float64Array;
  absmax: Float32Array;
  /** NaN, +Inf, −Inf counts of the blocks holding any, by grid cell (i * width + j). */
  bad: Map<number, [number, number, number]>;
}

/** The per-block arrays of an "ok" answer (the float ones copied: aligned, owned). */
export function decodeRegion(header: RegionHeader, buffers: DataView[]): Region {
  const bytes = (i: number) => buffers[i];
  return {
    header,
    index: new Uint8Array(bytes(0).buffer, bytes(0).byteOffset, bytes(0).byteLength),
    flags: new Uint8Array(bytes(1).buffer, bytes(1).byteOffset, bytes(1).byteLength),
    values: new Float64Array(bytes(2).buffer.slice(bytes(2).byteOffset, bytes(2).byteOffset + bytes(2).byteLength)),
    absmax: new Float32Array(bytes(3).buffer.slice(bytes(3).byteOffset, bytes(3).byteOffset + bytes(3).byteLength)),
    bad: new Map((header.bad ?? []).map(([i, j, a, b, c]) => [i * (header.grid?.[1] ?? 1) + j, [a, b, c]])),
  };
}

/** The part of a tensor a heatmap shows: the plane, the rows and columns of it in view, the
 * statistic per block and the colour limit. */
export class Viewport {
  plane: Plane;
  rows: [number, number];
  cols: [number, number];
  stat: "mean" | "absmax" = "mean";
  /** The colour limit; kept while zooming only when `keepScale` (else each view fits its own). */
  limit: number | null = null;
  keepScale = false;

  constructor(readonly shape: number[]) {
    this.plane = defaultPlane(shape);
    const [nr, nc] = planeSize(shape, this.plane);
    this.rows = [0, nr];
    this.cols = [0, nc];
  }

  /** The whole plane, its colours fitted again. */
  reset(): void {
    const [nr, nc] = planeSize(this.shape, this.plane);
    this.rows = [0, nr];
    this.cols = [0, nc];
    this.limit = null;
  }

  /** Zoom by `factor` (< 1 in) around the fraction (fx, fy) of the view. */
  zoomAt(fx: number, fy: number, factor: number): void {
    const [nr, nc] = planeSize(this.shape, this.plane);
    const span = (lo: number, hi: number, f: number, n: number): [number, number] => {
      const at = lo + f * (hi - lo);
      const size = Math.max(1, Math.min(n, Math.round((hi - lo) * factor)));
      let a = Math.round(at - f * size);
      a = Math.max(0, Math.min(n - size, a));
      return [a, a + size];
    };
    this.rows = span(this.rows[0], this.rows[1], fy, nr);
    this.cols = span(this.cols[0], this.cols[1], fx, nc);
  }

  /** Pan from the view `from` by (dx, dy) CSS pixels of a picture `width` × `height` px;
   * whether the view moved. */
  panBy(
    from: { rows: [number, number]; cols: [number, number] },
    dx: number,
    dy: number,
    width: number,
    height: number,
  ): boolean {
    const [nr, nc] = planeSize(this.shape, this.plane);
    const shift = (span: [number, number], px: number, size: number, n: number): [number, number] => {
      const len = span[1] - span[0];
      const a = Math.max(0, Math.min(n - len, Math.round(span[0] - (px / size) * len)));
      return [a, a + len];
    };
    const rows = shift(from.rows, dy, height, nr);
    const cols = shift(from.cols, dx, width, nc);
    if (rows[0] === this.rows[0] && cols[0] === this.cols[0]) return false;
    this.rows = rows;
    this.cols = cols;
    return true;
  }

  /** Single values around tensor `index` at about 12 CSS px each, in a picture `width` ×
   * `height` px; returns the index's cell in the new view. */
  centreOn(index: number[], width: number, height: number): [number, number] {
    const [nr, nc] = planeSize(this.shape, this.plane);
    const [r, c] = cellOf(this.shape, this.plane, index);
    const sh = Math.min(nr, Math.max(1, Math.floor(height / 12)));
    const sw = Math.min(nc, Math.max(1, Math.floor(width / 12)));
    const r0 = Math.max(0, Math.min(nr - sh, r - Math.floor(sh / 2)));
    const c0 = Math.max(0, Math.min(nc - sw, c - Math.floor(sw / 2)));
    this.rows = [r0, r0 + sh];
    this.cols = [c0, c0 + sw];
    return [r - r0, c - c0];
  }

  isWhole(): boolean {
    const [nr, nc] = planeSize(this.shape, this.plane);
    return this.rows[0] === 0 && this.cols[0] === 0 && this.rows[1] === nr && this.cols[1] === nc;
  }

  onDefaultPlane(): boolean {
    return JSON.stringify(this.plane) === JSON.stringify(defaultPlane(this.shape));
  }

  /** The request for this view at `height` × `width` device pixels. */
  request(
    seq: number,
    tensor: string,
    side: string | null,
    caption: string | undefined,
    [height, width]: [number, number],
  ): RegionRequest {
    return {
      seq,
      tensor,
      side,
      plane: this.plane,
      rows: this.rows,
      cols: this.cols,
      height,
      width,
      stat: this.stat,
      limit: this.keepScale ? this.limit : null,
      label: caption ? `${tensor} (${caption})` : tensor,
    };
  }

  /** Take an answer's colour limits (kept with `keepScale`); the limit to share with a heatmap
   * beside this one when the view is the whole plane, else null. */
  takeLimits(header: RegionHeader): number | null {
    if (!header.limits) return null;
    const lim = Math.max(Math.abs(header.limits[0]), Math.abs(header.limits[1]));
    if (!this.keepScale || this.limit === null) this.limit = lim;
    return this.isWhole() ? lim : null;
  }
}

/** Requests to the kernel, debounced (zoom and pan come in bursts) and latest-wins: an answer
 * to an older request, or one after `destroy`, is dropped. */
export class RegionRequests {
  private seq = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private destroyed = false;

  constructor(
    private readonly fetch: RegionFetcher,
    /** The request to send now, numbered `seq`. */
    private readonly build: (seq: number) => RegionRequest,
    private readonly on: {
      answer(header: RegionHeader, buffers: DataView[], roundTrip: number): void;
      failed(message: string): void;
    },
  ) {}

  /** Ask for the current view after `delay` ms (a newer call replaces a waiting one). */
  schedule(delay: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.send(), delay);
  }

  destroy(): void {
    this.destroyed = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private async send(): Promise<void> {
    const seq = ++this.seq;
    const started = performance.now();
    const req = this.build(seq);
    let header: RegionHeader;
    let buffers: DataView[];
    try {
      [header, buffers] = await this.fetch(req);
    } catch (e) {
      if (seq === this.seq && !this.destroyed) this.on.failed(`The values could not be fetched: ${String(e)}`);
      return;
    }
    if (seq !== this.seq || this.destroyed) return; // a newer request is on its way
    this.on.answer(header, buffers, performance.now() - started);
  }
}
