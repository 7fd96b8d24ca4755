import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { addQuantities, compareQuantities, isInteger, parseQuantity, toNumber } from "../../src/quantity.js";
import { corpusObjects } from "../fixtures/corpus.js";

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
  const invalid = ["", " 1", "1 ", "1Gb", "1KiB", "1ki", "Ki", "1.2.3", "e3", "1e", "1e1.5", "--1", "1m3", "abc", "0x10", "1,5"];
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

  it("every resource quantity in the corpus parses", () => {
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
