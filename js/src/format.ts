// Human units, matching nbinspect/render/format.py (1 KB = 1024 B).

import type { Num, Shape } from "./types";

const BYTE_UNITS = ["B", "KB", "MB", "GB", "TB"];

export function formatCount(n: Num): string {
  return n === null ? "" : Math.round(n).toLocaleString("en-US");
}

/** 12_345_678 -> "12.3M": for headers and tight cells. */
export function formatCompact(n: Num): string {
  if (n === null) return "";
  const units = ["", "K", "M", "G", "T", "P"];
  let v = n;
  let u = 0;
  while (Math.abs(v) >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return u === 0 ? String(Math.round(v)) : `${Number(v.toFixed(Math.abs(v) < 10 ? 2 : 1))}${units[u]}`;
}

export function formatBytes(n: Num): string {
  if (n === null) return "";
  let v = n;
  for (const unit of BYTE_UNITS) {
    if (Math.abs(v) < 1024 || unit === "TB") return unit === "B" ? `${Math.trunc(v)} B` : `${v.toFixed(1)} ${unit}`;
    v /= 1024;
  }
  return "";
}

export function formatShape(shape: Shape): string {
  if (!shape) return "";
  if (shape.length && Array.isArray(shape[0])) return (shape as number[][]).map((s) => formatShape(s)).join(" ");
  return `[${(shape as number[]).join(", ")}]`;
}

/** A statistic with `digits` significant digits; exponent form for very small or large values. */
export function formatStat(v: Num, digits = 4): string {
  if (v === null) return "";
  if (v === 0) return "0";
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e5 ? String(Number(v.toPrecision(digits))) : v.toExponential(digits - 2);
}

export function formatPercent(part: Num, whole: Num): string {
  if (!part || !whole) return "";
  const p = (100 * part) / whole;
  return p >= 10 ? `${p.toFixed(0)}%` : p >= 0.1 ? `${p.toFixed(1)}%` : "<0.1%";
}

export function trainableStatus(trainable: Num, frozen: Num): "trainable" | "frozen" | "partial" | "" {
  if (trainable && frozen) return "partial";
  if (trainable) return "trainable";
  return frozen ? "frozen" : "";
}
