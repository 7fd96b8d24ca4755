/**
 * What the resident reconciler and its passes keep of a job (`src/kube/projection.ts`): a job in a namespace
 * that did not opt in is kept as its stub (name, namespace, uid), whatever its size, in the informers' caches
 * (LIST pages and watch events alike) and in a pass's snapshot; a namespace that opts in has its jobs read
 * again, one that opts out has them trimmed; and the planners decide the same from the stubs as from the jobs.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as k8s from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { scopeIndex, type NamespaceInfo } from "../../../src/core/scope.js";
import { trimmedInformer, type ListPage } from "../../../src/kube/informer.js";
import { snapshot } from "../../../src/run/pass.js";
import { isJobStub, projectJob } from "../../../src/kube/projection.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { planPass, type Snapshot } from "../../../src/reconcile/plan.js";
import { fakeCluster, gpuPod, node, nodeLease, OPTED_IN, SCOPE, snapshotOf } from "../../fixtures/cluster.js";
import { caffe2JobObject, job, kindOf } from "../../fixtures/jobs.js";

type Obj = Record<string, any>;
const MiB = 1024 * 1024;
const NOW = new Date("2026-11-22T12:00:00Z");
const policy = defaultPolicy();
/** What the stub of any job may weigh, as JSON (`src/kube/projection.ts` says so). */
const STUB_BYTES = 512;
const names = (objs: readonly { metadata?: { name?: string } }[]): string[] => objs.map((o) => o.metadata!.name!).sort();
const bytes = (o: unknown): number => Buffer.byteLength(JSON.stringify(o));

/** A job of `kind` of about `size` bytes: a large env var in its template, managedFields, a status. */
function bigJob(kind: string, name: string, namespace: string, size = MiB, rv = "1"): Obj {
  const j = structuredClone(job(kind, name, namespace, { Worker: { replicas: 2, port: 2222 } })) as Obj;
  j.metadata.resourceVersion = rv;
  j.metadata.managedFields = [{ manager: "kubectl", operation: "Update", fieldsV1: { "f:spec": {} } }];
  j.metadata.labels = { team: "x" };
  const specs = Object.values(j.spec).find((v) => v && typeof v === "object") as Obj;
  const replica = (specs.Worker ?? specs) as Obj;
  replica.template.spec.containers[0].env = [{ name: "BLOB", value: "x".repeat(size) }];
  j.status = { conditions: [{ type: "Running", status: "True" }] };
  return j;
}

const OPERATOR_KINDS = ["TFJob", "PyTorchJob", "MXJob", "XGBoostJob", "PaddleJob", "JAXJob"];

describe("a job's projection", () => {
  for (const kind of OPERATOR_KINDS) {
    it(`a 1 MiB ${kind} in a namespace that did not opt in: its stub, < ${STUB_BYTES} bytes; in one that did, the job`, () => {
      const j = bigJob(kind, "big", "other");
      assert.ok(bytes(j) > MiB);
      const stub = projectJob(j, () => false);
      assert.ok(isJobStub(stub));
      assert.ok(bytes(stub) < STUB_BYTES, `${bytes(stub)} bytes`);
      assert.deepEqual(stub.metadata, { name: "big", namespace: "other", uid: "uid-big" });
      assert.equal(JSON.stringify(stub).includes("xxxx"), false);
      const kept = projectJob(j, () => true) as Obj;
      assert.equal(isJobStub(kept), false);
      assert.deepEqual(kept.spec, j.spec);
      assert.equal(kept.metadata.managedFields, undefined);
    });
  }

  it("a stub trimmed again in scope stays a stub (what it lost must be read again)", () => {
    const stub = projectJob(bigJob("TFJob", "big", "other"), () => false);
    assert.ok(isJobStub(projectJob(stub, () => true)));
  });
});

/** A job informer over `pages`, its projection reading `optedIn`; a watch the test drives. */
function jobInformer(pages: ListPage[], namespaced: Record<string, ListPage>, optedIn: Set<string>) {
  let handler: ((phase: string, obj: object) => void) | undefined;
  class FakeWatch extends k8s.Watch {
    override watch(_path: string, _qp: Obj, cb: (phase: string, obj: object) => void): Promise<AbortController> {
      handler = cb;
      return Promise.resolve(new AbortController());
    }
  }
  let asked = 0;
  const informer = trimmedInformer({ ...k8s, Watch: FakeWatch }, new k8s.KubeConfig(), {
    path: "/apis/kubeflow.org/v1/tfjobs",
    page: async () => pages[asked++]!,
    namespacePage: async (ns) => namespaced[ns] ?? { items: [] },
    trim: (o) => projectJob(o, (ns) => optedIn.has(ns)),
  });
  return { informer, send: (phase: string, obj: object) => handler!(phase, obj) };
}

/** The largest object the cache holds of `namespace`, as JSON bytes. */
const largest = (objs: readonly object[], namespace: string): number =>
  Math.max(0, ...objs.filter((o) => (o as Obj).metadata.namespace === namespace).map(bytes));

describe("the resident reconciler's job cache", () => {
  it("never holds more than the stub of a job of a namespace that did not opt in: LIST pages and watch events", async () => {
    const optedIn = new Set(["team-a"]);
    const { informer, send } = jobInformer(
      [
        { metadata: { resourceVersion: "10", continue: "c" }, items: [bigJob("TFJob", "a1", "team-a", 1000, "5"), bigJob("TFJob", "o1", "other", MiB, "6")] },
        { metadata: { resourceVersion: "10" }, items: [bigJob("TFJob", "o2", "other", MiB, "7")] },
      ],
      {},
      optedIn,
    );
    await informer.start();
    assert.equal(informer.list().length, 3);
    send("ADDED", bigJob("TFJob", "o3", "other", MiB, "11"));
    send("MODIFIED", bigJob("TFJob", "o1", "other", 2 * MiB, "12"));
    send("ADDED", bigJob("TFJob", "s1", "kube-system", MiB, "13"));
    assert.ok(largest(informer.list(), "other") < STUB_BYTES, `${largest(informer.list(), "other")} bytes`);
    assert.ok(largest(informer.list(), "kube-system") < STUB_BYTES);
    assert.equal((informer.get("o1", "other") as Obj).metadata.resourceVersion, "12", "the stub keeps its resourceVersion (the watch resumes from it)");
    assert.equal(informer.latestResourceVersion(), "13");
    const a1 = informer.get("a1", "team-a") as Obj;
    assert.equal(a1.spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].value.length, 1000, "in scope: the job");
  });

  it("a namespace that opts in has its stubs read again (nothing deleted comes back, the watch's resourceVersion stays); one that opts out, trimmed", async () => {
    const optedIn = new Set<string>();
    const { informer, send } = jobInformer(
      [{ metadata: { resourceVersion: "10" }, items: [bigJob("TFJob", "o1", "other", MiB, "6"), bigJob("TFJob", "o2", "other", MiB, "7")] }],
      { other: { items: [bigJob("TFJob", "o1", "other", MiB, "6"), bigJob("TFJob", "o2", "other", MiB, "7")] } },
      optedIn,
    );
    await informer.start();
    send("DELETED", bigJob("TFJob", "o2", "other", 10, "8"));
    optedIn.add("other");
    const read = await informer.reread("other", isJobStub);
    assert.deepEqual(
      read.map((o) => o.metadata?.name),
      ["o1"],
    );
    assert.equal(informer.get("o2", "other"), undefined, "deleted meanwhile: not put back");
    const o1 = informer.get("o1", "other") as Obj;
    assert.equal(isJobStub(o1), false);
    assert.equal(o1.metadata.resourceVersion, "6");
    assert.equal(o1.spec.tfReplicaSpecs.Worker.template.spec.containers[0].env[0].value.length, MiB);
    assert.equal(informer.latestResourceVersion(), "8");
    optedIn.delete("other");
    informer.retrim("other");
    assert.ok(isJobStub(informer.get("o1", "other")));
    assert.equal((informer.get("o1", "other") as Obj).metadata.resourceVersion, "6");
    assert.ok(largest(informer.list(), "other") < STUB_BYTES);
  });
});

describe("a pass's snapshot", () => {
  it("keeps a job of a namespace that did not opt in as its stub, page by page", async () => {
    const c = fakeCluster({
      jobs: [
        { kind: kindOf("TFJob"), job: bigJob("TFJob", "mine", "team-a", 1000) as KubeObject },
        ...["o1", "o2", "o3"].map((n) => ({ kind: kindOf("TFJob"), job: bigJob("TFJob", n, "other") as KubeObject })),
      ],
      namespaces: [
        { name: "team-a", labels: { ...OPTED_IN } },
        { name: "other", labels: {} },
      ],
    });
    const snap = await snapshot(c, policy, "quartermaster", silentLogger());
    const others = snap.jobs.filter((j) => (j.job.metadata as Obj).namespace === "other");
    assert.equal(others.length, 3);
    for (const o of others) assert.ok(bytes(o.job) < STUB_BYTES, `${bytes(o.job)} bytes`);
    const mine = snap.jobs.find((j) => (j.job.metadata as Obj).name === "mine")!.job as Obj;
    assert.ok(mine.spec.tfReplicaSpecs);
  });
});

/** The snapshot with each job as the caches keep it, the scope decided from the snapshot's namespaces. */
function projected(s: Snapshot): Snapshot {
  const verdict = scopeIndex(SCOPE, s.namespaces);
  return { ...s, jobs: s.jobs.map((e) => ({ ...e, job: projectJob(structuredClone(e.job), (ns) => verdict(ns).inScope) as KubeObject })) };
}

const tf = (name: string, namespace: string, extra: Obj = {}): KubeObject => {
  const j = bigJob("TFJob", name, namespace, 4096) as Obj;
  return { ...j, spec: { ...j.spec, ...extra.spec }, ...(extra.status ? { status: extra.status } : {}) };
};
const finished = { conditions: [{ type: "Succeeded", status: "True" }], completionTime: "2026-11-22T11:00:00Z" };
const ttl = { runPolicy: { ttlSecondsAfterFinished: 60, cleanPodPolicy: "All" } };
const orphan = (name: string, namespace: string, job: string): KubeObject => {
  const p = gpuPod(name, { namespace, node: "gpu-1" }) as Obj;
  p.metadata.labels = { "training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0" };
  return p;
};
const owned = (name: string, namespace: string, job: string, kind = "TFJob"): KubeObject => {
  const p = orphan(name, namespace, job) as Obj;
  p.metadata.ownerReferences = [{ apiVersion: "kubeflow.org/v1", kind, name: job, uid: `uid-${job}`, controller: true }];
  p.status.phase = "Succeeded";
  return p;
};
const NAMESPACES: NamespaceInfo[] = [
  { name: "team-a", labels: { ...OPTED_IN } },
  { name: "other", labels: {} },
  { name: "kube-system", labels: { ...OPTED_IN } },
];
const caffe2 = (namespace: string): KubeObject => {
  const j = structuredClone(caffe2JobObject({ name: "c2" })) as Obj;
  j.metadata.namespace = namespace;
  return j;
};

const CASES: Array<{ name: string; jobs: Snapshot["jobs"]; pods?: KubeObject[]; namespaces?: NamespaceInfo[] }> = [
  {
    name: "a finished job past its TTL, in scope and out",
    jobs: [
      { kind: kindOf("TFJob"), job: tf("done", "team-a", { spec: ttl, status: finished }) },
      { kind: kindOf("TFJob"), job: tf("done", "other", { spec: ttl, status: finished }) },
    ],
    pods: [owned("done-worker-0", "team-a", "done"), owned("done-worker-0", "other", "done")],
  },
  {
    name: "a running job with orphans to adopt, in scope and out",
    jobs: [
      { kind: kindOf("TFJob"), job: tf("run", "team-a") },
      { kind: kindOf("TFJob"), job: tf("run", "other") },
    ],
    pods: [orphan("run-worker-0", "team-a", "run"), orphan("run-worker-0", "other", "run")],
  },
  {
    name: "a job in a protected namespace (opted in by its labels all the same)",
    jobs: [{ kind: kindOf("TFJob"), job: tf("sys", "kube-system", { spec: ttl, status: finished }) }],
    pods: [owned("sys-worker-0", "kube-system", "sys")],
  },
  {
    name: "a job in a namespace the listing did not show",
    jobs: [{ kind: kindOf("TFJob"), job: tf("lost", "gone", { spec: ttl, status: finished }) }],
    pods: [owned("lost-worker-0", "gone", "lost")],
  },
  {
    name: "a job managed by another controller, in scope",
    jobs: [{ kind: kindOf("TFJob"), job: tf("mk", "team-a", { spec: { runPolicy: { managedBy: "kueue.x-k8s.io/multikueue" } } }) }],
  },
  {
    name: "a Caffe2Job (Quartermaster's job controller), in scope and out",
    jobs: [
      { kind: kindOf("Caffe2Job"), job: caffe2("team-a") },
      { kind: kindOf("Caffe2Job"), job: caffe2("other") },
    ],
  },
];

describe("the planners decide the same from the cached jobs as from the jobs", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const s = snapshotOf({
        jobs: c.jobs,
        pods: c.pods ?? [],
        namespaces: c.namespaces ?? NAMESPACES,
        nodes: [node("gpu-1", { "nvidia.com/gpu": "8" })],
        nodeLeases: [nodeLease("gpu-1", NOW)],
      });
      const cached = projected(s);
      const outOfScope = cached.jobs.filter((e) => isJobStub(e.job));
      assert.ok(outOfScope.length > 0 || c.jobs.every((e) => (e.job.metadata as Obj).namespace === "team-a"), "the case has a job out of scope");
      const full = planPass(s, NOW, policy, SCOPE);
      assert.deepEqual(planPass(cached, NOW, policy, SCOPE), full);
      assert.ok(full.skipped.length + full.claims.length + full.actions.length + full.controller.length > 0, "the case plans something");
    });
  }
});

/** A job informer listing as a watch-list; `serve` plays the apiserver's answer to it. */
function streamingInformer(serve: (cb: (phase: string, obj: object) => void, done: (err: unknown) => void) => void) {
  const queries: Obj[] = [];
  let paged = 0;
  class FakeWatch extends k8s.Watch {
    override watch(_path: string, qp: Obj, cb: (phase: string, obj: object) => void, done: (err: unknown) => void): Promise<AbortController> {
      queries.push(qp);
      if (qp.sendInitialEvents === true) setImmediate(() => serve(cb, done));
      return Promise.resolve(new AbortController());
    }
  }
  const informer = trimmedInformer({ ...k8s, Watch: FakeWatch }, new k8s.KubeConfig(), {
    path: "/apis/kubeflow.org/v1/tfjobs",
    page: async () => {
      paged++;
      return { metadata: { resourceVersion: "50" }, items: [bigJob("TFJob", "paged", "other", MiB, "49")] };
    },
    trim: (o) => projectJob(o, (ns) => ns === "team-a"),
    streamList: true,
  });
  return { informer, queries, paged: () => paged };
}

const endOfInitialEvents = (rv: string): Obj => ({ kind: "TFJob", metadata: { resourceVersion: rv, annotations: { "k8s.io/initial-events-end": "true" } } });

describe("the job informer's watch-list", () => {
  it("lists one event at a time, each job trimmed as it arrives, and watches from the bookmark that ends them", async () => {
    const { informer, queries, paged } = streamingInformer((cb) => {
      cb("ADDED", bigJob("TFJob", "o1", "other", MiB, "3"));
      cb("ADDED", bigJob("TFJob", "a1", "team-a", 1000, "4"));
      cb("BOOKMARK", endOfInitialEvents("20"));
      cb("ADDED", bigJob("TFJob", "late", "other", MiB, "21")); // after the end: the watch's, not the list's
    });
    await informer.start();
    assert.equal(paged(), 0);
    const { timeoutSeconds, ...query } = queries[0]!;
    assert.deepEqual(query, { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan", allowWatchBookmarks: true });
    assert.ok(Number(timeoutSeconds) >= 300 && Number(timeoutSeconds) <= 600, `timeoutSeconds ${String(timeoutSeconds)}`);
    assert.equal(queries[1]!.resourceVersion, "20");
    assert.deepEqual(names(informer.list()), ["a1", "o1"]);
    assert.ok(largest(informer.list(), "other") < STUB_BYTES);
    assert.equal((informer.get("o1", "other") as Obj).metadata.resourceVersion, "3");
    assert.ok(informer.synced());
  });

  it("a watch-list that stops half-way fails the LIST after firstResponseMs without an event (the informer starts it again)", async () => {
    const errors: unknown[] = [];
    const queries: Obj[] = [];
    class StallingWatch extends k8s.Watch {
      override watch(_path: string, qp: Obj, cb: (phase: string, obj: object) => void): Promise<AbortController> {
        queries.push(qp);
        if (qp.sendInitialEvents === true) setImmediate(() => cb("ADDED", bigJob("TFJob", "o1", "other", 1000, "3"))); // then nothing
        return Promise.resolve(new AbortController());
      }
    }
    const informer = trimmedInformer({ ...k8s, Watch: StallingWatch }, new k8s.KubeConfig(), {
      path: "/apis/kubeflow.org/v1/tfjobs",
      page: () => Promise.reject(new Error("no paged LIST here")),
      trim: (o) => projectJob(o, () => true),
      streamList: true,
      firstResponseMs: 40,
    });
    informer.on("error", (err) => errors.push(err));
    const started = performance.now();
    const hold = setTimeout(() => undefined, 5000); // the deadline's timer is unref'd
    await informer.start();
    clearTimeout(hold);
    assert.ok(performance.now() - started < 1000);
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]), /did not answer within/);
    assert.equal(queries.length, 1, "no watch opened on a half LIST");
    assert.equal(informer.synced(), false);
  });

  it("where the apiserver has no watch-list (it refuses sendInitialEvents): paged LISTs, from then on", async () => {
    const { informer, queries, paged } = streamingInformer((_cb, done) => done(Object.assign(new Error("Unprocessable Entity"), { statusCode: 422 })));
    await informer.start();
    assert.equal(paged(), 1);
    assert.deepEqual(names(informer.list()), ["paged"]);
    assert.ok(largest(informer.list(), "other") < STUB_BYTES);
    assert.equal(queries.at(-1)!.resourceVersion, "50");
  });

  it("a watch-list that ends before its initial events did is an error (the informer starts again), not a short list", async () => {
    const { informer, paged } = streamingInformer((cb, done) => {
      cb("ADDED", bigJob("TFJob", "o1", "other", 10, "3"));
      done(null);
    });
    const errors: unknown[] = [];
    informer.on("error", (e) => errors.push(e));
    await informer.start();
    assert.equal(errors.length, 1);
    assert.equal(paged(), 0);
    assert.equal(informer.synced(), false);
    assert.deepEqual(informer.list(), []);
  });

  it("a kind not served (404 from the watch-list) is said as a LIST's would be: code 404, not synced", async () => {
    const { informer, paged } = streamingInformer((_cb, done) => done(Object.assign(new Error("Not Found"), { statusCode: 404 })));
    const errors: unknown[] = [];
    informer.on("error", (e) => errors.push(e));
    await informer.start();
    assert.deepEqual(
      errors.map((e) => (e as { code?: number }).code),
      [404],
    );
    assert.equal(paged(), 0);
    assert.equal(informer.synced(), false);
  });
});
