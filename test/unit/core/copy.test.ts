import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { copyOf, withKey } from "../../../src/core/copy.js";

describe("withKey", () => {
  const cases: Array<{
    name: string;
    given: Record<string, unknown> | null | undefined;
    key: string;
    value: unknown;
    want: Record<string, unknown>;
    order: string[];
  }> = [
    {
      name: "existing key → replaced in place, order kept",
      given: { a: 1, env: [1], b: 2 },
      key: "env",
      value: [2],
      want: { a: 1, env: [2], b: 2 },
      order: ["a", "env", "b"],
    },
    { name: "new key → appended last", given: { a: 1, b: 2 }, key: "env", value: [], want: { a: 1, b: 2, env: [] }, order: ["a", "b", "env"] },
    { name: "undefined object → a new one with the key", given: undefined, key: "labels", value: { x: "1" }, want: { labels: { x: "1" } }, order: ["labels"] },
    {
      name: "null object (JSON's `metadata: null`) → a new one with the key",
      given: null,
      key: "labels",
      value: { x: "1" },
      want: { labels: { x: "1" } },
      order: ["labels"],
    },
    {
      name: "value undefined on an existing key → kept as a key (the diff sees it)",
      given: { a: 1 },
      key: "a",
      value: undefined,
      want: { a: undefined },
      order: ["a"],
    },
    {
      name: "an inherited name is not an own key → added as own",
      given: Object.create({ env: "proto" }) as Record<string, unknown>,
      key: "env",
      value: "own",
      want: { env: "own" },
      order: ["env"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const before = c.given == null ? undefined : structuredClone({ ...c.given });
      const out = withKey(c.given as Record<string, unknown>, c.key, c.value);
      assert.notEqual(out, c.given, "always a new object");
      assert.deepEqual({ ...out }, c.want);
      assert.deepEqual(Object.keys(out), c.order);
      if (c.given != null) assert.deepEqual({ ...c.given }, before, "the input is not changed");
    });
  }
  const hostile = (): Record<string, unknown> => JSON.parse('{"a":1,"__proto__":{"polluted":true}}') as Record<string, unknown>;
  const protoCases: Array<{ name: string; key: string; order: string[] }> = [
    { name: "an own __proto__ key (from JSON) → kept as an own key, the prototype untouched", key: "b", order: ["a", "__proto__", "b"] },
    { name: "an own __proto__ key, replacing another key", key: "a", order: ["a", "__proto__"] },
    { name: "setting __proto__ itself → an own key", key: "__proto__", order: ["a", "__proto__"] },
  ];
  for (const c of protoCases) {
    it(c.name, () => {
      const out = withKey(hostile(), c.key, 2);
      assert.deepEqual(Object.keys(out), c.order);
      assert.equal(Object.getPrototypeOf(out), Object.prototype);
      assert.equal((out as { polluted?: boolean }).polluted, undefined);
    });
  }
  it("setting __proto__ on an object without one → an own key, the prototype untouched", () => {
    const out = withKey({ a: 1 } as Record<string, unknown>, "__proto__", { polluted: true });
    assert.deepEqual(Object.keys(out), ["a", "__proto__"]);
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
  });

  it("nested values are shared, not copied (copy-on-write)", () => {
    const env = [{ name: "A" }];
    const c = { name: "x", env, resources: { limits: {} } };
    const out = withKey(c, "name", "y");
    assert.equal(out.env, env);
    assert.equal(out.resources, c.resources);
  });
});

describe("copyOf", () => {
  it("a shallow own-key copy that takes new keys without touching the input", () => {
    const input = { cpu: "1" } as Record<string, string>;
    const out = copyOf(input);
    out.memory = "1Gi";
    assert.deepEqual(input, { cpu: "1" });
    assert.deepEqual(out, { cpu: "1", memory: "1Gi" });
    assert.deepEqual(copyOf(undefined as Record<string, string> | undefined), {});
    assert.deepEqual(copyOf(null as Record<string, string> | null), {});
  });
  it("an own __proto__ key (from JSON) is copied as an own key", () => {
    const out = copyOf(JSON.parse('{"__proto__":{"polluted":true},"cpu":"1"}') as Record<string, unknown>);
    assert.deepEqual(Object.keys(out), ["__proto__", "cpu"]);
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
  });
});
