/**
 * Property-based: generated pods (fast-check) through the mutating webhook. For every pod, the patch
 * applies to the raw request object, the result is a valid Pod (kubernetes-models' schema), and
 * mutating the result again yields no patch.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Pod as PodModel } from "kubernetes-models/v1/Pod";
import { applyPatch } from "../../src/admission/patch.js";
import type { KubeObject } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import { createWebhooks } from "../../webhooks/index.js";
import { capturingLogger } from "../fixtures/https.js";
import { fakeJobReader, job } from "../fixtures/jobs.js";
import { ALL_MUTATIONS } from "../fixtures/policies.js";
import { deepFreeze, review } from "../fixtures/reviews.js";

const policy = checkPolicy(structuredClone(ALL_MUTATIONS), "property");
const jobs = [
  job("TFJob", "tf", "ns", { Chief: 1, Worker: 2, PS: 1 }),
  job("PyTorchJob", "pt", "ns", { Master: 1, Worker: 2 }),
  job("JAXJob", "jx", "ns", { Worker: 2 }),
];
const mutate = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(jobs), now: () => new Date() })["/mutate/pods"]!;

const quantity = fc.constantFrom("0", "1", "2", "500m", "0.5Gi", "1Gi", "1e3", "100M");
const resourceName = fc.constantFrom("cpu", "memory", "gpu", "nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "amd.com/gpu", "example.com/fpga", "ephemeral-storage");
const resourceMap = fc.dictionary(resourceName, quantity, { maxKeys: 4 });
const envVar = fc.record({ name: fc.constantFrom("TF_CONFIG", "RANK", "PYTHONUNBUFFERED", "MY_VAR"), value: fc.string({ maxLength: 8 }) });
const container = (name: fc.Arbitrary<string>) =>
  fc.record(
    {
      name,
      image: fc.constant("img"),
      env: fc.uniqueArray(envVar, { selector: (e) => e.name, maxLength: 2 }),
      resources: fc.record({ requests: resourceMap, limits: resourceMap }, { requiredKeys: [] }),
    },
    { requiredKeys: ["name", "image"] },
  );
const toleration = fc.record({
  key: fc.constantFrom("nvidia.com/gpu", "x/interruptible", "other"),
  operator: fc.constantFrom("Exists", "Equal"),
  effect: fc.constantFrom("NoSchedule", "NoExecute"),
});
const requirement = fc.record({
  key: fc.constantFrom("zone", "nvidia.com/gpu.product", "x/interruptible"),
  operator: fc.constantFrom("In", "Exists"),
  values: fc.constant(["a"]),
});
const affinity = fc.record({
  nodeAffinity: fc.record({
    requiredDuringSchedulingIgnoredDuringExecution: fc.record({
      nodeSelectorTerms: fc.array(fc.record({ matchExpressions: fc.array(requirement, { maxLength: 2 }) }), { maxLength: 2 }),
    }),
  }),
});
const owner = fc.constantFrom(
  undefined,
  { name: "tf-worker-1", kind: "TFJob", job: "tf" },
  { name: "tf-ps-0", kind: "TFJob", job: "tf" },
  { name: "pt-worker-0", kind: "PyTorchJob", job: "pt" },
  { name: "jx-worker-1", kind: "JAXJob", job: "jx" },
  { name: "missing-worker-0", kind: "TFJob", job: "missing" },
);
const annotations = fc.dictionary(
  fc.constantFrom("quartermaster.dev/accelerator", "quartermaster.dev/gpu-partition", "quartermaster.dev/interruptible", "note"),
  fc.constantFrom("A100-SXM4-40GB", "1g.5gb", "none", "true", "false", "bad value!"),
  { maxKeys: 3 },
);
const pods = fc
  .record({
    owner,
    annotations,
    labels: fc.dictionary(fc.constantFrom("app", "training.kubeflow.org/job-name"), fc.constantFrom("x", "tf"), { maxKeys: 2 }),
    containers: fc.uniqueArray(container(fc.constantFrom("tensorflow", "pytorch", "jax", "sidecar", "main")), {
      selector: (c) => c.name,
      minLength: 1,
      maxLength: 3,
    }),
    initContainers: fc.uniqueArray(container(fc.constantFrom("init-a", "init-b")), { selector: (c) => c.name, maxLength: 2 }),
    tolerations: fc.array(toleration, { maxLength: 2 }),
    affinity: fc.option(affinity, { nil: undefined }),
  })
  .map((g) => {
    const metadata: Record<string, unknown> = { name: g.owner?.name ?? "p", namespace: "ns" };
    if (Object.keys(g.annotations).length) metadata.annotations = g.annotations;
    if (Object.keys(g.labels).length) metadata.labels = g.labels;
    if (g.owner) metadata.ownerReferences = [{ apiVersion: "kubeflow.org/v1", kind: g.owner.kind, name: g.owner.job, uid: "u", controller: true }];
    const spec: Record<string, unknown> = { containers: g.containers };
    if (g.initContainers.length) spec.initContainers = g.initContainers;
    if (g.tolerations.length) spec.tolerations = g.tolerations;
    if (g.affinity) spec.affinity = g.affinity;
    return deepFreeze({ apiVersion: "v1", kind: "Pod", metadata, spec }) as KubeObject;
  });

function patchOf(res: Awaited<ReturnType<typeof mutate.admit>>): unknown[] {
  const p = res.review.response?.patch;
  return p ? (JSON.parse(Buffer.from(p, "base64").toString()) as unknown[]) : [];
}

describe("mutating webhook on generated pods", () => {
  it("patch applies, result is a valid Pod, re-mutation yields no patch (1,000 pods)", async () => {
    await fc.assert(
      fc.asyncProperty(pods, async (pod) => {
        const first = await mutate.admit(review({ object: pod, namespace: "ns" }));
        assert.notEqual(first.outcome, "error", String(first.error));
        const mutated = applyPatch(pod, patchOf(first) as never);
        new PodModel(mutated as never).validate();
        for (const w of first.review.response?.warnings ?? []) assert.ok(w.length <= 120, w);
        const again = await mutate.admit(review({ object: deepFreeze(mutated), namespace: "ns" }));
        assert.deepEqual(patchOf(again), [], "second pass changed the pod");
      }),
      { numRuns: 1000, seed: 20261122 },
    );
  });
});
