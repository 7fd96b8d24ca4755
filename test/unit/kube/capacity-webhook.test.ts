/**
 * The job validating webhook with the device ledger's capacity: refused when a job asks for more GPUs of a
 * kind than the whole cluster has, allowed within it, and a warning (not a refusal) while there is no ledger.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import type { CapacitySource } from "../../../src/validate/job.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { fakeJobReader, job } from "../../fixtures/jobs.js";
import { review } from "../../fixtures/reviews.js";

const gpuJob = (gpusPerReplica: number): KubeObject => {
  const j = structuredClone(job("PyTorchJob", "llm", "team-a", { Master: 1, Worker: 3 })) as any;
  for (const t of ["Master", "Worker"])
    j.spec.pytorchReplicaSpecs[t].template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": String(gpusPerReplica) } };
  return j;
};

const jobReview = (object: KubeObject) =>
  review({
    kind: { group: "kubeflow.org", version: "v1", kind: "PyTorchJob" },
    resource: { group: "kubeflow.org", version: "v1", resource: "pytorchjobs" },
    object,
  });

const ledgerOf = (gpus: number | undefined): CapacitySource => ({
  current: () => (gpus === undefined ? undefined : { total: (r) => (r === "nvidia.com/gpu" ? gpus : undefined) }),
});

describe("/validate/jobs with the device ledger's capacity", () => {
  const cases: Array<[string, number, number | undefined, boolean, RegExp | undefined]> = [
    ["4 replicas × 8 GPUs on a 24-GPU cluster → refused", 8, 24, false, /asks for 32 nvidia.com\/gpu but the whole cluster has 24/],
    ["4 × 8 on a 32-GPU cluster → allowed", 8, 32, true, undefined],
    ["no ledger yet → allowed with a warning", 8, undefined, true, /no GPU device ledger yet/],
  ];
  for (const [name, per, cluster, allowed, text] of cases) {
    it(name, async () => {
      const hooks = createWebhooks({ policy: defaultPolicy(), log: silentLogger(), jobs: fakeJobReader(), capacity: ledgerOf(cluster), now: () => new Date() });
      const { review: out } = await hooks["/validate/jobs"]!.admit(jobReview(gpuJob(per)));
      const response = out.response as { allowed: boolean; status?: { message?: string }; warnings?: string[] };
      assert.equal(response.allowed, allowed, JSON.stringify(response));
      const said = `${response.status?.message ?? ""} ${(response.warnings ?? []).join(" ")}`;
      if (text) assert.match(said, text);
    });
  }
});
