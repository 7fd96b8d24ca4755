/**
 * The job controller inside a reconcile pass (`src/run/pass.ts` → `src/run/job-controller.ts`) over the
 * in-memory cluster: which kinds it runs (`jobKinds[].controller`), the order and preconditions of its
 * writes, the Events upstream's pod and service control write, and the expectations that keep a lagging
 * listing from creating a pod twice. The real apiserver: test/e2e/job-controller.test.ts.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { runPass } from "../../../src/run/pass.js";
import { silentLogger } from "../../../src/log.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { quartermasterControls, type JobKind, type Policy } from "../../../src/policy/types.js";
import { Expectations } from "../../../src/reconcile/expectations.js";
import { ANNOTATION_RESTARTS } from "../../../src/reconcile/job-controller.js";
import { planTable } from "../../../src/reconcile/table.js";
import { fakeCluster, type FakeCluster } from "../../fixtures/cluster.js";
import { job, kindOf } from "../../fixtures/jobs.js";

const NOW = new Date("2026-11-26T12:00:00Z");
const policy = defaultPolicy();
const C2 = kindOf("Caffe2Job");
const TF = kindOf("TFJob");

/** Caffe2Job team-a/ex; `replica` is merged into its `spec.replicaSpecs`. */
const c2 = (replica: Record<string, unknown> = {}, replicas = 2): KubeObject => {
  const j = structuredClone(job("Caffe2Job", "ex", "team-a", { Worker: replicas }, { RuntimeID: "r1" })) as Record<string, any>;
  Object.assign(j.spec.replicaSpecs, replica);
  j.metadata.resourceVersion = "1";
  return j;
};
const pass = (c: FakeCluster, o: { policy?: Policy; expectations?: Expectations; dryRun?: boolean } = {}) =>
  runPass({
    cluster: c,
    policy: o.policy ?? policy,
    log: silentLogger(),
    now: () => NOW,
    dryRun: o.dryRun ?? false,
    namespace: "quartermaster",
    ...(o.expectations ? { expectations: o.expectations } : {}),
  });
const stored = (c: FakeCluster): Record<string, any> => c.jobs.get("team-a/ex")!.job as Record<string, any>;
const creates = (c: FakeCluster): string[] => c.log.filter((l) => l.startsWith("create Pod") || l.startsWith("create Service"));

describe("job controller in the pass: which kinds", () => {
  const cases: Array<{ name: string; kind: JobKind; controls: boolean }> = [
    { name: "Caffe2Job by default", kind: C2, controls: true },
    { name: "a Kubeflow kind by default: its operator", kind: TF, controls: false },
    { name: "Caffe2Job marked operator", kind: { ...C2, controller: "operator" }, controls: false },
    { name: "TFJob marked quartermaster", kind: { ...TF, controller: "quartermaster" }, controls: true },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      assert.equal(quartermasterControls(c.kind), c.controls);
      const p = { ...policy, jobKinds: [c.kind] };
      const j = c.kind.framework === "caffe2" ? c2() : (structuredClone(job("TFJob", "ex", "team-a", { Worker: 2 })) as KubeObject);
      const cluster = fakeCluster({ jobs: [{ kind: c.kind, job: j }] });
      await pass(cluster, { policy: p });
      assert.equal(cluster.pods.length, c.controls ? 2 : 0);
      assert.equal(
        cluster.log.some((l) => l.includes("/status")),
        c.controls,
      );
    });
  }
});

describe("job controller in the pass: only in namespaces that opted in", () => {
  const cases: Array<{ name: string; namespaces: Array<{ name: string; labels: Record<string, string> }>; acts: boolean }> = [
    { name: "opted in → pods, Services and status", namespaces: [{ name: "team-a", labels: { "quartermaster.dev/enabled": "true" } }], acts: true },
    { name: "not opted in → nothing written", namespaces: [{ name: "team-a", labels: {} }], acts: false },
    {
      name: "opted in with the label set to false → nothing written",
      namespaces: [{ name: "team-a", labels: { "quartermaster.dev/enabled": "false" } }],
      acts: false,
    },
    { name: "namespace unknown to the pass → nothing written", namespaces: [], acts: false },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const cluster = fakeCluster({ namespaces: c.namespaces, jobs: [{ kind: C2, job: c2() }] });
      const report = await pass(cluster);
      assert.equal(cluster.pods.length, c.acts ? 2 : 0);
      // Every write but the device ledger's, which lives in Quartermaster's own namespace.
      const writes = cluster.log.filter((l) => !l.startsWith("list ") && !l.includes(" quartermaster/quartermaster-ledger"));
      assert.equal(writes.length > 0, c.acts, writes.join("\n"));
      assert.equal(cluster.events.length > 0, c.acts);
      if (!c.acts)
        assert.ok(
          report.plan.skipped.some((x) => x.kind === "Caffe2Job" && x.name === "ex"),
          "the job is listed as skipped",
        );
    });
  }
});

describe("job controller in the pass: a Caffe2Job's life", () => {
  it("first pass: pods, Services, the status and upstream's Events; second pass: nothing to do", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    const report = await pass(c);
    assert.deepEqual(creates(c).sort(), [
      "create Pod team-a/team-a-ex-worker-0",
      "create Pod team-a/team-a-ex-worker-1",
      "create Service team-a/team-a-ex-worker-0",
      "create Service team-a/team-a-ex-worker-1",
    ]);
    assert.ok(report.applied.includes("patch Caffe2Job/status team-a/ex"));
    const status = stored(c).status;
    assert.deepEqual(
      status.conditions.map((x: any) => [x.type, x.status, x.reason]),
      [["Created", "True", "JobCreated"]],
    );
    assert.deepEqual(status.replicaStatuses, { active: 0, succeeded: 0, failed: 0 });
    const events = c.events.map((e: any) => `${e.type} ${e.reason} ${e.message}`).sort();
    assert.deepEqual(events, [
      "Normal SuccessfulCreatePod Created pod: team-a-ex-worker-0",
      "Normal SuccessfulCreatePod Created pod: team-a-ex-worker-1",
      "Normal SuccessfulCreateService Created service: team-a-ex-worker-0",
      "Normal SuccessfulCreateService Created service: team-a-ex-worker-1",
    ]);
    for (const e of c.events as any[])
      assert.deepEqual([e.involvedObject.kind, e.involvedObject.uid, e.source.component], ["Caffe2Job", "uid-ex", "quartermaster-job-controller"]);
    c.log.length = 0;
    const again = await pass(c);
    assert.deepEqual(creates(c), []);
    assert.equal(c.log.filter((l) => l.includes("/status")).length, 0, "an unchanged status is not written");
    assert.deepEqual(again.failed, []);
  });

  it("the pods run, then succeed: Running, then Succeeded with completionTime and JobSucceeded", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    await pass(c);
    for (const p of c.pods) p.status = { phase: "Running" };
    await pass(c);
    assert.equal(stored(c).status.conditions.at(-1).type, "Running");
    assert.deepEqual(stored(c).status.replicaStatuses, { active: 2, succeeded: 0, failed: 0 });
    for (const p of c.pods) p.status = { phase: "Succeeded" };
    await pass(c);
    assert.deepEqual(
      stored(c).status.conditions.map((x: any) => [x.type, x.status]),
      [
        ["Created", "True"],
        ["Running", "False"],
        ["Succeeded", "True"],
      ],
    );
    assert.equal(stored(c).status.completionTime, "2026-11-26T12:00:00Z");
    assert.ok(c.events.some((e: any) => e.reason === "JobSucceeded"));
  });

  it("ExitCode 137: the restart is counted on the job, then the pod deleted and recreated; 1: the job fails", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2({ restartPolicy: "ExitCode" }) }] });
    await pass(c);
    const failPod = (exitCode: number) => {
      c.pods[0]!.status = { phase: "Failed", containerStatuses: [{ name: "caffe2", restartCount: 0, state: { terminated: { exitCode } } }] };
      c.pods[1]!.status = { phase: "Running" };
    };
    failPod(137);
    const uid = c.pods[0]!.metadata.uid;
    c.log.length = 0;
    await pass(c);
    const order = c.log.filter((l) => /^(patch Caffe2Job |delete Pod)/.test(l));
    assert.deepEqual(order, ["patch Caffe2Job team-a/ex", "delete Pod team-a/team-a-ex-worker-0"], "the counter before the delete");
    assert.equal(stored(c).metadata.annotations[ANNOTATION_RESTARTS], "1");
    assert.equal(stored(c).status.conditions.at(-1).type, "Restarting");
    assert.ok(c.events.some((e: any) => e.reason === "SuccessfulDeletePod" && e.message === "Deleted pod: team-a-ex-worker-0"));
    assert.ok(c.events.some((e: any) => e.type === "Warning" && e.reason === "JobRestarting"));
    await pass(c);
    const recreated = c.pods.find((p) => p.metadata.name === "team-a-ex-worker-0")!;
    assert.notEqual(recreated.metadata.uid, uid, "recreated under the same name");
    failPod(1);
    await pass(c);
    assert.equal(stored(c).status.conditions.at(-1).type, "Failed");
    assert.equal(stored(c).status.conditions.at(-1).message, 'job "ex" is failing because "Worker" replica(s) failed.');
    assert.equal(c.pods.length, 2, "a permanent failure deletes nothing (CleanPodPolicy decides, as for any finished job)");
  });

  it("the job changed since it was listed: the restart waits (no delete without its count)", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2({ restartPolicy: "OnFailure" }, 1) }] });
    await pass(c);
    c.pods[0]!.status = { phase: "Failed" };
    const patch = c.patchJobAnnotations.bind(c);
    c.patchJobAnnotations = async (...a) => (await patch(...a), "conflict");
    const report = await pass(c);
    assert.deepEqual(
      c.log.filter((l) => l.startsWith("delete Pod")),
      [],
    );
    assert.match(report.skipped.map((s) => s.why).join("\n"), /restarts wait for the next pass/);
  });

  it("a create the apiserver refuses: FailedCreatePod with its error, and the next pass tries again", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2({}, 1) }] });
    const createPod = c.createPod.bind(c);
    let refuse = true;
    c.createPod = async (ns, body) => {
      if (!refuse) return createPod(ns, body);
      refuse = false;
      throw Object.assign(new Error('pods "x" is forbidden: exceeded quota'), { code: 403 });
    };
    const expectations = new Expectations();
    const report = await pass(c, { expectations });
    assert.deepEqual(
      report.failed.map((f) => f.action),
      ["create Pod team-a/team-a-ex-worker-0"],
      JSON.stringify(report.failed),
    );
    assert.ok(
      c.events.some(
        (e: any) => e.type === "Warning" && e.reason === "FailedCreatePod" && e.message === 'Error creating: pods "x" is forbidden: exceeded quota',
      ),
    );
    assert.equal(expectations.size, 1, "only the Service's create is still expected");
    await pass(c, { expectations });
    assert.equal(c.pods.length, 1);
  });

  it("suspend deletes the pods and Services; resume creates them again", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    await pass(c);
    stored(c).spec.runPolicy = { suspend: true };
    await pass(c);
    assert.deepEqual([c.pods.length, c.services.length], [0, 0]);
    assert.equal(stored(c).status.conditions.at(-1).type, "Suspended");
    stored(c).spec.runPolicy = { suspend: false };
    await pass(c);
    assert.deepEqual([c.pods.length, c.services.length], [2, 2]);
  });

  it("--dry-run lists the controller's creates and status write, and writes nothing", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    const report = await pass(c, { dryRun: true });
    const text = planTable(report.plan);
    assert.match(text, /create\s+Pod\s+team-a\s+team-a-ex-worker-0\s+Caffe2Job\/ex\s+worker 0 has no pod/);
    assert.match(text, /status\s+Caffe2Job\s+team-a\s+ex\s+Caffe2Job\/ex\s+Created=True \(JobCreated\)/);
    assert.deepEqual(c.pods, []);
  });
});

describe("job controller in the pass: expectations", () => {
  it("a listing that lags behind the controller's creates never makes it create twice", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    // The listing shows nothing new for two passes (a slow watch / cache), then catches up.
    let lag = 2;
    const listPods = c.listPods.bind(c);
    const listServices = c.listServices.bind(c);
    c.listPods = async () => (lag > 0 ? [] : listPods());
    c.listServices = async () => (lag > 0 ? [] : listServices());
    const expectations = new Expectations();
    for (let n = 0; n < 4; n++, lag--) await pass(c, { expectations });
    const counts = new Map<string, number>();
    for (const l of creates(c)) counts.set(l, (counts.get(l) ?? 0) + 1);
    assert.deepEqual([...counts.values()], [1, 1, 1, 1], JSON.stringify([...counts]));
    assert.equal(expectations.size, 0, "all met once the listing shows them");
  });

  it("without expectations the same lag creates again (what they prevent)", async () => {
    const c = fakeCluster({ jobs: [{ kind: C2, job: c2() }] });
    c.listPods = async () => [];
    c.listServices = async () => [];
    await pass(c);
    await pass(c);
    assert.equal(creates(c).length, 8);
  });
});

describe("expectations", () => {
  const pod = (name: string, uid: string): KubeObject => ({ metadata: { name, namespace: "ns", uid } });
  it("a create is met when the name is listed; a delete when the uid is gone or replaced; both expire", () => {
    const e = new Expectations(60_000);
    const t0 = new Date(0);
    e.expectCreate("j", "ns", "Pod/a", t0);
    e.expectDelete("j", "ns", "Pod/b", "uid-b", t0);
    e.expectDelete("j", "ns", "Pod/c", "uid-c", t0);
    let f = e.observe([pod("b", "uid-b"), pod("c", "uid-c")], [], new Date(1000))("j");
    assert.deepEqual([[...f.creates], [...f.deletes].sort()], [["Pod/a"], ["Pod/b", "Pod/c"]]);
    f = e.observe([pod("a", "uid-a"), pod("c", "uid-c2")], [], new Date(2000))("j");
    assert.deepEqual([[...f.creates], [...f.deletes]], [[], []], "a listed, b gone, c replaced");
    e.expectCreate("j", "ns", "Pod/d", t0);
    f = e.observe([], [], new Date(60_001))("j");
    assert.deepEqual([...f.creates], [], "expired");
    assert.equal(e.size, 0);
    e.expectCreate("j", "ns", "Service/s", t0);
    e.forget("j", "Service/s");
    assert.equal(e.size, 0);
  });
});
