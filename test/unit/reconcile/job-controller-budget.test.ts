/**
 * The job controller's deletions under `reconciler.maxDeletionsPerPass`: one budget shared with the hygiene
 * pass's (`capControllerDeletes` in src/reconcile/plan.ts), the restart counter counting only the restarts
 * sent, a failed job's deferred cleanup finished by later passes (src/reconcile/job-controller.ts step 2), and
 * the resident controller's windowed budget (src/reconcile/budget.ts).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { runPass } from "../../../src/run/pass.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import type { Policy } from "../../../src/policy/types.js";
import { DeletionBudget } from "../../../src/reconcile/budget.js";
import type { DeleteAction } from "../../../src/reconcile/finished.js";
import { ANNOTATION_RESTARTS, decideJob, type Decision } from "../../../src/reconcile/job-controller.js";
import { capControllerDeletes, type ControllerPlan } from "../../../src/reconcile/plan.js";
import { fakeCluster, type FakeCluster } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const NOW = new Date("2026-11-26T12:00:00Z");
const C2 = kindOf("Caffe2Job");

const del = (kind: DeleteAction["kind"], name: string, o: { ns?: string; job?: string; gpu?: boolean; restart?: boolean } = {}): DeleteAction => ({
  verb: "delete",
  kind,
  namespace: o.ns ?? "team-a",
  name,
  uid: `u-${name}`,
  job: `Caffe2Job/${o.job ?? "ex"}`,
  jobKind: C2,
  jobUid: `uid-${o.job ?? "ex"}`,
  reason: o.restart ? "restart" : "r",
  ...(o.gpu ? { holdsGpus: true } : {}),
  ...(o.restart ? { restart: true } : {}),
});
const plan = (deletes: DeleteAction[], restarts?: number, name = "ex"): ControllerPlan => {
  const decision: Decision = { creates: [], deletes, events: [], problems: [], ...(restarts !== undefined ? { restarts } : {}) };
  return { kind: C2, namespace: "team-a", name, uid: `uid-${name}`, decision };
};
const ids = (xs: readonly DeleteAction[]): string[] => xs.map((x) => `${x.kind}/${x.name}`);

describe("capControllerDeletes: one budget for the hygiene and the job controller", () => {
  const cases: Array<{
    name: string;
    hygiene: DeleteAction[];
    controller: ControllerPlan[];
    max: number;
    actions: string[];
    kept: string[][];
    restarts?: Array<number | undefined>;
    deferred: number;
  }> = [
    {
      name: "within the budget: everything, the plans untouched",
      hygiene: [del("Pod", "done-0", { job: "old" })],
      controller: [plan([del("Pod", "w-0", { restart: true })], 3)],
      max: 5,
      actions: ["Pod/done-0"],
      kept: [["Pod/w-0"]],
      restarts: [3],
      deferred: 0,
    },
    {
      name: "suspend of a job larger than the budget: what fits, the rest deferred",
      hygiene: [],
      controller: [plan([del("Pod", "w-0"), del("Pod", "w-1"), del("Pod", "w-2"), del("Service", "w-0"), del("Service", "w-1"), del("Service", "w-2")])],
      max: 4,
      actions: [],
      kept: [["Pod/w-0", "Pod/w-1", "Pod/w-2", "Service/w-0"]],
      deferred: 2,
    },
    {
      name: "shared: the hygiene's GPU holders go first and leave the controller less",
      hygiene: [del("Pod", "gpu-0", { job: "old", gpu: true }), del("Pod", "gpu-1", { job: "old", gpu: true })],
      controller: [plan([del("Pod", "w-0"), del("Pod", "w-1")])],
      max: 3,
      actions: ["Pod/gpu-0", "Pod/gpu-1"],
      kept: [["Pod/w-0"]],
      deferred: 1,
    },
    {
      name: "round-robin across namespaces: one job's scale-down does not starve another namespace's",
      hygiene: [del("Pod", "done-0", { ns: "team-b", job: "old" })],
      controller: [plan([del("Pod", "w-3"), del("Pod", "w-4"), del("Pod", "w-5")])],
      max: 2,
      actions: ["Pod/done-0"],
      kept: [["Pod/w-3"]],
      deferred: 2,
    },
    {
      name: "a restart deferred is not counted: the counter counts the restarts sent",
      hygiene: [],
      controller: [plan([del("Pod", "w-0", { restart: true }), del("Pod", "w-1", { restart: true }), del("Pod", "w-2", { restart: true })], 7)],
      max: 1,
      actions: [],
      kept: [["Pod/w-0"]],
      restarts: [5],
      deferred: 2,
    },
    {
      name: "no restart sent: no counter write at all",
      hygiene: [del("Pod", "gpu-0", { job: "old", gpu: true })],
      controller: [plan([del("Pod", "w-0", { restart: true })], 1)],
      max: 1,
      actions: ["Pod/gpu-0"],
      kept: [[]],
      restarts: [undefined],
      deferred: 1,
    },
    {
      name: "a budget of 0 (a resident controller's spent window): nothing",
      hygiene: [del("Pod", "done-0", { job: "old" })],
      controller: [plan([del("Pod", "w-0")])],
      max: 0,
      actions: [],
      kept: [[]],
      deferred: 2,
    },
    {
      name: "an object both plan to delete counts once, as the controller's",
      hygiene: [del("Pod", "w-0"), del("Service", "w-0")],
      controller: [plan([del("Pod", "w-0"), del("Service", "w-0")])],
      max: 2,
      actions: [],
      kept: [["Pod/w-0", "Service/w-0"]],
      deferred: 0,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const before = structuredClone(c.controller);
      const out = capControllerDeletes(c.hygiene, c.controller, c.max);
      assert.deepEqual(ids(out.actions), c.actions);
      assert.deepEqual(
        out.controller.map((p) => ids(p.decision.deletes)),
        c.kept,
      );
      if (c.restarts)
        assert.deepEqual(
          out.controller.map((p) => p.decision.restarts),
          c.restarts,
        );
      assert.equal(out.deferred.length, c.deferred);
      const sent = out.actions.length + out.controller.reduce((n, p) => n + p.decision.deletes.length, 0);
      assert.ok(sent <= c.max, `${sent} deletions within ${c.max}`);
      assert.deepEqual(c.controller, before, "the input plans are not changed");
    });
  }
});

describe("a job failed for its deadline or backoff limit: the deferred cleanup", () => {
  const T = (s: number): string => new Date(NOW.getTime() - s * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  const failed = (message: string) => ({
    conditions: [
      { type: "Created", status: "True", reason: "JobCreated", message: "Caffe2Job ex is created." },
      { type: "Failed", status: "True", reason: "JobFailed", message, lastUpdateTime: T(5), lastTransitionTime: T(5) },
    ],
    startTime: T(600),
    completionTime: T(5),
  });
  const pod = (i: number, o: { deleting?: boolean } = {}): KubeObject => ({
    metadata: {
      name: `team-a-ex-worker-${i}`,
      namespace: "team-a",
      uid: `u${i}`,
      labels: { caffe2_replica_type: "worker", caffe2_replica_index: String(i) },
      ...(o.deleting ? { deletionTimestamp: T(1) } : {}),
    },
    status: { phase: "Running" },
  });
  const cases: Array<{ name: string; message: string; pods: KubeObject[]; deletes: string[] }> = [
    {
      name: "deadline: the pods left are deleted",
      message: "Job ex has failed because it was active longer than specified deadline",
      pods: [pod(0), pod(1)],
      deletes: ["Pod/team-a-ex-worker-0", "Pod/team-a-ex-worker-1"],
    },
    {
      name: "backoff limit: the pods left are deleted",
      message: "Job ex has failed because it has reached the specified backoff limit",
      pods: [pod(2)],
      deletes: ["Pod/team-a-ex-worker-2"],
    },
    {
      name: "a pod already being deleted is not deleted again",
      message: "Job ex has failed because it has reached the specified backoff limit",
      pods: [pod(0, { deleting: true })],
      deletes: [],
    },
    {
      name: "failed because replicas failed (Never): CleanPodPolicy decides, not the controller",
      message: "Caffe2Job ex is failed because 1 Worker replica(s) failed.",
      pods: [pod(0)],
      deletes: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const j = structuredClone(job("Caffe2Job", "ex", "team-a", { Worker: 2 }, { RuntimeID: "r1" })) as Record<string, any>;
      j.metadata.uid = "uid-ex";
      j.status = failed(c.message);
      const d = decideJob({ job: j, kind: C2, pods: c.pods, services: [], now: NOW });
      assert.deepEqual(ids(d.deletes), c.deletes);
      assert.equal(d.status, undefined, "the status is not touched");
    });
  }
});

describe("the budget in the pass (in-memory cluster)", () => {
  const capped = (max: number): Policy => {
    const p = defaultPolicy();
    return { ...p, reconciler: { ...p.reconciler, maxDeletionsPerPass: max } };
  };
  const c2 = (replicas: number, runPolicy?: Record<string, unknown>): KubeObject => {
    const j = structuredClone(job("Caffe2Job", "ex", "team-a", { Worker: replicas }, { RuntimeID: "r1", ...(runPolicy ? { runPolicy } : {}) })) as Record<
      string,
      any
    >;
    j.metadata.resourceVersion = "1";
    return j;
  };
  const pass = (c: FakeCluster, policy: Policy, at = NOW) =>
    runPass({ cluster: c, policy, log: silentLogger(), now: () => at, dryRun: false, namespace: "quartermaster" });
  const stored = (c: FakeCluster): Record<string, any> => c.jobs.get("team-a/ex")!.job as Record<string, any>;
  const deletes = (c: FakeCluster): number => c.log.filter((l) => l.startsWith("delete ")).length;

  it("suspend of 3 replicas (6 objects) under a budget of 4: 4, then the rest", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2(3) }] });
    await pass(c, capped(4));
    assert.deepEqual([c.pods.length, c.services.length], [3, 3]);
    stored(c).spec.runPolicy = { suspend: true };
    c.log.length = 0;
    const first = await pass(c, capped(4));
    assert.equal(deletes(c), 4);
    assert.equal(first.plan.deferred.length, 2);
    c.log.length = 0;
    await pass(c, capped(4));
    assert.equal(deletes(c), 2);
    assert.deepEqual([c.pods.length, c.services.length], [0, 0]);
  });

  it("restarts beyond the budget: only the restarts sent are counted", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2(3) }] });
    stored(c).spec.replicaSpecs.restartPolicy = "OnFailure";
    await pass(c, capped(1));
    for (const p of c.pods) p.status = { phase: "Failed" };
    c.log.length = 0;
    await pass(c, capped(1));
    assert.equal(c.log.filter((l) => l.startsWith("delete Pod")).length, 1);
    assert.equal(stored(c).metadata.annotations[ANNOTATION_RESTARTS], "1");
  });

  it("a deadline failure larger than the budget: later passes finish the cleanup", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2(3, { activeDeadlineSeconds: 60 }) }] });
    await pass(c, capped(2));
    for (const p of c.pods) p.status = { phase: "Running" };
    const later = new Date(NOW.getTime() + 120_000);
    await pass(c, capped(2), later);
    assert.equal(stored(c).status.conditions.at(-1).type, "Failed");
    assert.equal(c.pods.length + c.services.length, 4, "2 of 6 deleted");
    await pass(c, capped(2), later);
    await pass(c, capped(2), later);
    assert.deepEqual([c.pods.length, c.services.length], [0, 0], "nothing left behind for CleanPodPolicy None");
  });
});

describe("DeletionBudget: maxDeletionsPerPass per window for a resident controller", () => {
  const at = (s: number): Date => new Date(NOW.getTime() + s * 1000);
  const cases: Array<{ name: string; steps: Array<[number, "take" | "available" | "refill", number]> }> = [
    {
      name: "full at first",
      steps: [
        [0, "available", 10],
        [0, "refill", 0],
      ],
    },
    {
      name: "what is taken is gone for the window",
      steps: [
        [0, "take", 4],
        [1, "available", 6],
        [1, "take", 6],
        [2, "available", 0],
        [2, "refill", 58_000],
      ],
    },
    {
      name: "the window turns: full again",
      steps: [
        [0, "take", 10],
        [59, "available", 0],
        [60, "available", 10],
      ],
    },
    {
      name: "taking more than is left (a pass's failures count too) never goes below 0",
      steps: [
        [0, "take", 15],
        [0, "available", 0],
      ],
    },
    {
      name: "a clock that goes back starts a new window",
      steps: [
        [10, "take", 10],
        [5, "available", 10],
      ],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const b = new DeletionBudget(10, 60_000);
      for (const [s, op, n] of c.steps) {
        if (op === "take") b.take(n, at(s));
        else if (op === "available") assert.equal(b.available(at(s)), n, `available at ${s}s`);
        else assert.equal(b.msUntilRefill(at(s)), n, `refill at ${s}s`);
      }
    });
  }
  it("refuses a nonsense budget", () => {
    assert.throws(() => new DeletionBudget(-1, 1000), /not a whole number/);
    assert.throws(() => new DeletionBudget(1, 0), /not > 0/);
  });
});
