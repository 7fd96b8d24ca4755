/**
 * The hand-written diff (`src/admission/patch.ts`) against fast-json-patch's `compare`, its reference:
 * the same JSON text byte for byte (operations, order, escaping) for named edge cases, generated
 * documents, and the patch of every corpus pod through the mutating webhook.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import { applyPatch, diff, encodePatch } from "../../../src/admission/patch.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { CORPUS_SKIP, corpusJobs, corpusPods } from "../../fixtures/corpus.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader } from "../../fixtures/jobs.js";
import { ALL_MUTATIONS } from "../../fixtures/policies.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

/** The reference: what the response carried when the diff was fast-json-patch's. */
function reference(before: object, after: object): string {
  return JSON.stringify(jsonpatch.compare(before, after));
}

function assertLikeReference(before: object, after: object): void {
  const patch = diff(before, after);
  const expected = reference(before, after);
  assert.equal(patch.json, expected);
  assert.equal(patch.ops, (JSON.parse(expected) as unknown[]).length);
}

const shared = { deep: { list: [1, 2, 3] } };
const CASES: Array<{ name: string; before: object; after: object; /** fast-json-patch refuses to apply it. */ noApply?: true }> = [
  { name: "same reference", before: shared, after: shared },
  { name: "equal copies", before: { a: { b: [1, { c: "d" }] } }, after: { a: { b: [1, { c: "d" }] } } },
  { name: "key added", before: { a: 1 }, after: { a: 1, b: { c: [1] } } },
  { name: "key removed", before: { a: 1, b: 2 }, after: { a: 1 } },
  { name: "key set to undefined counts as removed", before: { a: 1, b: 2 }, after: { a: 1, b: undefined } },
  { name: "undefined key added is not an operation", before: { a: 1 }, after: { a: 1, b: undefined } },
  { name: "primitive replaced", before: { a: 1, b: "x" }, after: { a: 2, b: "y" } },
  { name: "null replaced and replacing", before: { a: null, b: { c: 1 } }, after: { a: { c: 1 }, b: null } },
  { name: "object becomes array", before: { a: { 0: "x" } }, after: { a: ["x"] } },
  { name: "array grows", before: { l: [1, 2] }, after: { l: [1, 2, 3, { x: 4 }] } },
  { name: "array shrinks (removes from the end, last first)", before: { l: [1, 2, 3, 4] }, after: { l: [1] } },
  { name: "array element changed in place", before: { l: [{ a: 1 }, { a: 2 }] }, after: { l: [{ a: 1 }, { a: 3, b: [] }] } },
  { name: "array element undefined becomes null", before: { l: [1, 2] }, after: { l: [1, undefined] } },
  { name: "keys needing escapes", before: { m: {} }, after: { m: { "a/b": 1, "c~d": 2, "~1/0": 3, 'q"uote\\': 4, "ünï\u2028": 5 } } },
  { name: "removal of escaped keys", before: { m: { "nvidia.com/gpu": "1", "x~y": 2 } }, after: { m: {} } },
  {
    name: "__proto__ as a data key",
    before: JSON.parse('{"a":{"__proto__":{"x":1}}}') as object,
    after: JSON.parse('{"a":{"__proto__":{"x":2},"y":1}}') as object,
    noApply: true,
  },
  { name: "values with undefined members and Dates", before: { a: 1 }, after: { a: 1, b: { c: undefined, d: new Date(0) }, l: [undefined] } },
  { name: "root array against root object", before: [1, 2], after: { 0: 1 } },
  { name: "root array against root object of as many keys", before: [1, 2], after: { 0: 1, x: 2 }, noApply: true },
  { name: "root object against root array", before: { 0: "a", 1: "b" }, after: ["a", "c", "d"], noApply: true },
  { name: "root arrays", before: [1, { a: 2 }], after: [1, { a: 3 }, "x"] },
  { name: "removed and added in one object", before: { a: 1, b: 2, c: 3 }, after: { b: 2, d: 4, a: 1 } },
  { name: "numbers, booleans, unicode strings", before: { n: 1.5, t: true, s: "é" }, after: { n: -0.25e-7, t: false, s: "\ud83d\ude80\u0000" } },
];

describe("diff: like fast-json-patch's compare, byte for byte", () => {
  for (const c of CASES) {
    it(c.name, () => {
      assertLikeReference(c.before, c.after);
      if (c.noApply) return;
      const ops = JSON.parse(diff(c.before, c.after).json);
      assert.deepEqual(JSON.parse(JSON.stringify(applyPatch(c.before, ops))), JSON.parse(JSON.stringify(c.after)));
    });
  }

  it("a shared subtree is never walked (its getters are not read)", () => {
    const subtree = {};
    Object.defineProperty(subtree, "trap", { enumerable: true, get: () => assert.fail("walked a shared subtree") });
    const before = { a: 1, s: subtree };
    assert.equal(diff(before, { a: 2, s: subtree }).json, '[{"op":"replace","path":"/a","value":2}]');
  });

  it("the patch text is what the response carries, base64", () => {
    const p = diff({ a: 1 }, { a: 1, b: "ü" });
    assert.equal(Buffer.from(encodePatch(p), "base64").toString("utf8"), '[{"op":"add","path":"/b","value":"ü"}]');
  });
});

/** `after` built from `before` by replacing the value at a path picked by `steps`, copying only that path. */
function edited(before: unknown, steps: readonly number[], value: unknown, remove: boolean): unknown {
  if (steps.length === 0 || typeof before !== "object" || before === null) return value;
  const keys = Object.keys(before);
  if (keys.length === 0) return Array.isArray(before) ? [value] : { added: value };
  const key = keys[steps[0]! % keys.length]!;
  const copy: Record<string, unknown> | unknown[] = Array.isArray(before) ? [...before] : { ...before };
  if (remove && steps.length === 1 && !Array.isArray(copy)) delete copy[key];
  else (copy as Record<string, unknown>)[key] = edited((before as Record<string, unknown>)[key], steps.slice(1), value, remove);
  return copy;
}

describe("diff: generated documents (fast-check, fixed seed)", () => {
  const doc = fc.jsonValue({ maxDepth: 4 });
  it("independent pairs", () => {
    fc.assert(
      fc.property(fc.object(), fc.object(), (a, b) => assertLikeReference(a, b)),
      { seed: 20261122, numRuns: 1000 },
    );
  });
  it("edits sharing the untouched rest", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), doc), fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), doc, fc.boolean(), (a, steps, value, remove) => {
        const b = edited(a, steps, value, remove) as object;
        assertLikeReference(a, b);
        const json = (v: unknown): unknown => JSON.parse(JSON.stringify(v)); // as the apiserver reads it (-0 is 0)
        assert.deepEqual(json(applyPatch(a, JSON.parse(diff(a, b).json))), json(b));
      }),
      { seed: 20261122, numRuns: 2000 },
    );
  });
});

describe("diff: every corpus pod's patch from the mutating webhook", { skip: CORPUS_SKIP }, () => {
  const policy = checkPolicy(structuredClone(ALL_MUTATIONS), "patch-test");
  const mutate = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(corpusJobs().map((j) => j.job)), now: () => new Date() })[
    "/mutate/pods"
  ]!;
  it("equals compare(original, patched original)", async () => {
    let patchedPods = 0;
    for (const { source, pod } of corpusPods()) {
      const object = deepFreeze(structuredClone(pod));
      const ns = (object.metadata as { namespace?: string }).namespace ?? "default";
      const res = await mutate.admit(review({ object, namespace: ns }));
      const patch = res.review.response?.patch;
      if (patch === undefined) continue;
      patchedPods++;
      const text = Buffer.from(patch, "base64").toString("utf8");
      const after = applyPatch(object, JSON.parse(text));
      assert.equal(text, reference(object, after), source);
      assert.equal(res.patchOps, (JSON.parse(text) as unknown[]).length, source);
    }
    assert.ok(patchedPods >= 50, `only ${patchedPods} corpus pods were patched`);
  });
});
