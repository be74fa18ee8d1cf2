// Payloads nbinspect's build_payload made (tests/generate_contract.py writes them; a pytest
// test fails while they are stale), so these tests run on what Python really sends.

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Payload } from "../src/payload";

const DIR = join(import.meta.dirname, "fixtures");

/** The names of every fixture: the example models, "compare_tiny_lm" and "folds". */
export const FIXTURES = readdirSync(DIR)
  .filter((f) => f.endsWith(".json"))
  .map((f) => f.slice(0, -".json".length));

/** A fresh copy of a fixture (tests may change it). */
export function fixture(name: string): Payload {
  return JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf-8")) as Payload;
}

/** A model with a stem, a ModuleList of 4 identical blocks (+1 odd one) and a head; tensor
 * stats (no module roll-up) and a comparison in which only stem.weight changed (by 0.5). */
export const payload = (): Payload => fixture("folds");
