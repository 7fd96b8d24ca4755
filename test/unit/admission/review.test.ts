import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decodeReview, encodeReview, reviewJson } from "../../../src/admission/review.js";
import { ReviewDecodeError } from "../../../src/core/errors.js";
import { review } from "../../fixtures/reviews.js";

function problems(body: unknown): readonly string[] {
  try {
    decodeReview(body);
  } catch (err) {
    assert.ok(err instanceof ReviewDecodeError, `expected ReviewDecodeError, got ${String(err)}`);
    return err.problems;
  }
  assert.fail("decodeReview accepted the body");
}

describe("decodeReview", () => {
  it("valid v1 review → its request", () => {
    const r = review();
    assert.equal(decodeReview(r), r.request);
  });

  it("DELETE with a null object and an oldObject → accepted", () => {
    const r = review({ operation: "DELETE", object: null, oldObject: { metadata: { name: "x" } } });
    assert.equal(decodeReview(r).operation, "DELETE");
  });

  const base = review() as unknown as { request: Record<string, unknown> } & Record<string, unknown>;
  const errorCases: Array<{ name: string; body: unknown; want: string[] }> = [
    { name: "undefined body", body: undefined, want: ["body must be a JSON object (an AdmissionReview)"] },
    { name: "array body", body: [], want: ["body must be a JSON object (an AdmissionReview)"] },
    { name: "string body", body: "review", want: ["body must be a JSON object (an AdmissionReview)"] },
    {
      name: "empty object → every top-level field named",
      body: {},
      want: ["(document): missing required field 'apiVersion'", "(document): missing required field 'kind'", "(document): missing required field 'request'"],
    },
    { name: "v1beta1", body: { ...base, apiVersion: "admission.k8s.io/v1beta1" }, want: ['apiVersion: must be "admission.k8s.io/v1"'] },
    { name: "wrong kind", body: { ...base, kind: "Pod" }, want: ['kind: must be "AdmissionReview"'] },
    {
      name: "request without uid and resource",
      body: { ...base, request: { ...base.request, uid: undefined, resource: undefined } },
      want: ["request: missing required field 'uid'", "request: missing required field 'resource'"],
    },
    { name: "empty uid", body: { ...base, request: { ...base.request, uid: "" } }, want: ["request.uid: must NOT have fewer than 1 characters"] },
    {
      name: "unknown operation",
      body: { ...base, request: { ...base.request, operation: "PATCH" } },
      want: ['request.operation: must be one of "CREATE", "UPDATE", "DELETE", "CONNECT"'],
    },
    {
      name: "kind without version, object a string",
      body: { ...base, request: { ...base.request, kind: { group: "", kind: "Pod" }, object: "pod" } },
      want: ["request.kind: missing required field 'version'", "request.object: must be object,null"],
    },
  ];
  for (const tc of errorCases) {
    it(`${tc.name} → ReviewDecodeError naming every problem`, () => {
      assert.deepEqual([...problems(tc.body)].sort(), [...tc.want].sort());
    });
  }
});

describe("encodeReview", () => {
  it("wraps a response in the v1 envelope", () => {
    assert.deepEqual(encodeReview({ uid: "u", allowed: true }), {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: "u", allowed: true },
    });
  });
});

describe("reviewJson", () => {
  const patch = Buffer.from('[{"op":"add","path":"/metadata/labels/a","value":"é"}]').toString("base64");
  const CASES: Array<{ name: string; response: Record<string, unknown> }> = [
    { name: "allowed", response: { uid: "u-1", allowed: true } },
    {
      name: "patched with warnings",
      response: { uid: "u-2", allowed: true, patchType: "JSONPatch", patch, warnings: ["quartermaster: x", 'quotes " and \\ and ünïcode'] },
    },
    {
      name: "denied with status and causes",
      response: {
        uid: "u-3",
        allowed: false,
        status: { status: "Failure", code: 403, reason: "Forbidden", message: "m", details: { causes: [{ field: "spec", message: "x" }] } },
      },
    },
    { name: "audit annotations", response: { uid: "u-4", allowed: true, auditAnnotations: { "a/b": "c" } } },
    { name: "undefined fields left out", response: { uid: "u-5", allowed: true, warnings: undefined, patch: undefined } },
    { name: "an unknown field falls back to JSON.stringify", response: { uid: "u-6", allowed: true, extra: { x: 1 } } },
    { name: "a patch that is not a string falls back", response: { uid: "u-7", allowed: true, patch: null } },
  ];
  for (const c of CASES) {
    it(`${c.name}: the same value as JSON.stringify`, () => {
      const review = { ...encodeReview(c.response as never) };
      assert.deepEqual(JSON.parse(reviewJson(review)), JSON.parse(JSON.stringify(review)));
    });
  }
  it("puts the base64 patch in as it is", () => {
    const text = reviewJson(encodeReview({ uid: "u", allowed: true, patchType: "JSONPatch", patch }));
    assert.ok(text.includes(`"patch":"${patch}"`), text);
  });
});
