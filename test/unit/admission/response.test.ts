import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { applyPatch } from "../../../src/admission/patch.js";
import { MAX_WARNINGS, MAX_WARNING_LENGTH, allowed, denied, errored, normalizeWarnings, patched, withWarnings } from "../../../src/admission/response.js";
import { deepFreeze, pod } from "../../fixtures/reviews.js";

function decodePatch(patch: string | undefined): unknown[] {
  assert.ok(patch, "response has a patch");
  return JSON.parse(Buffer.from(patch, "base64").toString("utf8")) as unknown[];
}

describe("patched", () => {
  it("same reference → allowed, no patch and no patchType", () => {
    const p = deepFreeze(pod());
    const { response, ops } = patched("u", p, p);
    assert.deepEqual(response, { uid: "u", allowed: true });
    assert.equal(ops, 0);
  });

  it("equal copy → allowed, no patch", () => {
    const p = deepFreeze(pod());
    assert.deepEqual(patched("u", p, structuredClone(p)).response, { uid: "u", allowed: true });
  });

  it("label with '/' in its key → path escaped as ~1, and the patch applies to the original", () => {
    const original = deepFreeze(pod({ labels: { app: "x" } }));
    const next = structuredClone(original) as { metadata: { labels: Record<string, string> } };
    next.metadata.labels["training.kubeflow.org/job-name"] = "mnist";
    const { response } = patched("u", original, next);
    assert.equal(response.patchType, "JSONPatch");
    const ops = decodePatch(response.patch);
    assert.deepEqual(ops, [{ op: "add", path: "/metadata/labels/training.kubeflow.org~1job-name", value: "mnist" }]);
    assert.deepEqual(applyPatch(original, ops as never), next);
  });

  it("unknown fields of the raw object are never removed", () => {
    const original: Record<string, unknown> = deepFreeze({ ...pod(), spec: { containers: [], futureField: { a: 1 } } });
    const next = { ...original, metadata: { ...(original.metadata as object), labels: { a: "b" } } };
    const ops = decodePatch(patched("u", original, next).response.patch) as Array<{ op: string }>;
    assert.ok(
      ops.every((o) => o.op !== "remove"),
      JSON.stringify(ops),
    );
  });
});

describe("denied", () => {
  it("403 Forbidden with one cause per violation and all of them in the message", () => {
    const r = denied(
      "u",
      [
        { rule: "container-gpus", field: "spec.containers[0].resources.limits[nvidia.com/gpu]", message: "16 exceeds the per-container limit of 8" },
        { rule: "pod-gpus", field: "spec", message: "pod requests 16 GPUs, limit 8" },
      ],
      "2 policy violations",
    );
    assert.equal(r.allowed, false);
    assert.equal(r.status?.code, 403);
    assert.equal(r.status?.reason, "Forbidden");
    assert.equal(
      r.status?.message,
      "2 policy violations: spec.containers[0].resources.limits[nvidia.com/gpu]: 16 exceeds the per-container limit of 8; spec: pod requests 16 GPUs, limit 8",
    );
    assert.deepEqual(
      r.status?.details?.causes?.map((c) => c.field),
      ["spec.containers[0].resources.limits[nvidia.com/gpu]", "spec"],
    );
  });
});

describe("errored", () => {
  it("keeps the error message, not '{}'", () => {
    const r = errored("u", 500, new Error("boom"));
    assert.deepEqual(r, { uid: "u", allowed: false, status: { status: "Failure", code: 500, reason: "InternalError", message: "boom" } });
  });
});

describe("warnings", () => {
  const cases: Array<{ name: string; given: string[]; want: string[] }> = [
    { name: "none → none", given: [], want: [] },
    { name: "blank → dropped", given: ["  ", ""], want: [] },
    { name: "duplicates → one", given: ["a", "a", "b"], want: ["a", "b"] },
    { name: "newlines and runs of spaces → one line", given: ["a\n  b"], want: ["a b"] },
    {
      name: `over ${MAX_WARNING_LENGTH} characters → cut with an ellipsis`,
      given: ["x".repeat(200)],
      want: ["x".repeat(MAX_WARNING_LENGTH - 1) + "…"],
    },
    { name: "exactly the limit → kept whole", given: ["y".repeat(MAX_WARNING_LENGTH)], want: ["y".repeat(MAX_WARNING_LENGTH)] },
    { name: "multi-byte characters count as characters", given: ["é".repeat(MAX_WARNING_LENGTH)], want: ["é".repeat(MAX_WARNING_LENGTH)] },
    {
      name: `more than ${MAX_WARNINGS} → first ones and a count of the rest`,
      given: Array.from({ length: 14 }, (_, i) => `w${i}`),
      want: [...Array.from({ length: MAX_WARNINGS - 1 }, (_, i) => `w${i}`), "5 more warnings not shown"],
    },
  ];
  for (const tc of cases) it(tc.name, () => assert.deepEqual(normalizeWarnings(tc.given), tc.want));

  it("withWarnings without warnings returns the response unchanged", () => {
    const r = allowed("u");
    assert.equal(withWarnings(r, []), r);
  });
  it("withWarnings merges with existing warnings, deduplicated", () => {
    assert.deepEqual(withWarnings({ ...allowed("u"), warnings: ["a"] }, ["a", "b"]).warnings, ["a", "b"]);
  });
});
