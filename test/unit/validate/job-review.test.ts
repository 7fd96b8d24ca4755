/**
 * The decisions of `/validate/jobs` on training jobs as pure functions (src/validate/job-review.ts, issue 50), called
 * with a review and what was read, no webhook, no reader: here, which pod specs a review's DRA claims are read from
 * and where each is (`claimSources`). test/unit/validate/dra-unknown.test.ts and trainjob.test.ts drive the same
 * decisions through the webhook.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { claimSources, type ReviewedJob } from "../../../src/validate/job-review.js";
import { kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";
import { trainJob, upstream } from "../../fixtures/trainer-v2.js";

const PYTORCH = kindOf("PyTorchJob");
const TJ = kindOf("TrainJob");

/** A pod spec naming one claim, from the ResourceClaimTemplate `template`. */
const claiming = (template: string) => ({
  containers: [{ name: "pytorch", image: "img", resources: { claims: [{ name: "gpus" }] } }],
  resourceClaims: [{ name: "gpus", resourceClaimTemplateName: template }],
});

/** A PyTorchJob whose replica types each name a claim: type → its claim's template. */
function pytorchJob(claims: Record<string, string>): KubeObject {
  const replicas = Object.entries(claims).map(([type, template]) => [type, { replicas: 1, template: { spec: claiming(template) } }]);
  return deepFreeze({
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "train", namespace: "team-a" },
    spec: { pytorchReplicaSpecs: Object.fromEntries(replicas) },
  });
}

/** The upstream deepspeed-distributed runtime, each replicated Job's pods naming a claim `rt-<its name>`. */
function claimingRuntime(): KubeObject {
  const r = structuredClone(upstream("deepspeed_distributed.yaml")) as {
    spec: { template: { spec: { replicatedJobs: Array<{ name: string; template: { spec: { template: { spec: Record<string, unknown> } } } }> } } };
  };
  for (const j of r.spec.template.spec.replicatedJobs)
    j.template.spec.template.spec.resourceClaims = [{ name: "gpus", resourceClaimTemplateName: `rt-${j.name}` }];
  return deepFreeze(r as unknown as KubeObject);
}

/** A spec as the claims it names (their templates), `-` for a spec that names none, `(none)` for a missing one. */
const named = (spec: V1PodSpec | undefined): string =>
  spec === undefined ? "(none)" : (spec.resourceClaims ?? []).map((c) => c.resourceClaimTemplateName).join(",") || "-";

const RUNTIME_JOBS = "(ClusterTrainingRuntime deepspeed-distributed).spec.template.spec.replicatedJobs";
const create = (object: KubeObject): ReviewedJob => ({ operation: "CREATE", object });
const update = (oldObject: KubeObject, object: KubeObject): ReviewedJob => ({ operation: "UPDATE", object, oldObject });

describe("claimSources: which pod specs a job's review reads its claims from, and where each is", () => {
  const cases: Array<{ name: string; review: ReviewedJob; kind: typeof TJ; runtime?: KubeObject; claims: string[]; fields: string[] }> = [
    {
      name: "PyTorchJob CREATE: its replica templates, in order",
      review: create(pytorchJob({ Master: "m", Worker: "w" })),
      kind: PYTORCH,
      claims: ["m", "w"],
      fields: ["spec.pytorchReplicaSpecs.Master.template.spec", "spec.pytorchReplicaSpecs.Worker.template.spec"],
    },
    {
      name: "PyTorchJob UPDATE: the new object's templates, then the old object's",
      review: update(pytorchJob({ Master: "old-m" }), pytorchJob({ Master: "m", Worker: "w" })),
      kind: PYTORCH,
      claims: ["m", "w", "old-m"],
      fields: [
        "spec.pytorchReplicaSpecs.Master.template.spec",
        "spec.pytorchReplicaSpecs.Worker.template.spec",
        "spec.pytorchReplicaSpecs.Master.template.spec",
      ],
    },
    {
      name: "a v1 kind never reads a runtime's templates, even if given one",
      review: create(pytorchJob({ Master: "m" })),
      kind: PYTORCH,
      runtime: claimingRuntime(),
      claims: ["m"],
      fields: ["spec.pytorchReplicaSpecs.Master.template.spec"],
    },
    {
      name: "TrainJob CREATE with its runtime: its own part, then each pod template Trainer makes of it and the runtime",
      review: create(trainJob("t", { numNodes: 4 })),
      kind: TJ,
      runtime: claimingRuntime(),
      claims: ["-", "rt-node", "rt-launcher"],
      fields: ["spec.trainer.spec", `${RUNTIME_JOBS}[0].template.spec.template.spec`, `${RUNTIME_JOBS}[1].template.spec.template.spec`],
    },
    {
      name: "TrainJob UPDATE with its runtime: both objects' own parts, then the runtime's pods of the new object only",
      review: update(trainJob("t", { numNodes: 2 }), trainJob("t", { numNodes: 4 })),
      kind: TJ,
      runtime: claimingRuntime(),
      claims: ["-", "-", "rt-node", "rt-launcher"],
      fields: ["spec.trainer.spec", "spec.trainer.spec", `${RUNTIME_JOBS}[0].template.spec.template.spec`, `${RUNTIME_JOBS}[1].template.spec.template.spec`],
    },
    {
      name: "TrainJob with runtime patches and its runtime: each patched template at spec.runtimePatches, before the runtime's",
      review: create(upstream("02-runtime-patches.yaml")),
      kind: TJ,
      runtime: claimingRuntime(),
      claims: ["-", "-", "rt-node", "rt-launcher"],
      fields: ["spec.trainer.spec", "spec.runtimePatches", `${RUNTIME_JOBS}[0].template.spec.template.spec`, `${RUNTIME_JOBS}[1].template.spec.template.spec`],
    },
    {
      name: "TrainJob without its runtime (not read, onJobLookupFailure: warn): its own part alone",
      review: create(trainJob("t", { numNodes: 4 })),
      kind: TJ,
      claims: ["-"],
      fields: ["spec.trainer.spec"],
    },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const { specs, fields } = claimSources(tc.review, tc.kind, tc.runtime);
      assert.deepEqual(specs.map(named), tc.claims);
      assert.deepEqual(fields, tc.fields);
    });
});
