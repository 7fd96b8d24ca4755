import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { capDeletions, finishedAt, planFinishedJob, type DeleteAction } from "../../../src/reconcile/finished.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";

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
      [
        "Pod/mnist-ps-0",
        "Service/mnist-ps-0",
        "Pod/mnist-worker-0",
        "Service/mnist-worker-0",
        "Pod/mnist-worker-1",
        "Service/mnist-worker-1",
        "Pod/mnist-worker-2",
        "Service/mnist-worker-2",
      ],
    ],
    ["no cleanPodPolicy → None, as upstream (training-operator common_types.go): no pod deleted", finishedJob(), at(1), []],
    ["TTL 60: now == completion + 60 → not yet due", finishedJob({ runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 60 } }), at(60), []],
    [
      "TTL 60: a millisecond later → the job is deleted",
      finishedJob({ runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 60 } }),
      new Date(at(60).getTime() + 1),
      ["Job/mnist"],
    ],
    [
      "no TTL on the job → never deleted, as upstream (TTL infinite), ten years on",
      finishedJob({ runPolicy: { cleanPodPolicy: "None" } }),
      at(10 * 365 * 86_400),
      [],
    ],
    ["no runPolicy at all → nothing, ten years on", finishedJob({ runPolicy: undefined }), at(10 * 365 * 86_400), []],
    [
      "TTL 0 on a suspended job → not deleted (upstream CleanupJob skips suspended jobs)",
      finishedJob({ runPolicy: { ttlSecondsAfterFinished: 0, suspend: true } }),
      at(10),
      [],
    ],
  ];
  for (const [name, j, now, want] of cases)
    it(name, () => assert.deepEqual(summary(planFinishedJob({ job: j, kind, pods, services, now, policy }).actions), want));

  it("objects controlled by someone else, or already being deleted, are never touched", () => {
    const foreign = [owned("mnist-ps-0", "Running", { owner: "uid-other" }), owned("mnist-worker-2", "Pending", { deleting: true })];
    const foreignServices = [
      owned("mnist-ps-0", undefined, { kind: "Service", owner: "uid-other" }),
      owned("mnist-worker-2", undefined, { kind: "Service", deleting: true }),
    ];
    assert.deepEqual(
      planFinishedJob({ job: finishedJob({ runPolicy: { cleanPodPolicy: "All" } }), kind, pods: foreign, services: foreignServices, now: at(1), policy })
        .actions,
      [],
    );
  });

  describe("a Service whose pod is gone (parted from it by an earlier pass's deletion budget)", () => {
    const onlyServices = (runPolicy: Record<string, unknown>, podList: KubeObject[]) =>
      summary(planFinishedJob({ job: finishedJob({ runPolicy }), kind, pods: podList, services, now: at(1), policy }).actions);
    it("Running: the Services of pods that are gone are deleted; a kept Succeeded pod keeps its Service", () => {
      assert.deepEqual(onlyServices({ cleanPodPolicy: "Running" }, [owned("mnist-worker-0", "Succeeded")]), [
        "Service/mnist-ps-0",
        "Service/mnist-worker-1",
        "Service/mnist-worker-2",
      ]);
    });
    it("All: a pod being deleted counts as gone: its Service goes", () => {
      assert.deepEqual(onlyServices({ cleanPodPolicy: "All" }, [owned("mnist-ps-0", "Running", { deleting: true })]), [
        "Service/mnist-ps-0",
        "Service/mnist-worker-0",
        "Service/mnist-worker-1",
        "Service/mnist-worker-2",
      ]);
    });
    it("None (and unset): nothing", () => {
      assert.deepEqual(onlyServices({ cleanPodPolicy: "None" }, []), []);
      assert.deepEqual(onlyServices({}, []), []);
    });
  });

  describe("a runPolicy field of the wrong type → a problem reported and no action at all", () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ["a string TTL", { cleanPodPolicy: "All", ttlSecondsAfterFinished: "60" }, /ttlSecondsAfterFinished "60" is not a whole number/],
      ["a negative TTL", { cleanPodPolicy: "All", ttlSecondsAfterFinished: -1 }, /ttlSecondsAfterFinished -1 is not a whole number/],
      ["a fractional TTL", { ttlSecondsAfterFinished: 1.5 }, /ttlSecondsAfterFinished 1.5/],
      ["an unknown cleanPodPolicy", { cleanPodPolicy: "Always", ttlSecondsAfterFinished: 0 }, /cleanPodPolicy "Always" is not one of All, Running, None/],
      ["a lower-case cleanPodPolicy", { cleanPodPolicy: "all" }, /cleanPodPolicy "all"/],
      ["a runPolicy that is not an object", ["All"], /spec.runPolicy is not an object/],
    ];
    for (const [name, runPolicy, problem] of cases) {
      it(name, () => {
        const plan = planFinishedJob({ job: finishedJob({ runPolicy: runPolicy as Record<string, unknown> }), kind, pods, services, now: at(100_000), policy });
        assert.deepEqual(plan.actions, []);
        assert.equal(plan.problems.length, 1);
        assert.match(plan.problems[0]!, problem);
        assert.match(plan.problems[0]!, /^team-a\/TFJob\/mnist: .*; nothing done for this job$/);
      });
    }
  });

  it("a pod deletion says whether the pod holds GPUs (bound, not terminated, requesting them)", () => {
    const gpu = (name: string, phase: string, node?: string): KubeObject =>
      deepFreeze({
        ...structuredClone(owned(name, phase)),
        spec: { ...(node ? { nodeName: node } : {}), containers: [{ name: "tensorflow", resources: { limits: { "nvidia.com/gpu": "2" } } }] },
      });
    const plan = planFinishedJob({
      job: finishedJob({ runPolicy: { cleanPodPolicy: "All" } }),
      kind,
      pods: [
        gpu("mnist-ps-0", "Running", "n1"),
        gpu("mnist-worker-0", "Pending"),
        gpu("mnist-worker-1", "Succeeded", "n1"),
        owned("mnist-worker-2", "Running"),
      ],
      services: [],
      now: at(1),
      policy,
    });
    assert.deepEqual(
      plan.actions.map((a) => `${a.name}:${a.holdsGpus}`),
      ["mnist-ps-0:true", "mnist-worker-0:false", "mnist-worker-1:false", "mnist-worker-2:false"],
    );
  });

  it("every action carries the uid precondition and a reason", () => {
    const plan = planFinishedJob({
      job: finishedJob({ runPolicy: { cleanPodPolicy: "All", ttlSecondsAfterFinished: 0 } }),
      kind,
      pods,
      services,
      now: at(1),
      policy,
    });
    for (const a of plan.actions) {
      assert.ok(a.uid.startsWith("uid-"), JSON.stringify(a));
      assert.ok(a.reason.length > 0);
      assert.equal(a.job, "TFJob/mnist");
    }
    assert.equal(plan.actions.at(-1)?.uid, "uid-mnist");
  });

  it("finished without a completionTime → no TTL deletion, a problem reported", () => {
    const plan = planFinishedJob({
      job: finishedJob({ completionTime: null, runPolicy: { cleanPodPolicy: "None", ttlSecondsAfterFinished: 0 } }),
      kind,
      pods,
      services,
      now: at(100),
      policy,
    });
    assert.deepEqual(plan.actions, []);
    assert.deepEqual(plan.problems, ["team-a/TFJob/mnist: finished but has no status.completionTime; TTL cannot apply"]);
  });

  it("finished without a completionTime and without a TTL → nothing, and no problem", () => {
    const plan = planFinishedJob({
      job: finishedJob({ completionTime: null, runPolicy: { cleanPodPolicy: "None" } }),
      kind,
      pods,
      services,
      now: at(100),
      policy,
    });
    assert.deepEqual([plan.actions, plan.problems], [[], []]);
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
  const a = (k: DeleteAction["kind"], name: string, o: { ns?: string; gpu?: boolean; job?: string } = {}): DeleteAction => ({
    verb: "delete",
    kind: k,
    namespace: o.ns ?? "n",
    name,
    uid: `u-${name}`,
    job: `TFJob/${o.job ?? "j"}`,
    jobKind: kind,
    jobUid: `uid-${o.job ?? "j"}`,
    reason: "r",
    ...(o.gpu ? { holdsGpus: true } : {}),
  });
  const names = (xs: DeleteAction[]) => xs.map((x) => `${x.namespace}/${x.kind}/${x.name}`);
  const cases: Array<{ name: string; actions: DeleteAction[]; max: number; now: string[]; deferred: string[] }> = [
    {
      name: "at most N a pass; a pod with its Service; job deletions last",
      actions: [a("Job", "j1"), a("Pod", "p1"), a("Service", "p1"), a("Pod", "p2")],
      max: 2,
      now: ["n/Pod/p1", "n/Service/p1"],
      deferred: ["n/Pod/p2", "n/Job/j1"],
    },
    {
      name: "GPU-holding pods first, whatever their namespace and position",
      actions: [
        a("Pod", "c1", { ns: "a" }),
        a("Pod", "c2", { ns: "a" }),
        a("Pod", "g1", { ns: "b", gpu: true }),
        a("Service", "g1", { ns: "b" }),
        a("Pod", "g2", { ns: "c", gpu: true }),
      ],
      max: 3,
      now: ["b/Pod/g1", "b/Service/g1", "c/Pod/g2"],
      deferred: ["a/Pod/c1", "a/Pod/c2"],
    },
    {
      name: "then round-robin across namespaces: a thousand completed pods in one namespace do not starve another",
      actions: [
        ...Array.from({ length: 1000 }, (_, i) => a("Pod", `done-${i}`, { ns: "big" })),
        a("Pod", "x1", { ns: "small" }),
        a("Pod", "x2", { ns: "small" }),
      ],
      max: 4,
      now: ["big/Pod/done-0", "small/Pod/x1", "big/Pod/done-1", "small/Pod/x2"],
      deferred: Array.from({ length: 998 }, (_, i) => `big/Pod/done-${i + 2}`),
    },
    {
      name: "the budget can part a pod from its Service: the Service is deferred (a later pass finds it, its pod gone)",
      actions: [a("Pod", "p1"), a("Service", "p1"), a("Pod", "p2"), a("Service", "p2")],
      max: 3,
      now: ["n/Pod/p1", "n/Service/p1", "n/Pod/p2"],
      deferred: ["n/Service/p2"],
    },
    {
      name: "a Service after a pod of another job is its own unit",
      actions: [a("Pod", "p1", { job: "j1" }), a("Service", "p1", { job: "j2" })],
      max: 5,
      now: ["n/Pod/p1", "n/Service/p1"],
      deferred: [],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const { now, deferred } = capDeletions(c.actions, c.max);
      assert.deepEqual(names(now), c.now);
      assert.deepEqual(names(deferred), c.deferred);
      assert.equal(now.length + deferred.length, c.actions.length, "nothing lost, nothing doubled");
    });
  }
});
