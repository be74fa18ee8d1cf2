// Human units: the rule of nbinspect/render/format.py (read its docstring), line for line.
// Both are tested against tests/format_cases.json. Rounding is half up, written out, so the
// digits match Python's.

import type { Num, Shape } from "./payload";

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
const SI_PREFIXES = ["", "K", "M", "G", "T", "P"];
/** Counts of things (parameters) in the words people say: thousand, million, billion, trillion. */
const COUNT_UNITS = ["", "K", "M", "B", "T"];

const roundHalfUp = (v: number): number => Math.floor(v + 0.5);

/** `n` in the largest unit of `units` (each `base` times the last) that keeps it at least 1. */
function scaled(n: Num, base: number, units: string[]): string {
  if (n === null || Number.isNaN(n)) return "";
  let v = Math.abs(n);
  const sign = n < 0 ? "-" : "";
  const whole = roundHalfUp(v);
  if (whole < base) return `${whole ? sign : ""}${whole}${units[0] ? ` ${units[0]}` : ""}`;
  let unit = 0;
  while (v >= base && unit < units.length - 1) {
    v /= base;
    unit++;
  }
  let tenths = roundHalfUp(v * 10);
  if (tenths >= base * 10 && unit < units.length - 1) {
    v /= base;
    unit++;
    tenths = roundHalfUp(v * 10);
  }
  return `${sign}${Math.floor(tenths / 10)}.${tenths % 10} ${units[unit]}`;
}

/** 12345678 -> "12,345,678". */
export function formatCount(n: Num): string {
  if (n === null || Number.isNaN(n)) return "";
  const whole = roundHalfUp(Math.abs(n));
  const digits = String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return `${n < 0 && whole ? "-" : ""}${digits}`;
}

/** Bytes in powers of 1024: 512 -> "512 B", 1536 -> "1.5 KiB". */
export const formatBytes = (n: Num): string => scaled(n, 1024, BYTE_UNITS);

/** A count or FLOPs in powers of 1000: 118528 -> "118.5 K", 999 -> "999". */
export const formatCompact = (n: Num): string => scaled(n, 1000, SI_PREFIXES);

/** A parameter count in thousands, millions, billions: 6738415616 -> "6.7 B". */
export const formatParams = (n: Num): string => scaled(n, 1000, COUNT_UNITS);

/** `part` as a share of `whole`: "84.3%", "<0.1%"; "" when either is missing or zero. */
export function formatPercent(part: Num, whole: Num): string {
  if (!part || !whole) return "";
  const tenths = roundHalfUp((1000 * part) / whole);
  return tenths === 0 ? "<0.1%" : `${Math.floor(tenths / 10)}.${tenths % 10}%`;
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

export function trainableStatus(trainable: Num, frozen: Num): "trainable" | "frozen" | "partial" | "" {
  if (trainable && frozen) return "partial";
  if (trainable) return "trainable";
  return frozen ? "frozen" : "";
}

/** One number format for a whole column of `values` (nulls and non-finite ones ignored):
 * plain decimals when the values span at most three decades within [1e-3, 1e5), else
 * exponent form; either way with 4 significant digits at the smallest value, and one more
 * where that still tells distinct values apart (more would be noise to read). Exact zeros
 * print as "0". */
export function columnFormat(values: Iterable<Num>): (v: Num) => string {
  const distinct = new Set<number>();
  for (const v of values) if (v !== null && Number.isFinite(v) && v !== 0) distinct.add(v);
  if (!distinct.size) return (v) => (v === null ? "" : v === 0 ? "0" : formatStat(v));
  const sorted = [...distinct].sort((a, b) => a - b);
  const sizes = sorted.map(Math.abs);
  const lo = Math.min(...sizes);
  const hi = Math.max(...sizes);
  const plain = lo >= 1e-3 && hi < 1e5 && hi / lo <= 1e3;
  const at = (digits: number) =>
    plain ? (v: number) => v.toFixed(digits) : (v: number) => v.toExponential(digits).replace(/e\+?/, "e");
  const first = plain ? Math.max(0, 3 - Math.floor(Math.log10(lo))) : 3;
  let digits = first;
  const last = first + 1;
  // whether two neighbours would print alike at `d` digits, by arithmetic (formatting every
  // value of a 10,000-row column twice would cost more than the first render)
  const rounded = (d: number) =>
    plain
      ? (v: number) => Math.round(v * 10 ** d)
      : (v: number) => {
          const e = Math.floor(Math.log10(Math.abs(v)));
          return `${e}:${Math.round(v / 10 ** (e - d))}`;
        };
  const collide = (d: number) => {
    const key = rounded(d);
    let before = key(sorted[0]);
    for (let i = 1; i < sorted.length; i++) {
      const now = key(sorted[i]);
      if (now === before) return true;
      before = now;
    }
    return false;
  };
  if (digits < last && collide(digits)) digits++;
  const show = at(digits);
  return (v) => (v === null || Number.isNaN(v) ? "" : v === 0 ? "0" : Number.isFinite(v) ? show(v) : String(v));
}
