/**
 * Kueue's objects as the resident reconciler caches them (src/run/blocked-kueue.ts, issue 49): the verdict over the
 * trimmed Workload and queues is the verdict over the whole ones, for every reason Kueue decides; a Workload
 * outside the scope is a stub the verdict never reads; the trimmed size does not grow with the pod templates.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as k8s from "@kubernetes/client-node";
import { pino } from "pino";
import type { ListPage } from "../../../src/kube/informer.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { cachedEvidence, nodeEntriesFromCaches, type CachedJob } from "../../../src/explain/cached.js";
import { knownKinds } from "../../../src/explain/kinds.js";
import { explainJob } from "../../../src/explain/verdict.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { slimQueue, slimWorkload, startKueueCaches } from "../../../src/run/blocked-kueue.js";
import { NOW, ago, clusterQueue, job, localQueue, node, workload } from "../../fixtures/explain.js";

const policy = defaultPolicy();
const pytorch = knownKinds(policy).find((k) => k.kind === "PyTorchJob")!;
const settings = { gpu: policy.gpu, acceleratorLabel: policy.accelerator.nodeLabel, graceSeconds: 120 };
const queued = job({ suspend: true, queue: "gpu" });
const waiting = (message: string) => [{ type: "QuotaReserved", status: "False", reason: "Pending", message, lastTransitionTime: ago(600) }];
const evicted = [
  { type: "QuotaReserved", status: "True", reason: "QuotaReserved", lastTransitionTime: ago(900) },
  { type: "Admitted", status: "False", reason: "NoChecks", lastTransitionTime: ago(60) },
  { type: "Evicted", status: "True", reason: "Deactivated", message: "The workload is deactivated", lastTransitionTime: ago(60) },
];

function verdict(kueue: CachedJob["kueue"], theJob: KubeObject = queued) {
  const nodes = [node("gpu-a")];
  const ledger = { generatedAt: NOW.toISOString(), nodes: nodeEntriesFromCaches(nodes, [], policy.gpu) };
  return explainJob(cachedEvidence({ kind: pytorch, job: theJob, pods: [], ...(kueue ? { kueue } : {}) }, nodes, ledger, settings), NOW);
}

const all = () => true;
const trimmed = (o: { workload?: KubeObject; localQueue?: KubeObject; clusterQueue?: KubeObject }): NonNullable<CachedJob["kueue"]> => ({
  kueueServed: true,
  ...(o.workload ? { workload: slimWorkload(o.workload, policy.gpu, all) } : {}),
  ...(o.localQueue ? { localQueue: slimQueue(o.localQueue) } : {}),
  ...(o.clusterQueue ? { clusterQueue: slimQueue(o.clusterQueue) } : {}),
});

const CASES: Array<{ name: string; objects: { workload?: KubeObject; localQueue?: KubeObject; clusterQueue?: KubeObject }; job?: KubeObject; reason: string }> =
  [
    { name: "no LocalQueue of that name", objects: {}, reason: "inadmissible" },
    { name: "a LocalQueue whose ClusterQueue does not exist", objects: { localQueue }, reason: "inadmissible" },
    {
      name: "asks 16 GPUs of a ClusterQueue of 8 outside any cohort",
      objects: { workload: workload({ conditions: waiting("insufficient unused quota") }), localQueue, clusterQueue: clusterQueue(8, 0) },
      reason: "inadmissible",
    },
    {
      name: "deactivated, quota released",
      objects: {
        workload: workload({ active: false, conditions: [...waiting("The workload has no reservation"), evicted[2]!], requeue: { count: 4 } }),
        localQueue,
        clusterQueue: clusterQueue(16, 0),
      },
      reason: "inadmissible",
    },
    {
      name: "waiting for quota in a full ClusterQueue",
      objects: { workload: workload({ conditions: waiting("insufficient unused quota") }), localQueue, clusterQueue: clusterQueue(16, 16) },
      reason: "queued",
    },
    {
      name: "evicted with its quota still reserved and no pods",
      objects: { workload: workload({ active: false, conditions: evicted, admission: true }), localQueue, clusterQueue: clusterQueue(16, 16) },
      reason: "phantom-reservation",
    },
    {
      name: "no Workload yet",
      objects: { localQueue, clusterQueue: clusterQueue(16, 0) },
      reason: "queued",
    },
  ];

describe("the reconciler's verdict over Kueue's cached objects", () => {
  for (const c of CASES)
    it(`${c.name}: ${c.reason}, as over the whole objects`, () => {
      const whole = verdict({ kueueServed: true, ...c.objects }, c.job);
      const slim = verdict(trimmed(c.objects), c.job);
      assert.equal(whole.reason, c.reason, JSON.stringify(whole));
      assert.deepEqual(slim, whole);
    });

  it("without Kueue's caches (not synced, or a stub): queued, never inadmissible", () => {
    assert.equal(verdict(undefined).reason, "queued");
    assert.equal(verdict({ kueueServed: true }).reason, "inadmissible", "with the caches, no LocalQueue is inadmissible");
  });
});

describe("slimWorkload", () => {
  const wide = (containers: number): KubeObject => {
    const w = workload({ conditions: [{ type: "QuotaReserved", status: "False", reason: "Pending", message: "x".repeat(40_000) }] });
    const spec = w.spec as { podSets: Array<Record<string, unknown>> };
    spec.podSets = Array.from({ length: 12 }, (_, i) => ({
      name: `set-${i}`,
      count: 2,
      template: {
        spec: {
          containers: Array.from({ length: containers }, (_, j) => ({
            name: `c-${j}`,
            image: "trainer:1",
            env: [{ name: "A", value: "y".repeat(100) }],
            resources: { limits: { "nvidia.com/gpu": j === 0 ? "4" : "0", cpu: "1" } },
          })),
        },
      },
    }));
    return w;
  };

  it("keeps each pod set's count and GPUs, at most 8 sets, whatever the templates hold", () => {
    const small = JSON.stringify(slimWorkload(wide(1), policy.gpu, all)).length;
    const big = slimWorkload(wide(2000), policy.gpu, all);
    assert.equal(JSON.stringify(big).length, small, "2,000 containers a pod set cost what one does");
    assert.ok(small < 4096, `${small} bytes`);
    const sets = (
      big.spec as { podSets: Array<{ count: number; template: { spec: { containers: Array<{ resources: { requests: Record<string, number> } }> } } }> }
    ).podSets;
    assert.equal(sets.length, 8);
    assert.deepEqual(sets[0]!.template.spec.containers[0]!.resources.requests, { "nvidia.com/gpu": 4 });
    assert.equal(sets[0]!.count, 2);
  });

  it("cuts a condition's message at 1 KiB", () => {
    const c = (slimWorkload(wide(1), policy.gpu, all).status as { conditions: Array<{ message: string }> }).conditions[0]!.message;
    assert.equal(c.length, 1025);
  });

  it("outside the scope: its name, uid and controller only", () => {
    const w = { ...workload({ conditions: [] }), metadata: { name: "w", namespace: "other", uid: "u", ownerReferences: [{ uid: "j", controller: true }] } };
    assert.deepEqual(
      slimWorkload(w, policy.gpu, (ns) => ns !== "other"),
      {
        apiVersion: "kueue.x-k8s.io/v1beta1",
        kind: "Workload",
        metadata: { name: "w", namespace: "other", uid: "u", ownerReferences: [{ uid: "j", controller: true }] },
      },
    );
  });
});

describe("startKueueCaches: a Workload cached as a stub", () => {
  /** The three caches over a stand-in LIST by path and a watch that says nothing; which paths were read. */
  function caches(byPath: Record<string, object[]>, optedIn: Set<string>) {
    class QuietWatch extends k8s.Watch {
      override watch(): Promise<AbortController> {
        return Promise.resolve(new AbortController());
      }
    }
    const read: string[] = [];
    const started = startKueueCaches({
      k8s: { ...k8s, Watch: QuietWatch },
      kc: new k8s.KubeConfig(),
      plainPage: (path) => async () => {
        read.push(path);
        return { metadata: { resourceVersion: "10" }, items: structuredClone(byPath[path] ?? []) } as ListPage;
      },
      log: pino({ level: "silent" }),
      gpu: policy.gpu,
      inScope: (ns) => optedIn.has(ns),
    });
    return { started, read };
  }
  const base = workload({ conditions: waiting("couldn't assign flavors to pod set worker: insufficient quota") });
  const owned: KubeObject = {
    ...base,
    metadata: {
      ...(base.metadata as object),
      uid: "uid-w",
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", name: "llm", uid: "uid-llm", controller: true }],
    },
  };
  const lists = {
    "/apis/kueue.x-k8s.io/v1beta1/workloads": [owned],
    "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/workloads": [owned],
    "/apis/kueue.x-k8s.io/v1beta1/localqueues": [localQueue],
    "/apis/kueue.x-k8s.io/v1beta1/clusterqueues": [clusterQueue(8, 8)],
  };
  const until = async (ok: () => boolean, what: string): Promise<void> => {
    for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(ok(), what);
  };

  it("a job naming its queue by the older annotation, no Workload yet: its LocalQueue is found, so queued, not inadmissible", async () => {
    const { started } = caches({ ...lists, "/apis/kueue.x-k8s.io/v1beta1/workloads": [] }, new Set(["team-a"]));
    const annotated: KubeObject = { ...queued, metadata: { ...(queued.metadata as object), labels: {}, annotations: { "kueue.x-k8s.io/queue-name": "gpu" } } };
    try {
      await until(() => started.view(annotated) !== undefined, "the three caches sync");
      assert.deepEqual(started.view(annotated)!.localQueue, slimQueue(localQueue));
      assert.equal(verdict(started.view(annotated), annotated).reason, "queued");
    } finally {
      await started.stop();
    }
  });

  it("is unread until its namespace opts in; then read again once, and the verdict sees it whole", async () => {
    const optedIn = new Set<string>();
    const { started, read } = caches(lists, optedIn);
    try {
      const unowned = { ...queued, metadata: { ...(queued.metadata as object), uid: "uid-none" } };
      await until(() => started.view(unowned) !== undefined, "the three caches sync");
      // Cached while its namespace had not opted in: a stub, which the verdict must not read as "no Workload".
      assert.equal(started.view(queued), undefined, "a stub is not a Workload the verdict may judge");
      await new Promise((r) => setTimeout(r, 20));
      assert.equal(started.view(queued), undefined, "read again, still out of scope: still a stub");
      optedIn.add("team-a");
      assert.equal(started.view(queued), undefined, "opted in: read again");
      assert.equal(started.view(queued), undefined, "still being read");
      await until(() => started.view(queued) !== undefined, "read again");
      assert.equal(read.filter((p) => p.includes("/namespaces/team-a/workloads")).length, 2, "one namespaced LIST per opt-in seen, not one per view");
      assert.deepEqual(started.view(queued)!.workload, slimWorkload(owned, policy.gpu, all));
      assert.equal(verdict(started.view(queued)).reason, "inadmissible");
    } finally {
      await started.stop();
    }
  });
});
