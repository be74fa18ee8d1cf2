// Generated from nbinspect/payload_schema.py by `make contract` (tests/generate_contract.py): do not edit.

export const PAYLOAD_VERSION = 1;

export type Num = number | null;

/** Shapes: one shape, a list of shapes (one per output), or null. */
export type Shape = number[] | number[][] | null;

/** A histogram: counts `c`, and edges `e` (all c.length + 1 of them, or [lo, hi] when uniform). */
export interface Hist {
  e: number[];
  c: number[];
}

/** One entry per module, in pre-order. */
export interface ModuleColumns {
  /** last segment of the dotted path ('' for the root). */
  key: string[];
  /** row of the parent module, -1 for the root. */
  parent: number[];
  /** class name. */
  type: string[];
  /** first path of the same module object if registered twice. */
  alias_of: (string | null)[];
  /** parameters in the subtree, shared storage once. */
  params: Num[];
  /** subtree parameters with requires_grad. */
  trainable: Num[];
  /** subtree parameters without requires_grad. */
  frozen: Num[];
  /** bytes of subtree parameters, shared storage once. */
  param_bytes: Num[];
  /** bytes of subtree buffers, shared storage once. */
  buffer_bytes: Num[];
  /** layer hyperparameters; null when there are none. */
  attrs: (Record<string, unknown> | null)[];
  /** shapes the module returned (first call). Present with trace. */
  output_shapes?: Shape[];
  /** FLOPs of all calls, subtree. Present with trace. */
  flops?: Num[];
  /** bytes autograd saved for backward, subtree. Present with trace. */
  activation_bytes?: Num[];
  /** the stat_fields of the subtree's values, in that order. Present with stats. */
  stats?: (Num[] | null)[];
  /** coarse histogram of the subtree's values. Present with stats. */
  hist?: (Hist | null)[];
  /** why statistics are missing or partial. Present with note. */
  note?: (string | null)[];
}

/** One entry per parameter and buffer path. */
export interface TensorColumns {
  /** row of the module holding the tensor. */
  module: number[];
  /** last segment of the dotted path. */
  key: string[];
  /** 'parameter' or 'buffer'. */
  kind: string[];
  /** shape; null for an uninitialized (lazy) parameter. */
  shape: (number[] | null)[];
  /** element type, e.g. 'float32'. */
  dtype: (string | null)[];
  /** number of elements. */
  numel: Num[];
  /** numel times element size. */
  bytes: Num[];
  /** whether the optimizer would train it. */
  requires_grad: (boolean | null)[];
  /** first path holding the same storage; null if not shared. */
  tied_to: (string | null)[];
  /** the stat_fields of the tensor's values, in that order. Present with stats. */
  stats?: (Num[] | null)[];
  /** coarse histogram of the values. Present with stats. */
  hist?: (Hist | null)[];
  /** why statistics are missing or partial. Present with note. */
  note?: (string | null)[];
  /** [status, relative change] against the other side. Present with compare. */
  compare?: ([string | null, Num] | null)[];
}

/** Whole-model totals. */
export interface Totals {
  /** unique parameter elements (shared storage once). */
  total_params: Num;
  /** every path counted, as naive counters do. */
  total_params_by_path: Num;
  /** parameters with requires_grad. */
  trainable_params: Num;
  /** parameters without requires_grad. */
  non_trainable_params: Num;
  /** bytes of parameters, shared storage once. */
  param_bytes: Num;
  /** bytes of buffers, shared storage once. */
  buffer_bytes: Num;
  /** distinct module objects, root included. */
  num_modules: Num;
  [key: string]: unknown;
}

/** One metric over training steps: a number or null per step. */
export interface TimelineSeries {
  key: string;
  values: Num[];
}

/** Metrics over training steps (nbinspect.track), drawn above the tree. */
export interface Timeline {
  title: string;
  steps: number[];
  series: TimelineSeries[];
}

export interface Payload {
  version: number;
  model: { name: string; framework: string };
  totals: Totals;
  /** The statistics in each `stats` entry, in order. */
  stat_fields: string[];
  modules: ModuleColumns;
  tensors: TensorColumns;
  /** Present for nbinspect.track's live widget. */
  timeline?: Timeline;
}
