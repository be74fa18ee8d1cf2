// The payload nbinspect/render/payload.py builds, and the slice of the anywidget model
// the widget uses. Column arrays: entry i of every list describes row i.

export type Num = number | null;

/** A histogram: counts `c`, and edges `e` (all c.length + 1 of them, or [lo, hi] when uniform). */
export interface Hist {
  e: number[];
  c: number[];
}

export type Shape = number[] | number[][] | null;

export interface ModuleColumns {
  key: string[];
  parent: number[];
  type: string[];
  alias_of: (string | null)[];
  params: Num[];
  trainable: Num[];
  frozen: Num[];
  param_bytes: Num[];
  buffer_bytes: Num[];
  attrs: (Record<string, unknown> | null)[];
  output_shapes?: Shape[];
  flops?: Num[];
  activation_bytes?: Num[];
  stats?: (Num[] | null)[];
  hist?: (Hist | null)[];
  note?: (string | null)[];
}

export interface TensorColumns {
  module: number[];
  key: string[];
  kind: string[];
  shape: (number[] | null)[];
  dtype: (string | null)[];
  numel: Num[];
  bytes: Num[];
  requires_grad: (boolean | null)[];
  tied_to: (string | null)[];
  stats?: (Num[] | null)[];
  hist?: (Hist | null)[];
  note?: (string | null)[];
  compare?: ([string | null, Num] | null)[];
}

export interface Payload {
  version: number;
  model: { name: string; framework: string };
  totals: Record<string, Num>;
  stat_fields: string[];
  modules: ModuleColumns;
  tensors: TensorColumns;
}

/** What the widget reads and writes on the anywidget model (mirrors InspectWidget's traits). */
export interface WidgetModel {
  get(key: "payload"): Payload;
  /** A dotted path ('' is the root module), or null when nothing is selected. */
  get(key: "selected"): string | null;
  set(key: "selected", value: string | null): void;
  save_changes(): void;
  on(event: string, callback: () => void): void;
  off(event: string, callback: () => void): void;
}

/** Fetches a row's full-resolution histogram from the kernel; absent on a static page. */
export type HistFetcher = (name: string, kind: "tensor" | "module") => Promise<Hist | null>;
