/**
 * The kinds `explain` resolves (src/explain/kinds.ts): the policy's job kinds, batch Job, JobSet and TrainJob, by
 * kind, plural or plural.group, case-insensitively; each with its finished conditions and controller Deployment.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { knownKinds, resolveKind } from "../../../src/explain/kinds.js";
import { defaultPolicy } from "../../../src/policy/load.js";

const kinds = knownKinds(defaultPolicy());

describe("resolveKind", () => {
  const cases: Array<{ name: string; given: string; kind: string; group: string; deployment?: string; finished: string[] }> = [
    {
      name: "a Kubeflow v1 kind, upper case → PyTorchJob, run by training-operator",
      given: "PyTorchJob",
      kind: "PyTorchJob",
      group: "kubeflow.org",
      deployment: "training-operator",
      finished: ["Succeeded", "Failed"],
    },
    {
      name: "a plural with its group → TFJob",
      given: "tfjobs.kubeflow.org",
      kind: "TFJob",
      group: "kubeflow.org",
      deployment: "training-operator",
      finished: ["Succeeded", "Failed"],
    },
    {
      name: "caffe2job → run by Quartermaster's reconciler",
      given: "caffe2job",
      kind: "Caffe2Job",
      group: "kubeflow.org",
      deployment: "quartermaster-reconciler",
      finished: ["Succeeded", "Failed"],
    },
    {
      name: "trainjob → the Trainer's controller manager",
      given: "trainjob",
      kind: "TrainJob",
      group: "trainer.kubeflow.org",
      deployment: "kubeflow-trainer-controller-manager",
      finished: ["Complete", "Failed"],
    },
    {
      name: "jobset → the JobSet controller",
      given: "JobSet",
      kind: "JobSet",
      group: "jobset.x-k8s.io",
      deployment: "jobset-controller-manager",
      finished: ["Completed", "Failed"],
    },
    { name: "job → batch/v1 Job, kube-controller-manager (no Deployment)", given: "job", kind: "Job", group: "batch", finished: ["Complete", "Failed"] },
    { name: "jobs.batch → batch/v1 Job", given: "jobs.batch", kind: "Job", group: "batch", finished: ["Complete", "Failed"] },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const k = resolveKind(tc.given, kinds);
      assert.ok(!("problem" in k), JSON.stringify(k));
      assert.deepEqual([k.kind, k.group, k.deployment, [...k.finishedConditions]], [tc.kind, tc.group, tc.deployment, tc.finished]);
    });
  it("an unknown kind → a problem naming the known ones", () => {
    const k = resolveKind("rayjob", kinds);
    assert.ok("problem" in k && /unknown kind rayjob; known: TFJob, PyTorchJob/.test(k.problem));
  });
  it("TrainJob is listed once though the policy has it", () => assert.equal(kinds.filter((k) => k.kind === "TrainJob").length, 1));
});
