/**
 * Issue 46, the mark left: no tenant's hostile review may hold the event loop the other tenants' reviews share
 * (`npm run bench:abuse -- --only-senders`, bench/abuse-senders.ts). What a CPU profile of that bench's server
 * showed on the main thread, each pinned here by what the webhook does, not by time:
 * - a TrainJob on a runtime of 20,000 containers: the runtime was modelled (its claims found) before it was priced;
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../src/core/kube.js";
import { checkPolicy } from "../../src/policy/load.js";
import type { JobReader } from "../../src/topology/types.js";
import { createWebhooks } from "../../webhooks/index.js";
import { capturingLogger } from "../fixtures/https.js";
import { review } from "../fixtures/reviews.js";
import { trainJob, upstream } from "../fixtures/trainer-v2.js";

type Obj = Record<string, unknown>;
const NS = "team-a";
const policy = checkPolicy({ limits: { pod: { gpus: 8 }, job: { gpus: 64 } } }, "hostile-senders");

/** A ClusterTrainingRuntime `name`: upstream torch-distributed with `containers` one-GPU containers, its pod naming `claim`. */
function runtimeOf(name: string, containers: number, claim: string): KubeObject {
  const r = structuredClone(upstream("torch_distributed.yaml")) as unknown as {
    metadata: Obj;
    spec: { template: { spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: Obj } } } }> } } };
  };
  r.metadata.name = name;
  r.metadata.uid = `uid-${name}`;
  r.metadata.resourceVersion = "1";
  const spec = r.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec;
  spec.containers = Array.from({ length: containers }, (_, i) => ({ name: `c${i}`, image: "busybox", resources: { limits: { "nvidia.com/gpu": "1" } } }));
  spec.resourceClaims = [{ name: "gpus", resourceClaimName: claim }];
  return r as unknown as KubeObject;
}

/** A reader over `objects` (by kind and name), counting reads by plural (cached or fresh alike). */
function countingReader(objects: KubeObject[]): JobReader & { reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const get = (kind: ObjectKind, _ns: string, name: string): Promise<KubeObject | undefined> => {
    reads.set(kind.plural, (reads.get(kind.plural) ?? 0) + 1);
    return Promise.resolve(objects.find((o) => o.kind === kind.kind && (o.metadata as Obj).name === name));
  };
  return { reads, get, fresh: get };
}

const claimObject = (name: string): KubeObject => ({
  apiVersion: "resource.k8s.io/v1",
  kind: "ResourceClaim",
  metadata: { name, namespace: NS },
  spec: { devices: { requests: [{ name: "nic", exactly: { deviceClassName: "nic.example.com", count: 1 } }] } },
});

const onRuntime = (runtime: string): KubeObject =>
  trainJob("tj", { numNodes: 1 }, { spec: { runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: "ClusterTrainingRuntime", name: runtime } } });

describe("a TrainJob on a runtime over the cost bound is refused before the runtime is modelled or its claims read", () => {
  const cases = [
    {
      name: "2,000-container runtime: refused at spec.runtimeRef, no claim read",
      runtime: "wide",
      want: { allowed: false, field: "spec.runtimeRef", claimReads: 0 },
    },
    {
      name: "1-container runtime: its claim read (the check above is not vacuous)",
      runtime: "narrow",
      want: { allowed: true, field: undefined, claimReads: 1 },
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const reader = countingReader([
        runtimeOf("wide", 2000, "wide-claim"),
        runtimeOf("narrow", 1, "narrow-claim"),
        claimObject("wide-claim"),
        claimObject("narrow-claim"),
      ]);
      const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: reader, now: () => new Date() });
      const body = review({
        kind: { group: "trainer.kubeflow.org", version: "v1alpha1", kind: "TrainJob" },
        resource: { group: "trainer.kubeflow.org", version: "v1alpha1", resource: "trainjobs" },
        namespace: NS,
        object: onRuntime(tc.runtime),
      });
      const res = await hooks["/validate/jobs"]!.admit(body);
      const causes = res.review.response?.status?.details?.causes ?? [];
      assert.deepEqual(
        { allowed: res.review.response?.allowed, field: causes[0]?.field, claimReads: reader.reads.get("resourceclaims") ?? 0 },
        tc.want,
        JSON.stringify(res.review.response),
      );
    });
});
