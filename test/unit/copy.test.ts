import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { copyOf, withKey } from "../../src/copy.js";

describe("withKey", () => {
  const cases: Array<{ name: string; given: Record<string, unknown> | undefined; key: string; value: unknown; want: Record<string, unknown>; order: string[] }> = [
    { name: "existing key → replaced in place, order kept", given: { a: 1, env: [1], b: 2 }, key: "env", value: [2], want: { a: 1, env: [2], b: 2 }, order: ["a", "env", "b"] },
    { name: "new key → appended last", given: { a: 1, b: 2 }, key: "env", value: [], want: { a: 1, b: 2, env: [] }, order: ["a", "b", "env"] },
    { name: "undefined object → a new one with the key", given: undefined, key: "labels", value: { x: "1" }, want: { labels: { x: "1" } }, order: ["labels"] },
    { name: "value undefined on an existing key → kept as a key (the diff sees it)", given: { a: 1 }, key: "a", value: undefined, want: { a: undefined }, order: ["a"] },
    { name: "an inherited name is not an own key → added as own", given: Object.create({ env: "proto" }) as Record<string, unknown>, key: "env", value: "own", want: { env: "own" }, order: ["env"] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const before = c.given === undefined ? undefined : structuredClone({ ...c.given });
      const out = withKey(c.given as Record<string, unknown>, c.key, c.value);
      assert.notEqual(out, c.given, "always a new object");
      assert.deepEqual({ ...out }, c.want);
      assert.deepEqual(Object.keys(out), c.order);
      if (c.given !== undefined) assert.deepEqual({ ...c.given }, before, "the input is not changed");
    });
  }
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
  });
});
