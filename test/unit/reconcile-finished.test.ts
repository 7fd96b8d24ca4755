import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../src/admission/types.js";
import { checkPolicy, defaultPolicy } from "../../src/policy/load.js";
import { capDeletions, finishedAt, planFinishedJob, type DeleteAction } from "../../src/reconcile/finished.js";
import { job, kindOf } from "../fixtures/jobs.js";
import { deepFreeze } from "../fixtures/reviews.js";

const completion = "2026-11-22T00:00:00Z";
const at = (seconds: number) => new Date(Date.parse(completion) + seconds * 1000);
const kind = kindOf("TFJob");

function finishedJob(o: { condition?: string; runPolicy?: Record<string, unknown>; completionTime?: string | null; deleting?: boolean } = {}): KubeObject {
  const j = structuredClone(job("TFJob", "mnist", "team-a", { Worker: 2, PS: 1 }, { runPolicy: o.runPolicy ?? {} })) as Record<string, any>;
  if (o.deleting) j.metadata.deletionTimestamp = completion;
  j.status = {
    conditions: [
      { type: "Created", status: "True" },
      { type: "Running", status: "False" },
      ...(o.condition === undefined ? [{ type: "Succeeded", status: "True" }] : o.condition ? [{ type: o.condition, status: "True" }] : []),
    ],
    ...(o.completionTime === null ? {} : { completionTime: o.completionTime ?? completion }),
  };
  return deepFreeze(j);
}

const owned = (name: string, phase: string | undefined, o: { owner?: string; deleting?: boolean; kind?: string } = {}): KubeObject =>
  deepFreeze({
    apiVersion: "v1",
    kind: o.kind ?? "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${o.kind ?? "pod"}-${name}`,
      ...(o.deleting ? { deletionTimestamp: completion } : {}),
      ownerReferences: [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: o.owner ?? "uid-mnist", controller: true }],
    },
    ...(phase ? { status: { phase } } : {}),
  });

const pods = [owned("mnist-ps-0", "Running"), owned("mnist-worker-0", "Succeeded"), owned("mnist-worker-1", "Failed"), owned("mnist-worker-2", "Pending")];
const services = pods.map((p) => owned(String((p.metadata as { name: string }).name), undefined, { kind: "Service" }));
const summary = (actions: DeleteAction[]) => actions.map((a) => `${a.kind}/${a.name}`);

describe("planFinishedJob", () => {
  const policy = defaultPolicy();
  const cases: Array<[string, KubeObject, Date, string[]]> = [
    ["unfinished job → nothing, ever", finishedJob({ condition: "", runPolicy: { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 } }), at(10_000), []],
    ["a job already being deleted → nothing", finishedJob({ deleting: true, runPolicy: { cleanPodPolicy: "All" } }), at(1), []],
    ["None → no pods deleted", finishedJob({ runPolicy: { cleanPodPolicy: "None" } }), at(1), []],
    [
      "Running → Running and Pending pods and their services; Succeeded and Failed kept",
      finishedJob({ runPolicy: { cleanPodPolicy: "Running" } }),
      at(1),
      ["Pod/mnist-ps-0", "Service/mnist-ps-0", "Pod/mnist-worker-2", "Service/mnist-worker-2"],
    ],
    [
      "All → every pod and its service",
      finishedJob({ condition: "Failed", runPolicy: { cleanPodPolicy: "All" } }),
      at(1),
      ["Pod/mnist-ps-0", "Service/mnist-ps-0", "Pod/mnist-worker-0", "Service/mnist-worker-0", "Pod/mnist-worker-1", "Service/mnist-worker-1", "Pod/mnist-worker-2", "Service/mnist-worker-2"],
    ],
    ["no cleanPodPolicy → None, as upstream: no pods deleted", finishedJob(), at(1), []],
    ["TTL 60: now == completion + 60 → not yet due", finishedJob({ runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 60 } }), at(60), []],
    ["TTL 60: a millisecond later → the job is deleted", finishedJob({ runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 60 } }), new Date(at(60).getTime() + 1), ["Job/mnist"]],
    ["no TTL on the job → never deleted, as upstream (a year later)", finishedJob({ runPolicy: { cleanPodPolicy: "None" } }), at(365 * 86_400), []],
  ];
  for (const [name, j, now, want] of cases) it(name, () => assert.deepEqual(summary(planFinishedJob(j, kind, pods, services, now, policy).actions), want));

  it("objects controlled by someone else, or already being deleted, are never touched", () => {
    const foreign = [owned("mnist-ps-0", "Running", { owner: "uid-other" }), owned("mnist-worker-2", "Pending", { deleting: true })];
    assert.deepEqual(planFinishedJob(finishedJob({ runPolicy: { cleanPodPolicy: "All" } }), kind, foreign, services, at(1), policy).actions, []);
  });

  it("every action carries the uid precondition and a reason", () => {
    const plan = planFinishedJob(finishedJob({ runPolicy: { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 } }), kind, pods, services, at(1), policy);
    for (const a of plan.actions) {
      assert.ok(a.uid.startsWith("uid-"), JSON.stringify(a));
      assert.ok(a.reason.length > 0);
      assert.equal(a.job, "TFJob/mnist");
    }
    assert.equal(plan.actions.at(-1)?.uid, "uid-mnist");
  });

  it("finished without a completionTime → no TTL deletion, a problem reported", () => {
    const plan = planFinishedJob(finishedJob({ completionTime: null, runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 0 } }), kind, pods, services, at(100), policy);
    assert.deepEqual(plan.actions, []);
    assert.deepEqual(plan.problems, ["TFJob/mnist: finished but has no status.completionTime; TTL cannot apply"]);
  });

  it("job defaults in the policy do not reach existing jobs: only admission writes them into new jobs", () => {
    const withDefaults = checkPolicy({ jobDefaults: { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 } }, "t");
    assert.deepEqual(planFinishedJob(finishedJob(), kind, pods, services, at(86_401), withDefaults).actions, []);
  });
});

describe("finishedAt", () => {
  it("Succeeded=True or Failed=True finishes; Succeeded=False does not", () => {
    assert.equal(finishedAt(finishedJob()).finished, true);
    assert.equal(finishedAt(finishedJob({ condition: "Failed" })).finished, true);
    const j = structuredClone(finishedJob()) as any;
    j.status.conditions.at(-1).status = "False";
    assert.equal(finishedAt(j).finished, false);
  });
});

describe("capDeletions", () => {
  it("at most N a pass; pod deletions before job deletions; the rest deferred", () => {
    const a = (k: DeleteAction["kind"], name: string): DeleteAction => ({ verb: "delete", kind: k, namespace: "n", name, uid: "u", job: "j", jobKind: kind, jobUid: "j-uid", reason: "r" });
    const { now, deferred } = capDeletions([a("Job", "j1"), a("Pod", "p1"), a("Service", "s1"), a("Pod", "p2")], 2);
    assert.deepEqual(now.map((x) => x.name), ["p1", "s1"]);
    assert.deepEqual(deferred.map((x) => x.name), ["p2", "j1"]);
  });
});
