import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  MAX_QUANTITY_LENGTH,
  MAX_QUANTITY_UNITS,
  addQuantities,
  checkQuantity,
  clearQuantityCache,
  compareQuantities,
  formatNano,
  isInteger,
  parseQuantity,
  quantityCacheStats,
  toNumber,
  type QuantityProblem,
} from "../../../src/core/quantity.js";
import { CORPUS_SKIP, corpusObjects } from "../../fixtures/corpus.js";

const nano = (text: string | number): bigint | undefined => parseQuantity(text)?.nano;

describe("parseQuantity", () => {
  const valid: Array<[string, number]> = [
    ["0", 0],
    ["1", 1],
    ["+1", 1],
    ["-1", -1],
    ["100m", 0.1],
    ["1.5", 1.5],
    ["1.", 1],
    [".5", 0.5],
    ["0.5Gi", 0.5 * 2 ** 30],
    ["1Ki", 1024],
    ["2Mi", 2 * 2 ** 20],
    ["1Ei", 2 ** 60],
    ["1k", 1000],
    ["1M", 1e6],
    ["1G", 1e9],
    ["1T", 1e12],
    ["1P", 1e15],
    ["1E", 1e18],
    ["1n", 1e-9],
    ["1u", 1e-6],
    ["1e3", 1000],
    ["1E3", 1000],
    ["1e-3", 0.001],
    ["1.5e+2", 150],
    ["12.5Mi", 12.5 * 2 ** 20],
  ];
  for (const [text, want] of valid) {
    it(`${text} → ${want}`, () => {
      const q = parseQuantity(text);
      assert.ok(q, `${text} did not parse`);
      assert.equal(toNumber(q), want);
    });
  }
  const invalid = [
    "",
    " 1",
    "1 ",
    "1Gb",
    "1KiB",
    "1ki",
    "Ki",
    "1.2.3",
    "e3",
    "1e",
    "1e1.5",
    "--1",
    "1m3",
    "abc",
    "0x10",
    "1,5",
    "-",
    "+",
    ".",
    "1K",
    "NaN",
    "Infinity",
    "1e+",
    "1 Gi",
  ];
  for (const text of invalid) it(`${JSON.stringify(text)} → not a quantity`, () => assert.equal(parseQuantity(text), undefined));

  it("exact: 0.1 + 0.2 == 300m, 1Gi > 1G, 1000m == 1", () => {
    assert.equal(compareQuantities(addQuantities(parseQuantity("0.1")!, parseQuantity("0.2")!), parseQuantity("300m")!), 0);
    assert.equal(compareQuantities(parseQuantity("1Gi")!, parseQuantity("1G")!), 1);
    assert.equal(compareQuantities(parseQuantity("1000m")!, parseQuantity("1")!), 0);
    assert.equal(compareQuantities(parseQuantity("999m")!, parseQuantity("1")!), -1);
  });

  it("integers: 2 and 2000m yes, 1500m and 0.5Gi-as-count no", () => {
    assert.ok(isInteger(parseQuantity("2")!));
    assert.ok(isInteger(parseQuantity("2000m")!));
    assert.ok(!isInteger(parseQuantity("1500m")!));
    assert.ok(isInteger(parseQuantity("0.5Gi")!));
  });

  it("numbers (YAML ints) parse too", () => assert.equal(toNumber(parseQuantity(4)!), 4));

  it("every resource quantity in the corpus parses", { skip: CORPUS_SKIP }, () => {
    let seen = 0;
    const visit = (node: unknown, key: string): void => {
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node)) return node.forEach((v) => visit(v, key));
      for (const [k, v] of Object.entries(node)) {
        if ((k === "limits" || k === "requests") && v && typeof v === "object" && key === "resources") {
          for (const [name, q] of Object.entries(v)) {
            seen++;
            assert.ok(parseQuantity(q as string), `${name}: ${String(q)} did not parse`);
          }
        }
        visit(v, k);
      }
    };
    for (const { object } of corpusObjects()) visit(object, "");
    assert.ok(seen > 50, `only ${seen} quantities found`);
  });
});

describe("exact nano-units", () => {
  // Each value checked against upstream's canonical form (resource.MustParse(text).String()).
  const cases: Array<[string | number, bigint]> = [
    ["8." + "0".repeat(309), 8_000_000_000n], // was NaN: Infinity / Infinity
    ["0." + "0".repeat(400) + "1", 1n], // far below a nano-unit: rounds up to 1n, as upstream
    ["1e-1001", 1n],
    ["-1e-1001", -1n], // away from zero, as inf.RoundUp
    ["0.0000000001", 1n],
    ["1.0000000001", 1_000_000_001n],
    ["0.0000000001Ki", 103n], // 102.4n → 103n
    ["1n", 1n],
    ["1500u", 1_500_000n],
    ["0.5Gi", 536_870_912_000_000_000n],
    ["000000000000000000000000000000001", 1_000_000_000n],
    ["0e99999999999", 0n],
    ["-0", 0n],
    ["1e+3", 1_000_000_000_000n],
    ["1E-0003", 1_000_000n],
    [1e-7, 100n],
    [16, 16_000_000_000n],
    ["9223372036854775807", MAX_QUANTITY_UNITS * 1_000_000_000n],
    ["-9223372036854775807", -MAX_QUANTITY_UNITS * 1_000_000_000n],
    ["7Ei", 7n * 2n ** 60n * 1_000_000_000n],
    ["9223372036854775806.9999999999", (MAX_QUANTITY_UNITS - 1n) * 1_000_000_000n + 1_000_000_000n], // rounds up to exactly the maximum
  ];
  for (const [text, want] of cases) it(`${String(text).slice(0, 40)} → ${want}n`, () => assert.equal(nano(text), want));

  it("136 GPUs written long still compare as 136", () => {
    const q = parseQuantity("136." + "0".repeat(900))!;
    assert.equal(compareQuantities(q, parseQuantity("32")!), 1);
    assert.equal(toNumber(q), 136);
  });

  it("formatNano gives the smallest exact suffix", () => {
    assert.deepEqual([2_000_000_000n, 1_500_000_000n, 250_000n, 7n, -3_000_000n].map(formatNano), ["2", "1500m", "250u", "7n", "-3m"]);
  });
});

describe("checkQuantity: bounds and problems", () => {
  const cases: Array<[string, unknown, QuantityProblem]> = [
    ["1e1001", "1e1001", "out of range"],
    ["2^63 units", "9223372036854775808", "out of range"],
    ["8Ei (upstream clamps binary SI at 2^63-1; refused here)", "8Ei", "out of range"],
    ["one nano over the maximum", "9223372036854775807.000000001", "out of range"],
    ["an exponent past int64", "1e99999999999999999999999", "out of range"],
    ["a JS number past the range", 1e21, "out of range"],
    [`${MAX_QUANTITY_LENGTH + 1} characters`, "1".padEnd(MAX_QUANTITY_LENGTH + 1, "0"), "too long"],
    ["1M digits", "8." + "0".repeat(1_000_000), "too long"],
    ["NaN", Number.NaN, "not a finite number"],
    ["Infinity", Number.POSITIVE_INFINITY, "not a finite number"],
    ["an object", { n: 1 }, "not a quantity"],
    ["null", null, "not a quantity"],
    ["a boolean", true, "not a quantity"],
    ["garbage", "lots", "not a quantity"],
  ];
  for (const [name, value, want] of cases) {
    it(`${name} → ${want}`, () => {
      const r = checkQuantity(value);
      assert.equal(r.ok, false);
      assert.equal(!r.ok && r.problem, want);
    });
  }

  it(`exactly ${MAX_QUANTITY_LENGTH} characters is still parsed`, () => {
    assert.equal(nano("8." + "0".repeat(MAX_QUANTITY_LENGTH - 2)), 8_000_000_000n);
  });

  it("a long message is cut, not echoed whole", () => {
    const r = checkQuantity("x".repeat(1000));
    assert.ok(!r.ok && r.message.length < 120, JSON.stringify(r));
  });
});

describe("parse cache: bounded by bytes", () => {
  it("stays under its byte budget whatever is parsed, and keeps the recent entries", () => {
    clearQuantityCache();
    for (let i = 0; i < 5000; i++) checkQuantity(`${i}.${"0".repeat(900)}`);
    const s = quantityCacheStats();
    assert.ok(s.bytes <= s.maxBytes, JSON.stringify(s));
    assert.ok(s.entries > 100 && s.entries < 5000, JSON.stringify(s));
    // The byte count is the sum over the keys still held (evictions subtract what they free).
    const last = `4999.${"0".repeat(900)}`;
    assert.equal(nano(last), 4999_000_000_000n);
    assert.equal(quantityCacheStats().entries, s.entries, "a cached key is a hit, not a new entry");
  });

  it("short keys: many entries fit", () => {
    clearQuantityCache();
    for (let i = 0; i < 2000; i++) checkQuantity(`${i}m`);
    const s = quantityCacheStats();
    assert.equal(s.entries, 2000);
    assert.ok(s.bytes <= s.maxBytes);
  });

  it("a string over the length bound is never cached", () => {
    clearQuantityCache();
    checkQuantity("1".repeat(MAX_QUANTITY_LENGTH + 1));
    assert.deepEqual([quantityCacheStats().entries, quantityCacheStats().bytes], [0, 0]);
  });
});
