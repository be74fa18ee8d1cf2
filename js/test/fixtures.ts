// Hand-written payloads in the shape nbinspect/render/payload.py produces.

import type { Payload } from "../src/types";

interface Mod {
  key: string;
  parent: number;
  type: string;
  params: number;
}

/** A model with a stem, a ModuleList of 4 identical blocks (+1 odd one) and a head. */
export function payload(): Payload {
  const mods: Mod[] = [
    { key: "", parent: -1, type: "Net", params: 0 },
    { key: "stem", parent: 0, type: "Linear", params: 40 },
    { key: "blocks", parent: 0, type: "ModuleList", params: 0 },
  ];
  const tensors: { module: number; key: string; shape: number[] }[] = [{ module: 1, key: "weight", shape: [8, 5] }];
  for (let i = 0; i < 5; i++) {
    const width = i < 4 ? 8 : 4;
    const block = mods.push({ key: String(i), parent: 2, type: "Block", params: width * 8 }) - 1;
    const fc = mods.push({ key: "fc", parent: block, type: "Linear", params: width * 8 }) - 1;
    tensors.push({ module: fc, key: "weight", shape: [width, 8] });
  }
  mods.push({ key: "head", parent: 0, type: "Linear", params: 3 });
  tensors.push({ module: mods.length - 1, key: "weight", shape: [3] });
  mods[2].params = mods.filter((m) => m.type === "Block").reduce((a, m) => a + m.params, 0);
  mods[0].params = mods[1].params + mods[2].params + 3;
  const n = mods.length;
  const t = tensors.length;
  return {
    version: 1,
    model: { name: "Net", framework: "torch" },
    totals: { total_params: mods[0].params, total_params_by_path: mods[0].params, trainable_params: mods[0].params, non_trainable_params: 0, param_bytes: mods[0].params * 4, buffer_bytes: 0, num_modules: n },
    stat_fields: ["numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf"],
    modules: {
      key: mods.map((m) => m.key),
      parent: mods.map((m) => m.parent),
      type: mods.map((m) => m.type),
      alias_of: mods.map(() => null),
      params: mods.map((m) => m.params),
      trainable: mods.map((m) => m.params),
      frozen: mods.map(() => 0),
      param_bytes: mods.map((m) => m.params * 4),
      buffer_bytes: mods.map(() => 0),
      attrs: mods.map((m) => (m.type === "Linear" ? { in_features: 8, out_features: 8, bias: false } : null)),
    },
    tensors: {
      module: tensors.map((x) => x.module),
      key: tensors.map((x) => x.key),
      kind: tensors.map(() => "parameter"),
      shape: tensors.map((x) => x.shape),
      dtype: tensors.map(() => "float32"),
      numel: tensors.map((x) => x.shape.reduce((a, b) => a * b, 1)),
      bytes: tensors.map((x) => 4 * x.shape.reduce((a, b) => a * b, 1)),
      requires_grad: tensors.map(() => true),
      tied_to: tensors.map(() => null),
      stats: tensors.map((_, i) => [10, i / 10, 1, -2 - i, 2 + i, 0.8, 3, 0, 0, 0]),
      hist: tensors.map((_, i) => ({ e: [-2 - i, 2 + i], c: [1, 3, 9, 3, i] })),
      compare: Array.from({ length: t }, (_, i) => (i === 0 ? ["changed", 0.5] : ["same", 0])),
    },
  };
}
