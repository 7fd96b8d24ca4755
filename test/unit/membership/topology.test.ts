import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import { cachedJobReader } from "../../../src/kube/jobs.js";
import { defaultPolicy, checkPolicy } from "../../../src/policy/load.js";
import { lookupTopology } from "../../../src/membership/lookup.js";
import { jobRef, replicaOf } from "../../../src/membership/resolve.js";
import { fakeJobReader, job, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const policy = defaultPolicy();
const mnist = job("TFJob", "mnist", "team-a", { Chief: 1, Worker: 2, PS: 1 });
const owner = { apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: "uid-mnist", controller: true };
const pod = (o: { name?: string; labels?: Record<string, string>; owners?: unknown[] } = {}): V1Pod =>
  deepFreeze({
    metadata: { name: o.name ?? "mnist-worker-1", namespace: "team-a", labels: o.labels, ownerReferences: o.owners as never },
    spec: { containers: [] },
  });

describe("jobRef", () => {
  it("controller ownerReference of a configured kind → that kind only", () => {
    assert.deepEqual(jobRef(pod({ owners: [owner] }), "team-a", policy), {
      candidates: [kindOf("TFJob")],
      namespace: "team-a",
      name: "mnist",
      via: "ownerReference",
      uid: "uid-mnist",
    });
  });
  it("a controller of another kind (a ReplicaSet) → none, even with a job-name label", () => {
    const rs = { apiVersion: "apps/v1", kind: "ReplicaSet", name: "x", uid: "u", controller: true };
    assert.equal(jobRef(pod({ owners: [rs], labels: { "training.kubeflow.org/job-name": "mnist" } }), "team-a", policy), undefined);
  });
  it("no owner, job-name and operator-name labels → the operator's kind", () => {
    const r = jobRef(
      pod({ labels: { "training.kubeflow.org/job-name": "pt", "training.kubeflow.org/operator-name": "pytorchjob-controller" } }),
      "team-a",
      policy,
    );
    assert.deepEqual(
      r?.candidates.map((k) => k.kind),
      ["PyTorchJob"],
    );
  });
  it("no owner, job-name label only → every configured kind", () => {
    assert.equal(jobRef(pod({ labels: { "training.kubeflow.org/job-name": "x" } }), "team-a", policy)?.candidates.length, 7);
  });
  it("neither → none", () => assert.equal(jobRef(pod(), "team-a", policy), undefined));
});

describe("replicaOf", () => {
  const cases: Array<[string, V1Pod, unknown]> = [
    [
      "labels",
      pod({ name: "whatever", labels: { "training.kubeflow.org/replica-type": "ps", "training.kubeflow.org/replica-index": "0" } }),
      { replicaType: "PS", index: 0 },
    ],
    ["name <job>-<type>-<index>", pod({ name: "mnist-worker-1" }), { replicaType: "Worker", index: 1 }],
    ["index beyond replicas", pod({ name: "mnist-worker-2" }), { problem: "replica index 2 is beyond the 2 Worker replicas" }],
    ["unknown type", pod({ name: "mnist-evaluator-0" }), { problem: "the job has no replica type evaluator" }],
    ["unrecognisable name", pod({ name: "random" }), { problem: "the pod has no replica-type/replica-index labels and its name is not <job>-<type>-<index>" }],
  ];
  for (const [name, p, want] of cases) it(`${name} → ${JSON.stringify(want)}`, () => assert.deepEqual(replicaOf(p, mnist, kindOf("TFJob")), want));
});

describe("lookupTopology", () => {
  it("found through the owner → topology", async () => {
    const r = await lookupTopology(pod({ owners: [owner] }), "team-a", policy, fakeJobReader([mnist]));
    assert.equal(r.kind, "found");
    assert.deepEqual(r.kind === "found" && [r.topology.replicaType, r.topology.index, r.topology.kind.kind], ["Worker", 1, "TFJob"]);
  });
  it("not a training pod → none, and no read", async () => {
    const reader = fakeJobReader([mnist]);
    assert.deepEqual(await lookupTopology(pod(), "team-a", policy, reader), { kind: "none" });
    assert.equal(reader.reads, 0);
  });
  it("job missing → failed, naming it", async () => {
    assert.deepEqual(await lookupTopology(pod({ owners: [owner] }), "team-a", policy, fakeJobReader()), {
      kind: "failed",
      reason: "job team-a/mnist (TFJob) not found",
    });
  });
  it("apiserver error → failed with the error", async () => {
    const r = await lookupTopology(pod({ owners: [owner] }), "team-a", policy, { get: async () => Promise.reject(new Error("connect ECONNREFUSED")) });
    assert.deepEqual(r, { kind: "failed", reason: "reading job team-a/mnist failed: connect ECONNREFUSED" });
  });
  it("a slow apiserver → failed at the lookup timeout, well inside the webhook's", async () => {
    const fast = checkPolicy({ clusterSpec: { jobLookupTimeoutMs: 100 } }, "t");
    const started = performance.now();
    const r = await lookupTopology(pod({ owners: [owner] }), "team-a", fast, { get: () => new Promise(() => undefined) });
    const took = performance.now() - started;
    assert.deepEqual(r, { kind: "failed", reason: "reading job team-a/mnist timed out after 100 ms" });
    assert.ok(took >= 90 && took < 1000, `took ${took} ms`);
  });

  describe("a job deleted and made again under its name: the pod's controller's uid, not the cached copy's", () => {
    const made = (uid: string, workers: number) => ({
      ...job("TFJob", "mnist", "team-a", { Chief: 1, Worker: workers }),
      metadata: { name: "mnist", namespace: "team-a", uid },
    });
    const worker5 = (uid: string) => pod({ name: "mnist-worker-5", owners: [{ ...owner, uid }] });
    /** A cached reader over an apiserver answering `answers` in turn (the last one from then on), `warm` of them read first. */
    async function readerOver(answers: object[], warm: number) {
      const asked: string[] = [];
      const reader = cachedJobReader(async () => async () => (asked.push("get"), answers[Math.min(asked.length, answers.length) - 1] as never), {
        ttlMs: 5000,
      });
      for (let i = 0; i < warm; i++) await reader.get(kindOf("TFJob"), "team-a", "mnist");
      return { reader, asked };
    }
    /** By default the pod is the new job's (uid `new`), gets its worker 5, and the job is read twice. */
    const cases: Array<{ name: string; answers: object[]; warm: number; podUid?: string; want?: RegExp | [string, number] }> = [
      {
        name: "cached: the old job of 2 workers; the pod's: the new one of 8 → read fresh, the new one's worker 5",
        answers: [made("old", 2), made("new", 8)],
        warm: 1,
      },
      {
        name: "not cached; a read through the cache answers the old job (a read begun before): read again fresh",
        answers: [made("old", 2), made("new", 8)],
        warm: 0,
      },
      {
        name: "cached: the name's absence (read between the delete and the create) → read fresh, the new one's worker 5",
        answers: [undefined as never, made("new", 8)],
        warm: 1,
      },
      {
        name: "a pod of a job that is gone (another of its name cached and read fresh): failed, naming both uids",
        answers: [made("new", 8)],
        warm: 1,
        podUid: "old",
        want: /TFJob team-a\/mnist is not the pod's controller \(uid new, the pod's ownerReference old\): that job is gone/,
      },
    ];
    for (const tc of cases)
      it(tc.name, async () => {
        const { reader, asked } = await readerOver(tc.answers, tc.warm);
        const want = tc.want ?? ["Worker", 5];
        const r = await lookupTopology(worker5(tc.podUid ?? "new"), "team-a", policy, reader);
        if (Array.isArray(want)) assert.deepEqual(r.kind === "found" ? [r.topology.replicaType, r.topology.index] : r, want);
        else assert.match(r.kind === "failed" ? r.reason : JSON.stringify(r), want);
        assert.equal(asked.length, 2, "the job read twice: through the cache, then fresh");
      });
    it("the cached copy of the pod's own uid: answered from the cache at once, nothing read", async () => {
      const { reader, asked } = await readerOver([made("same", 8), made("new", 8)], 1);
      const r = lookupTopology(worker5("same"), "team-a", policy, reader);
      assert.ok(!(r instanceof Promise), "answered at once");
      assert.deepEqual(r.kind === "found" && [r.topology.replicaType, r.topology.index], ["Worker", 5]);
      assert.deepEqual(asked, ["get"]);
    });
  });
});

describe("cachedJobReader", () => {
  const kind = kindOf("TFJob");
  it("concurrent reads of one job share one request; the cache expires after its TTL", async () => {
    let t = 0;
    let calls = 0;
    const reader = cachedJobReader(
      async () => async () => {
        calls++;
        return mnist;
      },
      // The TTL alone: refresh-ahead off (it is test/unit/kube/refresh-ahead.test.ts's).
      { ttlMs: 1000, refreshAfterMs: 1000, now: () => t },
    );
    const [a, b] = await Promise.all([reader.get(kind, "team-a", "mnist"), reader.get(kind, "team-a", "mnist")]);
    assert.equal(a, mnist);
    assert.equal(b, mnist);
    assert.equal(calls, 1);
    t = 999;
    await reader.get(kind, "team-a", "mnist");
    assert.equal(calls, 1);
    t = 1000;
    await reader.get(kind, "team-a", "mnist");
    assert.equal(calls, 2);
  });
  it("failures are not cached", async () => {
    let calls = 0;
    const reader = cachedJobReader(
      async () => async () => {
        calls++;
        if (calls === 1) throw new Error("boom");
        return mnist;
      },
      { ttlMs: 60_000 },
    );
    await assert.rejects(reader.get(kind, "team-a", "mnist"), /boom/);
    assert.equal(await reader.get(kind, "team-a", "mnist"), mnist);
  });
  it("a client that fails to load is retried on the next read", async () => {
    let loads = 0;
    const reader = cachedJobReader(
      async () => {
        loads++;
        if (loads === 1) throw new Error("no kubeconfig");
        return async () => mnist;
      },
      { ttlMs: 0 },
    );
    await reader.warm();
    assert.equal(await reader.get(kind, "team-a", "mnist"), mnist);
    assert.equal(loads, 2);
  });
  it("the cache is bounded", async () => {
    let calls = 0;
    const reader = cachedJobReader(
      async () => async () => {
        calls++;
        return mnist;
      },
      { ttlMs: 60_000, maxEntries: 2 },
    );
    for (const n of ["a", "b", "c", "a"]) await reader.get(kind, "ns", n);
    assert.equal(calls, 4, "a was evicted when c came in");
  });
});
