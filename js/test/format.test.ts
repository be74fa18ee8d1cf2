// The number formatting rule, on the cases nbinspect/render/format.py is tested on too.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  columnFormat,
  formatBytes,
  formatCompact,
  formatCount,
  formatParams,
  formatPercent,
  formatShape,
} from "../src/format";
import type { Num, Shape } from "../src/payload";

const CASES = JSON.parse(readFileSync(join(import.meta.dirname, "../../tests/format_cases.json"), "utf-8"));
const RULES: Record<string, (v: never) => string> = {
  count: (v: Num) => formatCount(v),
  bytes: (v: Num) => formatBytes(v),
  compact: (v: Num) => formatCompact(v),
  params: (v: Num) => formatParams(v),
  shape: (v: Shape) => formatShape(v),
};

describe("the shared formatting cases", () => {
  for (const [rule, format] of Object.entries(RULES)) {
    it.each(CASES[rule] as [never, string][])(`${rule}(%j) is %j`, (value, text) => {
      expect(format(value)).toBe(text);
    });
  }

  it.each(CASES.percent as [[Num, Num], string][])("percent(%j) is %j", ([part, whole], text) => {
    expect(formatPercent(part, whole)).toBe(text);
  });

  it("covers every rule in the file", () => {
    expect(
      Object.keys(CASES)
        .filter((k) => k !== "about")
        .sort(),
    ).toEqual([...Object.keys(RULES), "percent"].sort());
  });
});

describe("one number format per column", () => {
  it("tells 1004 from 1000 (three significant digits would not)", () => {
    const f = columnFormat([1004, 1000, 12.5]);
    expect(f(1004)).not.toBe(f(1000));
    expect(Number(f(1004))).toBe(1004);
  });

  it("puts values three decades or more apart all in exponent form", () => {
    const f = columnFormat([0.003226, 3.06e-4]);
    expect([f(0.003226), f(3.06e-4)]).toEqual(["3.226e-3", "3.060e-4"]);
  });

  it("gives every value of a plain column the same decimals", () => {
    const f = columnFormat([0.25, 1.5, 0.0312]);
    const shown = [0.25, 1.5, 0.0312].map(f);
    expect(new Set(shown.map((t) => t.split(".")[1].length)).size).toBe(1);
    expect(shown.map(Number)).toEqual([0.25, 1.5, 0.0312]);
  });

  it("adds one digit where distinct values would read the same, and no more", () => {
    // four significant digits at 0.98 are four decimals: 0.99996 and 1 both read 1.0000
    const f = columnFormat([0.99996, 1, 0.98]);
    expect([f(0.99996), f(1), f(0.98)]).toEqual(["0.99996", "1.00000", "0.98000"]);
    const g = columnFormat([1.0000001, 1, 0.98]); // apart only at the seventh: not chased
    expect(g(1)).toBe("1.00000");
  });

  it("leaves missing values blank and zeros as 0", () => {
    const f = columnFormat([null, 0, 2.5]);
    expect(f(null)).toBe("");
    expect(f(0)).toBe("0");
  });
});
