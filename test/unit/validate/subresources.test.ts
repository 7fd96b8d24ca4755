/**
 * Issue 16, item 4: `/scale` of the job kinds and `pods/resize` no longer get around the limits.
 * Before: both were skipped by the guards ("subresource ... is not handled") and admitted.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AdmissionRequest } from "../../../src/admission/types.js";
import type { KubeObject } from "../../../src/core/kube.js";
import type { ClusterCapacity } from "../../../src/validate/job.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { silentLogger } from "../../../src/log.js";
import { readJob } from "../../../src/membership/lookup.js";
import type { JobReader } from "../../../src/membership/types.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { SCALE_REPLICA_TYPE, scaledField, validateScale } from "../../../src/validate/scale.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { gpuJob, scale, scaleReview, wideJob } from "../../fixtures/array-work.js";

const policy = checkPolicy({ limits: { container: { cpu: "4", memory: "16Gi" }, job: { gpus: 16, replicas: { Worker: 4 } } } }, "strict");
const ctx = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };

const capacityOf = (n: number): ClusterCapacity => ({ total: (r) => (r === "nvidia.com/gpu" ? n : undefined) });
type Want = Array<[rule: string, field: string, message: string]>;
const got = (f: { violations: Array<{ rule: string; field: string; message: string }> }): Want => f.violations.map((v) => [v.rule, v.field, v.message]);

describe("validateScale", () => {
  const W = "spec.pytorchReplicaSpecs.Worker.replicas";
  const cases: Array<{ name: string; job: KubeObject; kind?: string; replicas: unknown; capacity?: ClusterCapacity; want: Want }> = [
    { name: "2 → 3 workers of 2 GPUs (8 GPUs in all)", job: gpuJob(2, 2), replicas: 3, want: [] },
    { name: "scale to zero", job: gpuJob(2, 2), replicas: 0, want: [] },
    {
      name: "2 → 6 workers: over the Worker cap",
      job: gpuJob(2, 2),
      replicas: 6,
      want: [["job-replicas", "spec.replicas", `6 replicas at ${W}: 6 exceeds the limit of 4 Worker replicas`]],
    },
    {
      name: "2 → 4 workers of 4 GPUs: over the job GPU limit",
      job: gpuJob(2, 4),
      replicas: 4,
      want: [["job-gpus", "spec.replicas", `4 replicas at ${W}: spec: the job requests 20 GPUs in all, over the per-job limit of 16`]],
    },
    {
      name: "over the cluster's capacity",
      job: gpuJob(1, 2),
      replicas: 4,
      capacity: capacityOf(8),
      want: [
        ["capacity", "spec.replicas", `4 replicas at ${W}: spec: the job asks for 10 nvidia.com/gpu but the whole cluster has 8; it would never be scheduled`],
      ],
    },
    { name: "a job already over the cap scaled down, still over: allowed (only what gets worse is refused)", job: gpuJob(7, 1), replicas: 5, want: [] },
    {
      name: "a job already over the cap scaled up: refused",
      job: gpuJob(5, 1),
      replicas: 6,
      want: [["job-replicas", "spec.replicas", `6 replicas at ${W}: 6 exceeds the limit of 4 Worker replicas`]],
    },
    {
      name: "PaddleJob Worker",
      job: gpuJob(2, 2, "PaddleJob", "paddleReplicaSpecs", "paddle"),
      kind: "PaddleJob",
      replicas: 9,
      want: [
        ["job-replicas", "spec.replicas", "9 replicas at spec.paddleReplicaSpecs.Worker.replicas: 9 exceeds the limit of 4 Worker replicas"],
        [
          "job-gpus",
          "spec.replicas",
          "9 replicas at spec.paddleReplicaSpecs.Worker.replicas: spec: the job requests 20 GPUs in all, over the per-job limit of 16",
        ],
      ],
    },
    { name: "JAXJob Worker", job: gpuJob(2, 2, "JAXJob", "jaxReplicaSpecs", "jax"), kind: "JAXJob", replicas: 2, want: [] },
    {
      name: "a TFJob has no upstream scale subresource",
      job: gpuJob(2, 2, "TFJob", "tfReplicaSpecs", "tensorflow"),
      kind: "TFJob",
      replicas: 3,
      want: [["job-scale", "spec.replicas", "TFJob has no scale subresource Quartermaster knows; scale it by updating the job"]],
    },
    { name: "replicas not a whole number", job: gpuJob(2, 2), replicas: "3", want: [["job-scale", "spec.replicas", '"3" is not a whole number of replicas']] },
    { name: "negative replicas", job: gpuJob(2, 2), replicas: -1, want: [["job-scale", "spec.replicas", "-1 is not a whole number of replicas"]] },
    {
      name: "a job with no Worker replica type",
      job: deepFreeze({
        apiVersion: "kubeflow.org/v1",
        kind: "PyTorchJob",
        metadata: { name: "train" },
        spec: { pytorchReplicaSpecs: { Master: { replicas: 1 } } },
      }),
      replicas: 2,
      want: [["job-scale", "spec.replicas", `the job has no Worker replica type to scale (${W})`]],
    },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const kind = kindOf(tc.kind ?? "PyTorchJob");
      assert.deepEqual(got(validateScale({ scale: scale(tc.replicas), job: tc.job, kind, ctx, ...(tc.capacity ? { capacity: tc.capacity } : {}) })), tc.want);
    });
  }
  it("the scaled fields are upstream's specReplicasPath", () => {
    assert.deepEqual(Object.keys(SCALE_REPLICA_TYPE).sort(), ["jax", "paddle", "pytorch"]);
    assert.equal(scaledField(kindOf("PyTorchJob")), "spec.pytorchReplicaSpecs.Worker.replicas");
    assert.equal(scaledField(kindOf("MXJob")), undefined);
  });
});

describe("readJob", () => {
  const kind = kindOf("PyTorchJob");
  const job = gpuJob(1, 1);
  const cases: Array<{ name: string; reader: JobReader; want: string }> = [
    { name: "cached → at once", reader: { get: () => Promise.reject(new Error("not called")), peek: () => job }, want: "found" },
    { name: "read", reader: fakeJobReader([job]), want: "found" },
    { name: "absent", reader: fakeJobReader([]), want: "missing: PyTorchJob team-a/train not found" },
    { name: "read fails", reader: { get: () => Promise.reject(new Error("forbidden")) }, want: "failed: reading PyTorchJob team-a/train failed: forbidden" },
    {
      name: "get throws",
      reader: {
        get: () => {
          throw new Error("boom");
        },
      },
      want: "failed: reading PyTorchJob team-a/train failed: boom",
    },
    { name: "times out", reader: { get: () => new Promise(() => {}) }, want: "failed: reading PyTorchJob team-a/train timed out after 20 ms" },
  ];
  for (const tc of cases) {
    it(tc.name, async () => {
      const r = await readJob({ kind, namespace: "team-a", name: "train", jobs: tc.reader, timeoutMs: 20 });
      assert.equal(r.kind === "found" ? "found" : `${r.kind}: ${r.reason}`, tc.want);
    });
  }
  it("a cached job is answered without a promise", () => {
    assert.ok(
      !(
        readJob({ kind, namespace: "team-a", name: "train", jobs: { get: () => Promise.reject(new Error("x")), peek: () => job }, timeoutMs: 20 }) instanceof
        Promise
      ),
    );
  });
});

describe("/validate/jobs: the scale subresource", () => {
  const hooks = (jobs: JobReader = fakeJobReader([gpuJob(2, 2)])) => createWebhooks({ policy, log: silentLogger(), jobs, now: () => new Date() });
  it("within the caps → allowed", async () => {
    const res = await hooks()["/validate/jobs"]!.admit(scaleReview(3));
    assert.equal(res.outcome, "allowed");
  });
  it("over the Worker cap → denied at spec.replicas", async () => {
    const res = await hooks()["/validate/jobs"]!.admit(scaleReview(6));
    assert.equal(res.outcome, "denied");
    assert.deepEqual(res.review.response?.status?.details?.causes, [
      {
        reason: "FieldValueForbidden",
        field: "spec.replicas",
        message: "6 replicas at spec.pytorchReplicaSpecs.Worker.replicas: 6 exceeds the limit of 4 Worker replicas",
      },
    ]);
  });
  it("the job cannot be found → denied (fails closed)", async () => {
    const res = await hooks(fakeJobReader([]))["/validate/jobs"]!.admit(scaleReview(3));
    assert.equal(res.outcome, "denied");
    assert.match(res.review.response!.status!.message!, /spec\.replicas: cannot check the scaling: PyTorchJob team-a\/train not found/);
  });
  it("other operations on scale, and other subresources, are skipped", async () => {
    assert.equal(
      (await hooks()["/validate/jobs"]!.admit(scaleReview(6, { operation: "CREATE" }))).skipReason,
      "operation CREATE on subresource scale is not handled",
    );
    const status = review({
      kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
      resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
      subResource: "status",
      operation: "UPDATE",
      object: gpuJob(9, 9),
    });
    assert.equal((await hooks()["/validate/jobs"]!.admit(status)).skipReason, "subresource status is not handled");
  });
  it("a stored job too large to check → denied (review-cost) without running the rules", async () => {
    const res = await hooks(fakeJobReader([{ ...wideJob(2000), metadata: { name: "train", namespace: "team-a" } }]))["/validate/jobs"]!.admit(scaleReview(3));
    assert.deepEqual(res.deniedRules, ["review-cost"]);
    assert.match(
      res.review.response!.status!.message!,
      /spec\.replicas: PyTorchJob team-a\/train: too large to check: cost at least \d+ is over the bound of 10000/,
    );
  });
  it("a scale of an unconfigured resource is skipped", async () => {
    const res = await hooks()["/validate/jobs"]!.admit(scaleReview(6, { resource: { group: "apps", version: "v1", resource: "deployments" } }));
    assert.equal(res.outcome, "skipped");
  });
});

function podWithCpu(cpu: string): KubeObject {
  return deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "team-a" },
    spec: { containers: [{ name: "main", image: "img", resources: { requests: { cpu, memory: "1Gi" }, limits: { cpu, memory: "1Gi" } } }] },
  });
}

describe("/validate/pods: in-place resize", () => {
  const hooks = createWebhooks({ policy, log: silentLogger(), jobs: fakeJobReader(), now: () => new Date() });
  const resize = (from: string, to: string, o: Partial<AdmissionRequest> = {}) =>
    review({ subResource: "resize", requestSubResource: "resize", operation: "UPDATE", name: "p", object: podWithCpu(to), oldObject: podWithCpu(from), ...o });
  const cases: Array<{ name: string; from: string; to: string; want: string[] }> = [
    { name: "2 → 3 cpu", from: "2", to: "3", want: [] },
    {
      name: "2 → 8 cpu: over the per-container limit, as on CREATE",
      from: "2",
      to: "8",
      want: ["spec.containers[0].resources.limits[cpu]: 8 exceeds the per-container limit of 4"],
    },
    { name: "8 → 6 cpu on a pod admitted before the limit: still over, but better → allowed", from: "8", to: "6", want: [] },
  ];
  for (const tc of cases) {
    it(tc.name, () => {
      const res = hooks["/validate/pods"]!.admit(resize(tc.from, tc.to));
      assert.ok(!(res instanceof Promise));
      const causes = res.review.response?.status?.details?.causes ?? [];
      assert.deepEqual(
        causes.map((c) => `${c.field}: ${c.message}`),
        tc.want,
      );
      assert.equal(res.outcome, tc.want.length ? "denied" : "allowed");
    });
  }
  it("CREATE is checked the same way (the resize message is CREATE's)", () => {
    const res = hooks["/validate/pods"]!.admit(review({ object: podWithCpu("8") })) as {
      review: { response?: { status?: { details?: { causes?: unknown[] } } } };
    };
    assert.deepEqual(res.review.response?.status?.details?.causes, [
      { reason: "FieldValueForbidden", field: "spec.containers[0].resources.limits[cpu]", message: "8 exceeds the per-container limit of 4" },
    ]);
  });
  it("pods/status and a resize that is not an UPDATE are skipped", () => {
    const status = hooks["/validate/pods"]!.admit(resize("2", "8", { subResource: "status" })) as { skipReason?: string };
    assert.equal(status.skipReason, "subresource status is not handled");
  });
});
