import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { adoptPatch, claim, claimSelector, releasePatch } from "../../../src/reconcile/claim.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const kind = kindOf("TFJob");
const JOB_UID = "6f1c7d2e-1111-2222-3333-444455556666";
const POD_UID = "0b9e5a4c-aaaa-bbbb-cccc-ddddeeeeffff";

const tf = (deleting = false): KubeObject => {
  const j = structuredClone(job("TFJob", "mnist", "team-a", { Worker: 2 })) as Record<string, any>;
  j.metadata.uid = JOB_UID;
  if (deleting) j.metadata.deletionTimestamp = "2026-11-22T00:00:00Z";
  return deepFreeze(j);
};

const MATCHING = { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "tfjob-controller" };

function pod(o: { labels?: Record<string, string>; controller?: string; otherOwner?: string; deleting?: boolean; namespace?: string } = {}): KubeObject {
  const refs = [
    ...(o.controller ? [{ apiVersion: "kubeflow.org/v1", kind: "TFJob", name: "mnist", uid: o.controller, controller: true }] : []),
    ...(o.otherOwner ? [{ apiVersion: "v1", kind: "ConfigMap", name: "x", uid: o.otherOwner }] : []),
  ];
  return deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "mnist-worker-0",
      namespace: o.namespace ?? "team-a",
      uid: POD_UID,
      labels: o.labels ?? MATCHING,
      ...(refs.length > 0 ? { ownerReferences: refs } : {}),
      ...(o.deleting ? { deletionTimestamp: "2026-11-22T00:00:00Z" } : {}),
    },
  });
}

describe("claim: ClaimObject rows A–G (controller_ref_manager.go's ClaimObject)", () => {
  const cases: Array<[string, KubeObject, KubeObject, "owned" | "adopt" | "release" | "nothing"]> = [
    ["A: controlled by someone else → never touched", tf(), pod({ controller: "someone-else" }), "nothing"],
    ["A: controlled by someone else, job being deleted → never touched", tf(true), pod({ controller: "someone-else" }), "nothing"],
    ["B: controlled by the job and matching → owned", tf(), pod({ controller: JOB_UID }), "owned"],
    ["B: … also while the job is being deleted", tf(true), pod({ controller: JOB_UID }), "owned"],
    [
      "C: controlled, not matching, job being deleted → nothing",
      tf(true),
      pod({ controller: JOB_UID, labels: { "training.kubeflow.org/job-name": "other" } }),
      "nothing",
    ],
    ["D: controlled, job-name differs → release", tf(), pod({ controller: JOB_UID, labels: { "training.kubeflow.org/job-name": "other" } }), "release"],
    [
      "D: controlled, another operator's name → release",
      tf(),
      pod({ controller: JOB_UID, labels: { ...MATCHING, "training.kubeflow.org/operator-name": "pytorchjob-controller" } }),
      "release",
    ],
    [
      "D (DECIDE): controlled, only the job-name label → kept, not released",
      tf(),
      pod({ controller: JOB_UID, labels: { "training.kubeflow.org/job-name": "mnist" } }),
      "owned",
    ],
    ["D: controlled, no labels at all → release", tf(), pod({ controller: JOB_UID, labels: {} }), "release"],
    ["E: orphan, job being deleted → nothing", tf(true), pod(), "nothing"],
    [
      "E: orphan not matching → nothing",
      tf(),
      pod({ labels: { "training.kubeflow.org/job-name": "other", "training.kubeflow.org/operator-name": "tfjob-controller" } }),
      "nothing",
    ],
    [
      "E (DECIDE): orphan with only the job-name label → not adopted (the kind is unknown)",
      tf(),
      pod({ labels: { "training.kubeflow.org/job-name": "mnist" } }),
      "nothing",
    ],
    ["F: orphan being deleted → nothing", tf(), pod({ deleting: true }), "nothing"],
    ["G: orphan matching → adopt", tf(), pod(), "adopt"],
    ["G: orphan with a non-controller owner → adopt (other owners are kept)", tf(), pod({ otherOwner: "cm-uid" }), "adopt"],
    ["another namespace → nothing", tf(), pod({ namespace: "team-b" }), "nothing"],
  ];
  for (const [name, j, p, want] of cases) {
    it(name, () => {
      const got = claim(j, kind, "Pod", [p]);
      const outcome = got.actions[0]?.verb ?? (got.owned.length > 0 ? "owned" : "nothing");
      assert.equal(outcome, want);
      assert.ok(got.actions.length <= 1);
      if (want === "adopt") assert.deepEqual(got.adopted, [p]);
      else assert.deepEqual(got.adopted, []);
    });
  }
});

describe("claim patches: upstream's bytes", () => {
  it("adopt: the job as controller with blockOwnerDeletion, the object's own uid as precondition", () => {
    assert.equal(
      adoptPatch(tf(), kind, POD_UID),
      `{"metadata":{"ownerReferences":[{"apiVersion":"kubeflow.org/v1","kind":"TFJob","name":"mnist","uid":"${JOB_UID}","controller":true,"blockOwnerDeletion":true}],"uid":"${POD_UID}"}}`,
    );
  });
  it("release: $patch delete of the job's uid, the object's own uid as precondition", () => {
    assert.equal(releasePatch(JOB_UID, POD_UID), `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"${JOB_UID}"}],"uid":"${POD_UID}"}}`);
  });
  it("Caffe2 adopts with kubeflow.org/v1alpha1", () => {
    const j = job("Caffe2Job", "c2", "team-a", { Worker: 2 });
    assert.match(adoptPatch(j, kindOf("Caffe2Job"), POD_UID), /"apiVersion":"kubeflow.org\/v1alpha1","kind":"Caffe2Job"/);
  });
  it("the action carries the patch for its row", () => {
    const [adopt] = claim(tf(), kind, "Service", [pod()]).actions;
    assert.deepEqual(
      { ...adopt!, jobKind: undefined },
      {
        verb: "adopt",
        kind: "Service",
        namespace: "team-a",
        name: "mnist-worker-0",
        uid: POD_UID,
        job: "TFJob/mnist",
        jobUid: JOB_UID,
        jobKind: undefined,
        reason: "matches the selector of TFJob/mnist and has no controller",
        patch: adoptPatch(tf(), kind, POD_UID),
      },
    );
  });
});

describe("claimSelector", () => {
  const cases: Array<[string, string, Record<string, string>]> = [
    ["TFJob", "mnist", { "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/operator-name": "tfjob-controller" }],
    ["PyTorchJob", "bert", { "training.kubeflow.org/job-name": "bert", "training.kubeflow.org/operator-name": "pytorchjob-controller" }],
    // caffe2-operator's genLabels: group_name, caffe2_job_key <namespace>-<name>, runtime_id (spec.RuntimeID, "" unset).
    ["Caffe2Job", "c2", { group_name: "kubeflow.org", caffe2_job_key: "ns-c2", runtime_id: "" }],
  ];
  for (const [k, name, want] of cases)
    it(`${k} → ${JSON.stringify(want)}`, () => assert.deepEqual(claimSelector(job(k, name, "ns", { Worker: 1 }), kindOf(k)), want));
});

describe("claim is idempotent", () => {
  it("once the adoption is applied, the next pass sees the pod as owned and plans nothing", () => {
    const first = claim(tf(), kind, "Pod", [pod()]);
    assert.equal(first.actions[0]?.verb, "adopt");
    const after = claim(tf(), kind, "Pod", [pod({ controller: JOB_UID })]);
    assert.deepEqual(after.actions, []);
    assert.equal(after.owned.length, 1);
  });
});
