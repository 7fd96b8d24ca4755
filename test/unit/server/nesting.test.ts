/**
 * The nesting scan run before any parse (`nestedDeeperThan` in `src/server/parse.ts`, issue 29 item 5):
 * brackets inside strings do not count, escapes are honoured, and the bound is exact.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { MAX_NESTING, nestedDeeperThan } from "../../../src/server/parse.js";

const deep = (n: number, open = "[", close = "]") => `${open.repeat(n)}${close.repeat(n)}`;
const objects = (n: number) => `${'{"a":'.repeat(n - 1)}{}${"}".repeat(n - 1)}`;

const CASES: Array<{ name: string; text: string; max?: number; over: boolean; malformed?: true }> = [
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
  { name: "unbalanced closers are left to JSON.parse", text: `]]]]${deep(1000)}`, over: false, malformed: true },
  { name: "a run of escaped quotes and backslashes", text: String.raw`["\\\"\\\"[[[\\\\", ` + `${deep(999)}]`, over: false },
  { name: "a string ending in an escaped backslash, then brackets", text: String.raw`["a\\\\",` + `${deep(999)}]`, over: false },
  { name: "an unterminated string is left to JSON.parse", text: `["${"[".repeat(2000)}`, over: false, malformed: true },
  { name: "an empty string before the bound", text: `["",${deep(1000)}]`, over: true },
];

/** How deep a parsed JSON value nests arrays and objects (a scalar: 0). */
function depthOf(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  let inner = 0;
  for (const x of Object.values(v)) inner = Math.max(inner, depthOf(x));
  return inner + 1;
}

/** Strings made to trip a scan: quotes, backslashes, brackets, escapes of every kind, non-ASCII. */
const trickyString = fc.string({ unit: fc.constantFrom('"', "\\", "[", "]", "{", "}", "a", "é", "\n", "\u2028", '\\"') });
const { tree } = fc.letrec<{ tree: unknown }>((tie) => ({
  tree: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    trickyString,
    fc.integer(),
    fc.constant(null),
    fc.array(tie("tree"), { maxLength: 4 }),
    fc.dictionary(trickyString, tie("tree"), { maxKeys: 4 }),
  ),
}));

describe("nestedDeeperThan (issue 29, item 5)", () => {
  it("the bound is 1,000", () => assert.equal(MAX_NESTING, 1000));
  for (const c of CASES) {
    it(c.name, () => {
      assert.equal(nestedDeeperThan(Buffer.from(c.text), c.max ?? MAX_NESTING), c.over);
      // The scan's "within" agrees with the parser: every text within the bound here that is JSON parses.
      if (!c.over && !c.malformed) JSON.parse(c.text);
    });
  }
  it("agrees with JSON.parse's depth on generated documents whose strings hold quotes, escapes and brackets", () => {
    fc.assert(
      fc.property(tree, fc.nat({ max: 6 }), (value, slack) => {
        const text = JSON.stringify(value);
        const depth = depthOf(JSON.parse(text));
        const bytes = Buffer.from(text);
        // At the exact depth, one less, and with room: the scan says "deeper" exactly when it is, on the main
        // thread's Buffer and on the worker's Uint8Array of a transferred ArrayBuffer alike.
        for (const max of [depth, Math.max(0, depth - 1), depth + slack]) {
          assert.equal(nestedDeeperThan(bytes, max), depth > max, `max ${max}: ${text}`);
          assert.equal(nestedDeeperThan(new Uint8Array(bytes), max), depth > max, `max ${max}, a Uint8Array: ${text}`);
        }
      }),
      { numRuns: 2000, seed: 51 },
    );
  });
  it("reads each byte a bounded number of times, whatever the strings hold (escaped quotes, runs of backslashes)", () => {
    // Counted, not timed: element reads through the proxy, and the bytes each indexOf passes over.
    const count = (text: string): { reads: number; length: number; over: boolean } => {
      const bytes = Buffer.from(text);
      let reads = 0;
      const counted = new Proxy(bytes, {
        get(target, prop) {
          if (prop === "indexOf")
            return (value: number, from: number) => {
              const at = target.indexOf(value, from);
              reads += (at < 0 ? target.length : at + 1) - from;
              return at;
            };
          if (typeof prop === "string" && /^\d+$/.test(prop)) reads++;
          return Reflect.get(target, prop) as unknown;
        },
      });
      const over = nestedDeeperThan(counted as Uint8Array, MAX_NESTING);
      return { reads, length: bytes.length, over };
    };
    const BODIES: Array<[string, string]> = [
      ["5,000 escaped quotes in one string", `["${'\\"'.repeat(5_000)}"]`],
      ["runs of backslashes before every quote", `["${`${"\\\\".repeat(50)}\\"`.repeat(100)}"]`],
      ["5,000 one-byte strings", `[${Array(5_000).fill('"a"').join(",")}]`],
      ["an unterminated string of escapes", `["${"\\\\".repeat(5_000)}`],
    ];
    for (const [name, text] of BODIES) {
      const c = count(text);
      assert.equal(c.over, false, name);
      assert.ok(c.reads <= 3 * c.length, `${name}: ${c.reads} reads for ${c.length} bytes`);
    }
  });
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
