// Generated from nbinspect/payload_schema.py by `make contract` (tests/generate_contract.py): do not edit.

export const PAYLOAD_VERSION = 2;

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
  /** shapes the module received (first call). Present with trace. */
  input_shapes?: Shape[];
  /** shapes the module returned (first call). Present with trace. */
  output_shapes?: Shape[];
  /** FLOPs of all calls, subtree. Present with trace. */
  flops?: Num[];
  /** bytes autograd saved for backward, subtree. Present with trace. */
  activation_bytes?: Num[];
  /** the stat_fields of the subtree's values, in that order. Present with stats. */
  stats?: (Num[] | null)[];
  /** coarse histogram of the subtree's weight matrices (parameters with 2+ dims, tied once), or of all its values when it has none: norm scales at 1.0 and zero biases would otherwise swamp it. Present with stats. */
  hist?: (Hist | null)[];
  /** what `hist` counts: 'weight matrices' or 'all values'. Present with stats. */
  hist_scope?: (string | null)[];
  /** weight problems in the subtree (schema.HEALTH), comma-separated. Present with stats. */
  problems?: (string | null)[];
  /** distinct tensors below with a problem. Present with stats. */
  problem_tensors?: Num[];
  /** why statistics are missing or partial. Present with note. */
  note?: (string | null)[];
  /** cosine similarity of a and b over the subtree. Present with compare. */
  cosine?: Num[];
  /** largest |b - a| in the subtree. Present with compare. */
  max_abs_delta?: Num[];
  /** mean(b) - mean(a) over the subtree. Present with compare. */
  mean_drift?: Num[];
  /** tensors below whose status is not 'same'. Present with compare. */
  differ?: Num[];
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
  /** weight problems (schema.HEALTH), comma-separated; '' when healthy. Present with stats. */
  problems?: (string | null)[];
  /** why statistics are missing or partial. Present with note. */
  note?: (string | null)[];
  /** [status, relative change] against the other side. Present with compare. */
  compare?: ([string | null, Num] | null)[];
  /** cosine similarity of a and b. Present with compare. */
  cosine?: Num[];
  /** largest |b - a|. Present with compare. */
  max_abs_delta?: Num[];
  /** mean(b) - mean(a). Present with compare. */
  mean_drift?: Num[];
  /** coarse histogram of the values in a. Present with compare. */
  hist_a?: (Hist | null)[];
  /** coarse histogram of the values in b (over the same range as hist_a). Present with compare. */
  hist_b?: (Hist | null)[];
}

/** One entry per fold of repeated blocks. */
export interface FoldColumns {
  /** the fold row's path: its parent's path and the members' range, e.g. 'blocks.0–11'. */
  path: string[];
  /** the members' range and count, e.g. '0–11 ×12', as the text tree prints it. */
  label: string[];
  /** the members' rows in `modules`, first to last: consecutive siblings. */
  rows: number[][];
  /** the stat_fields of all the members' parameters pooled (shared storage once). Present with stats. */
  stats?: (Num[] | null)[];
  /** coarse histogram of the members' weight matrices taken together (or of all their values when they have none), as each member's own `hist`. Present with stats. */
  hist?: (Hist | null)[];
  /** what `hist` counts: 'weight matrices' or 'all values'. Present with stats. */
  hist_scope?: (string | null)[];
  /** weight problems in the members (schema.HEALTH), comma-separated. Present with stats. */
  problems?: (string | null)[];
  /** distinct tensors in the members with a problem. Present with stats. */
  problem_tensors?: Num[];
}

/** A comparison's summary, one entry per component. */
export interface ComponentColumns {
  /** part of the network (attn.q, mlp.up, norm, ...). */
  component: string[];
  /** tensor names in the component. */
  tensors: Num[];
  /** tensors whose status is not 'same'. */
  differ: Num[];
  /** ‖Δ‖ / ‖a‖ over the component's compared elements. */
  rel_change: Num[];
  /** cosine similarity of a and b over the component. */
  cosine: Num[];
  /** largest |b - a|. */
  max_abs_delta: Num[];
  /** mean(b) - mean(a). */
  mean_drift: Num[];
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
  /** Repeated blocks shown as one row each (decided and pooled in Python). */
  folds: FoldColumns;
  /** Present for a comparison: the two sides' names and the per-component summary. */
  comparison?: { a: string; b: string; components: ComponentColumns };
  /** Present for nbinspect.track's live widget. */
  timeline?: Timeline;
}
