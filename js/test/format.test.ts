// The number formatting rule, on the cases nbinspect/render/format.py is tested on too.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatBytes, formatCompact, formatCount, formatPercent, formatShape } from "../src/format";
import type { Num, Shape } from "../src/payload";

const CASES = JSON.parse(readFileSync(join(import.meta.dirname, "../../tests/format_cases.json"), "utf-8"));
const RULES: Record<string, (v: never) => string> = {
  count: (v: Num) => formatCount(v),
  bytes: (v: Num) => formatBytes(v),
  compact: (v: Num) => formatCompact(v),
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
