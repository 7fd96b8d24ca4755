/**
 * The nesting scan run before any parse (`nestedDeeperThan` in `src/server/parse.ts`, issue 29 item 5):
 * brackets inside strings do not count, escapes are honoured, and the bound is exact.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_NESTING, nestedDeeperThan } from "../../../src/server/parse.js";

const deep = (n: number, open = "[", close = "]") => `${open.repeat(n)}${close.repeat(n)}`;
const objects = (n: number) => `${'{"a":'.repeat(n - 1)}{}${"}".repeat(n - 1)}`;

const CASES: Array<{ name: string; text: string; max?: number; over: boolean }> = [
  { name: "exactly 1,000 arrays", text: deep(1000), over: false },
  { name: "1,001 arrays", text: deep(1001), over: true },
  { name: "exactly 1,000 objects", text: objects(1000), over: false },
  { name: "1,001 objects", text: objects(1001), over: true },
  { name: "mixed arrays and objects, 1,001", text: `${'[{"k":'.repeat(500)}[]${"}]".repeat(500)}`, over: true },
  { name: "siblings do not add up", text: `[${Array(2000).fill(deep(999)).join(",")}]`, over: false },
  { name: "brackets inside a string do not count", text: `["${"[{".repeat(5000)}"]`, over: false },
  { name: "an escaped quote does not end the string", text: `["\\"${"[".repeat(2000)}"]`, over: false },
  { name: "an escaped backslash does end it", text: `["\\\\",${deep(1000)}]`, over: true },
  { name: "escaped backslash then quote, brackets in a key", text: `{"\\\\\\"[[[": ${deep(999)}}`, over: false },
  { name: "non-ASCII in strings", text: `["é[ü{", ${deep(999)}]`, over: false },
  { name: "the limit is the caller's", text: deep(3), max: 2, over: true },
  { name: "unbalanced closers are left to JSON.parse", text: `]]]]${deep(1000)}`, over: false },
];

describe("nestedDeeperThan (issue 29, item 5)", () => {
  it("the bound is 1,000", () => assert.equal(MAX_NESTING, 1000));
  for (const c of CASES) {
    it(c.name, () => {
      assert.equal(nestedDeeperThan(Buffer.from(c.text), c.max ?? MAX_NESTING), c.over);
      // The scan's "within" agrees with the parser: every text within the bound here that is JSON parses.
      if (!c.over && !c.name.startsWith("unbalanced")) JSON.parse(c.text);
    });
  }
  it("a 7 MB body of 3.5M arrays stops at the first level past the bound", () => {
    // Counted, not timed: every byte the scan reads goes through the proxy.
    const bytes = Buffer.from(deep(3_500_000));
    let reads = 0;
    const counted = new Proxy(bytes, {
      get(target, prop) {
        if (typeof prop === "string" && /^\d+$/.test(prop)) reads++;
        return Reflect.get(target, prop) as unknown;
      },
    });
    assert.equal(nestedDeeperThan(counted, MAX_NESTING), true);
    assert.equal(reads, MAX_NESTING + 1, "read up to the first level past the bound, and not one byte more");
  });
});
