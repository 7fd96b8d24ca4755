import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jobGuard, podGuard } from "../../../src/admission/guards.js";
import { mutatingWebhook, validatingWebhook } from "../../../src/admission/handler.js";
import type { AdmissionRequest } from "../../../src/admission/types.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { ReviewDecodeError } from "../../../src/core/errors.js";
import { pod, review } from "../../fixtures/reviews.js";

const addLabel = mutatingWebhook({
  name: "add-label",
  guard: podGuard(["CREATE"]),
  mutate: (req) => {
    const meta = req.object.metadata as Record<string, unknown>;
    const labels = (meta.labels ?? {}) as Record<string, string>;
    if (labels.outfitted === "true") return { object: req.object, warnings: [] };
    return { object: { ...req.object, metadata: { ...meta, labels: { ...labels, outfitted: "true" } } }, warnings: ["labelled"] };
  },
});

describe("mutatingWebhook", () => {
  it("echoes the uid and answers in the v1 envelope", async () => {
    const r = review({ uid: "abc-123" });
    const { review: out } = await addLabel.admit(r);
    assert.equal(out.apiVersion, "admission.k8s.io/v1");
    assert.equal(out.kind, "AdmissionReview");
    assert.equal(out.response?.uid, "abc-123");
  });

  const skipCases: Array<{ name: string; req: Partial<AdmissionRequest>; reason: string }> = [
    { name: "UPDATE", req: { operation: "UPDATE", oldObject: pod() }, reason: "operation UPDATE is not handled" },
    { name: "pods/status subresource", req: { subResource: "status" }, reason: "subresource status is not handled" },
    {
      name: "a Service",
      req: { kind: { group: "", version: "v1", kind: "Service" }, resource: { group: "", version: "v1", resource: "services" } },
      reason: "resource services is not pods",
    },
    { name: "DELETE (no object)", req: { operation: "DELETE", object: null, oldObject: pod() }, reason: "request carries no object" },
  ];
  for (const tc of skipCases) {
    it(`${tc.name} → allowed, no patch, skipped with its reason`, async () => {
      const res = await addLabel.admit(review(tc.req));
      assert.equal(res.outcome, "skipped");
      assert.equal(res.skipReason, tc.reason);
      assert.deepEqual(res.review.response, { uid: res.request.uid, allowed: true });
    });
  }

  it("a change → JSONPatch, warning, patched outcome", async () => {
    const res = await addLabel.admit(review());
    assert.equal(res.outcome, "patched");
    assert.equal(res.patchOps, 1);
    assert.equal(res.review.response?.patchType, "JSONPatch");
    assert.deepEqual(res.review.response?.warnings, ["labelled"]);
  });

  it("reinvocation: mutating the patched pod again → no patch", async () => {
    const once = await addLabel.admit(review());
    const ops = JSON.parse(Buffer.from(once.review.response?.patch ?? "", "base64").toString()) as Array<{ path: string; value: unknown }>;
    const labelled = pod({ labels: { outfitted: "true" } });
    assert.deepEqual(ops, [{ op: "add", path: "/metadata/labels", value: { outfitted: "true" } }]);
    const twice = await addLabel.admit(review({ object: labelled }));
    assert.equal(twice.outcome, "allowed");
    assert.equal(twice.review.response?.patch, undefined);
  });

  it("a mutation that throws → allowed unchanged with a warning (fail open), error kept for the log", async () => {
    const broken = mutatingWebhook({
      name: "broken",
      guard: () => undefined,
      mutate: () => {
        throw new Error("topology lookup exploded");
      },
    });
    const res = await broken.admit(review({ uid: "u-1" }));
    assert.equal(res.outcome, "error");
    assert.equal((res.error as Error).message, "topology lookup exploded");
    assert.deepEqual(res.review.response, {
      uid: "u-1",
      allowed: true,
      warnings: ["quartermaster: pod admitted unchanged, mutation failed: topology lookup exploded"],
    });
  });

  it("a mutation of a job that throws → the warning names the job's kind, not a pod", async () => {
    const broken = mutatingWebhook({
      name: "broken",
      guard: () => undefined,
      mutate: () => {
        throw new Error("boom");
      },
    });
    const res = await broken.admit(
      review({ uid: "u-2", kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" }, object: { kind: "PyTorchJob", metadata: {} } }),
    );
    assert.deepEqual(res.review.response?.warnings, ["quartermaster: PyTorchJob admitted unchanged, mutation failed: boom"]);
  });

  it("a body that is not a review → ReviewDecodeError", async () => {
    assert.throws(() => addLabel.admit({ hello: "world" }), ReviewDecodeError);
  });

  const timing = [
    {
      name: "synchronous rules → the result at once, no promise",
      mutate: (o: KubeObject) => ({ object: o, warnings: ["w"] }),
      promise: false,
      outcome: "allowed",
    },
    {
      name: "asynchronous rules → a promise of the same result",
      mutate: async (o: KubeObject) => ({ object: o, warnings: ["w"] }),
      promise: true,
      outcome: "allowed",
    },
    {
      name: "a rejected promise → fail open, as a throw",
      mutate: async (): Promise<never> => Promise.reject(new Error("job read failed")),
      promise: true,
      outcome: "error",
    },
  ];
  for (const tc of timing) {
    it(tc.name, async () => {
      const hook = mutatingWebhook({ name: "t", guard: () => undefined, mutate: (req) => tc.mutate(req.object) });
      const answer = hook.admit(review({ uid: "u-t" }));
      assert.equal(answer instanceof Promise, tc.promise);
      const res = await answer;
      assert.equal(res.outcome, tc.outcome);
      assert.equal(res.review.response?.uid, "u-t");
      assert.equal(res.review.response?.allowed, true);
    });
  }
});

describe("validatingWebhook", () => {
  const gpuCap = validatingWebhook({
    name: "gpu-cap",
    guard: podGuard(["CREATE"]),
    validate: (req) => {
      const containers = ((req.object.spec as KubeObject).containers ?? []) as Array<{ resources?: { limits?: Record<string, string> } }>;
      const violations = containers.flatMap((c, i) => {
        const n = Number(c.resources?.limits?.["nvidia.com/gpu"] ?? 0);
        return n > 8
          ? [{ rule: "container-gpus", field: `spec.containers[${i}].resources.limits[nvidia.com/gpu]`, message: `${n} exceeds the per-container limit of 8` }]
          : [];
      });
      return { violations, warnings: violations.length === 0 ? [] : ["see https://example.test/limits"] };
    },
  });
  const bigPod = pod({
    spec: {
      containers: [
        { name: "a", resources: { limits: { "nvidia.com/gpu": "16" } } },
        { name: "b", resources: { limits: { "nvidia.com/gpu": "2" } } },
        { name: "c", resources: { limits: { "nvidia.com/gpu": "9" } } },
      ],
    },
  });

  it("no violations → allowed", async () => {
    const res = await gpuCap.admit(review());
    assert.equal(res.outcome, "allowed");
    assert.deepEqual(res.review.response, { uid: res.request.uid, allowed: true });
  });

  it("violations → every one of them, 403 with causes, rules for metrics", async () => {
    const res = await gpuCap.admit(review({ object: bigPod }));
    assert.equal(res.outcome, "denied");
    assert.deepEqual(res.deniedRules, ["container-gpus"]);
    const status = res.review.response?.status;
    assert.equal(status?.code, 403);
    assert.deepEqual(
      status?.details?.causes?.map((c) => c.field),
      ["spec.containers[0].resources.limits[nvidia.com/gpu]", "spec.containers[2].resources.limits[nvidia.com/gpu]"],
    );
    assert.match(status?.message ?? "", /^2 policy violations: spec\.containers\[0\]/);
    assert.deepEqual(res.review.response?.warnings, ["see https://example.test/limits"]);
    assert.equal(res.review.response?.patch, undefined, "a validating webhook never returns a patch");
  });

  it("a rule that throws → denied with the error (fail closed)", async () => {
    const broken = validatingWebhook({
      name: "broken",
      guard: () => undefined,
      validate: async () => {
        throw new TypeError("cannot read properties of undefined");
      },
    });
    const res = await broken.admit(review({ uid: "u-2" }));
    assert.equal(res.outcome, "error");
    assert.equal(res.review.response?.allowed, false);
    assert.equal(res.review.response?.uid, "u-2");
    assert.equal(res.review.response?.status?.code, 500);
    assert.equal(res.review.response?.status?.message, "quartermaster: validation failed: cannot read properties of undefined");
  });
});

describe("jobGuard", () => {
  const guard = jobGuard([{ group: "kubeflow.org", kind: "TFJob" }], ["CREATE", "UPDATE"]);
  const tfjob = { kind: { group: "kubeflow.org", version: "v1", kind: "TFJob" }, resource: { group: "kubeflow.org", version: "v1", resource: "tfjobs" } };
  const cases: Array<{ name: string; req: Partial<AdmissionRequest>; want: string | undefined }> = [
    { name: "TFJob CREATE → handled", req: { ...tfjob }, want: undefined },
    { name: "TFJob UPDATE → handled", req: { ...tfjob, operation: "UPDATE" }, want: undefined },
    { name: "TFJob status → skipped", req: { ...tfjob, subResource: "status" }, want: "subresource status is not handled" },
    { name: "TFJob DELETE → skipped", req: { ...tfjob, operation: "DELETE" }, want: "operation DELETE is not handled" },
    { name: "Pod → skipped", req: {}, want: "kind /Pod is not a configured job kind" },
  ];
  for (const tc of cases) it(tc.name, () => assert.equal(guard(review(tc.req).request as AdmissionRequest), tc.want));
});
