/**
 * Issue 46, the mark left: no tenant's hostile review may hold the event loop the other tenants' reviews share
 * (`npm run bench:abuse -- --only-senders`, bench/abuse-senders.ts). What a CPU profile of that bench's server
 * showed on the main thread, each pinned here by what the webhook does, not by time:
 * - a TrainJob on a runtime of 20,000 containers: the runtime was modelled (its claims found) before it was priced;
 * - and read whole (1.5 MiB, parsed on the event loop) on every CREATE, to judge it as it is now: now its metadata
 *   alone is read when a copy is at hand, and the copy answered when its uid and resourceVersion are the object's
 *   (against a real kube-apiserver: test/e2e/fresh-metadata.test.ts).
 * The third, a pod naming 20,000 claims parsed again on the event loop, is pinned where large bodies are
 * (test/integration/large-body.test.ts: the claim-name bound decided from the worker's stand-in).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject, ObjectKind } from "../../../src/core/kube.js";
import { cachedJobReader, type GetObject } from "../../../src/kube/jobs.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { JobReader } from "../../../src/membership/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { review } from "../../fixtures/reviews.js";
import { trainJob, upstream } from "../../fixtures/trainer-v2.js";

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

describe("a fresh read with a copy at hand reads the metadata alone, and the object whole only when it changed", () => {
  const RUNTIME: ObjectKind = { kind: "ClusterTrainingRuntime", group: "trainer.kubeflow.org", version: "v1alpha1", plural: "clustertrainingruntimes" };
  const stored = (uid: string, rv: string): KubeObject => ({
    apiVersion: "trainer.kubeflow.org/v1alpha1",
    kind: "ClusterTrainingRuntime",
    metadata: { name: "rt", uid, resourceVersion: rv },
    spec: { big: true },
  });
  /** The apiserver: the object now (undefined: gone), reads counted whole and metadata-only. */
  function apiserver(metadataOnly: boolean) {
    const api = { now: stored("u1", "1") as KubeObject | undefined, full: 0, meta: 0 };
    const get = (() => (api.full++, Promise.resolve(api.now && structuredClone(api.now)))) as GetObject;
    if (metadataOnly)
      get.metadata = () => (
        api.meta++,
        Promise.resolve(api.now && { apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: structuredClone(api.now.metadata) })
      );
    return { api, get };
  }
  type Step = "read" | "write" | "recreate" | "delete" | "fresh" | "get";
  const cases: Array<{
    name: string;
    metadata?: boolean;
    steps: Step[];
    want: { full: number; meta: number; last: string | undefined; sameObject?: boolean };
  }> = [
    { name: "no copy: read whole", steps: ["fresh"], want: { full: 1, meta: 0, last: "u1/1" } },
    { name: "unchanged: the metadata, the copy answered", steps: ["read", "fresh", "fresh"], want: { full: 1, meta: 2, last: "u1/1", sameObject: true } },
    { name: "written since (a new resourceVersion): the metadata, then whole", steps: ["read", "write", "fresh"], want: { full: 2, meta: 1, last: "u1/2" } },
    {
      name: "deleted and made again (a new uid, the same resourceVersion): whole",
      steps: ["read", "recreate", "fresh"],
      want: { full: 2, meta: 1, last: "u2/1" },
    },
    { name: "deleted: the metadata says so", steps: ["read", "delete", "fresh"], want: { full: 1, meta: 1, last: undefined } },
    { name: "a client without metadata reads: whole every time", metadata: false, steps: ["read", "fresh", "fresh"], want: { full: 3, meta: 0, last: "u1/1" } },
    { name: "a cached get within its TTL reads nothing", steps: ["read", "get"], want: { full: 1, meta: 0, last: "u1/1", sameObject: true } },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const { api, get } = apiserver(tc.metadata ?? true);
      const reader = cachedJobReader(() => Promise.resolve(get), { ttlMs: 60_000 });
      let first: KubeObject | undefined;
      let last: KubeObject | undefined;
      for (const step of tc.steps) {
        if (step === "write") api.now = stored("u1", "2");
        else if (step === "recreate") api.now = stored("u2", "1");
        else if (step === "delete") api.now = undefined;
        else {
          last = await (step === "get" ? reader.get(RUNTIME, "", "rt") : reader.fresh!(RUNTIME, "", "rt"));
          first ??= last;
        }
      }
      const m = last?.metadata as { uid?: string; resourceVersion?: string } | undefined;
      assert.deepEqual(
        {
          full: api.full,
          meta: api.meta,
          last: m ? `${m.uid}/${m.resourceVersion}` : undefined,
          ...(tc.want.sameObject ? { sameObject: first === last } : {}),
        },
        tc.want,
      );
    });

  it("fresh reads at once share nothing in flight, yet find the copy the one before left (one whole read, then metadata)", async () => {
    const { api, get } = apiserver(true);
    const reader = cachedJobReader(() => Promise.resolve(get), { ttlMs: 60_000 });
    await reader.fresh!(RUNTIME, "", "rt");
    const all = await Promise.all(Array.from({ length: 4 }, () => reader.fresh!(RUNTIME, "", "rt")));
    assert.deepEqual({ full: api.full, meta: api.meta, same: all.every((o) => o === all[0]) }, { full: 1, meta: 4, same: true });
  });
});
