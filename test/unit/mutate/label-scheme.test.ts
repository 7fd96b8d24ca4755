/**
 * Each job kind's label scheme (src/kinds/): Kubeflow's for the six Kubeflow kinds,
 * caffe2-operator's for Caffe2Job, and what reads it (claim selector, replica lookup, Caffe2's RUN_ID).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { clusterSpec } from "../../../src/mutate/frameworks.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { buildLedger } from "../../../src/ledger/compute.js";
import { claimSelector } from "../../../src/reconcile/claim.js";
import { caffe2RuntimeId, KEY_LABELS, labelScheme } from "../../../src/kinds/index.js";
import { replicaOf } from "../../../src/membership/resolve.js";
import { gpuPod, node, nodeLease } from "../../fixtures/cluster.js";
import { job, kindOf, topology } from "../../fixtures/jobs.js";

describe("label schemes per kind", () => {
  const cases: Array<[string, string, Record<string, string>, string, string, boolean]> = [
    [
      "TFJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "tfjob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    [
      "PyTorchJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "pytorchjob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    [
      "MXJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "mxjob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    [
      "XGBoostJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "xgboostjob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    [
      "PaddleJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "paddlejob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    [
      "JAXJob",
      "kubeflow",
      { "training.kubeflow.org/job-name": "j", "training.kubeflow.org/operator-name": "jaxjob-controller" },
      "training.kubeflow.org/replica-type",
      "training.kubeflow.org/replica-index",
      true,
    ],
    ["Caffe2Job", "caffe2", { group_name: "kubeflow.org", caffe2_job_key: "ns-j", runtime_id: "r1" }, "caffe2_replica_type", "caffe2_replica_index", false],
  ];
  for (const [kind, scheme, selector, typeLabel, indexLabel, services] of cases) {
    it(`${kind}: ${scheme} scheme, selector ${JSON.stringify(selector)}, Services ${services}`, () => {
      const s = labelScheme(kindOf(kind));
      const j = job(kind, "j", "ns", { Worker: 1 }, { RuntimeID: "r1" });
      assert.equal(s.name, scheme);
      assert.deepEqual(s.selector(j), selector);
      assert.deepEqual(claimSelector(j, kindOf(kind)), selector);
      assert.equal(selector[s.key.label], s.key.value(j), "the key label is part of the selector");
      assert.deepEqual([s.replicaTypeLabel, s.replicaIndexLabel, s.services], [typeLabel, indexLabel, services]);
    });
  }
  it("a `/` in the name becomes `-` in the key (upstream GenLabels; caffe2-operator's jobKey replace)", () => {
    assert.equal(labelScheme(kindOf("TFJob")).key.value(job("TFJob", "a/b", "ns", { Worker: 1 })), "a-b");
    assert.equal(labelScheme(kindOf("Caffe2Job")).key.value(job("Caffe2Job", "a", "ns", { Worker: 1 })), "ns-a");
  });
  it("KEY_LABELS: job-name and caffe2_job_key", () => assert.deepEqual([...KEY_LABELS].sort(), ["caffe2_job_key", "training.kubeflow.org/job-name"]));
});

describe("Caffe2's runtime id: spec.RuntimeID as caffe2-operator stores it (no JSON tag)", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["spec.RuntimeID set", { RuntimeID: "run-7" }, "run-7"],
    ["unset → empty, as the operator's zero value", {}, ""],
    ["a lower-case runtimeId is not the operator's field", { runtimeId: "x" }, ""],
    ["not a string → empty", { RuntimeID: 7 }, ""],
  ];
  for (const [name, spec, want] of cases) {
    it(name, () => {
      const j = job("Caffe2Job", "c2", "default", { Worker: 2 }, spec);
      assert.equal(caffe2RuntimeId(j), want);
      const env = clusterSpec(topology(j, "Worker", 0), "default", "cluster.local");
      assert.ok(!("skip" in env));
      assert.equal(env.env.find((e) => e.name === "RUN_ID")?.value, want);
    });
  }
});

describe("replica lookup reads the scheme's labels", () => {
  it("a Caffe2 pod labelled by caffe2-operator (caffe2_replica_index) → worker i", () => {
    const j = job("Caffe2Job", "c2", "default", { Worker: 3 });
    const pod = { metadata: { name: "x", labels: { caffe2_replica_type: "worker", caffe2_replica_index: "2" } } };
    assert.deepEqual(replicaOf(pod as never, j, kindOf("Caffe2Job")), { replicaType: "Worker", index: 2 });
  });
  it("a TFJob pod with caffe2 labels only → no replica (its scheme's labels are missing)", () => {
    const j = job("TFJob", "t", "default", { Worker: 3 });
    const pod = { metadata: { name: "x", labels: { caffe2_replica_type: "worker", caffe2_replica_index: "2" } } };
    assert.ok("problem" in replicaOf(pod as never, j, kindOf("TFJob")));
  });
});

describe("the device ledger attributes a pod to its job by its scheme's key label", () => {
  const cases: Array<[string, Record<string, string>, string[]]> = [
    ["Kubeflow job-name", { "training.kubeflow.org/job-name": "mnist" }, ["team-a/mnist"]],
    ["caffe2-operator's caffe2_job_key <namespace>-<name>", { caffe2_job_key: "team-a-resnet", group_name: "kubeflow.org" }, ["team-a/resnet"]],
    ["a caffe2_job_key of another namespace → no job", { caffe2_job_key: "team-b-resnet" }, []],
    ["no key label → no job", { app: "x" }, []],
  ];
  for (const [name, labels, jobs] of cases) {
    it(name, () => {
      const pod = structuredClone(gpuPod("p", { node: "n1" })) as Record<string, any>;
      pod.metadata.labels = labels;
      const l = buildLedger(
        { nodes: [node("n1", { "nvidia.com/gpu": "8" })], nodeLeases: [nodeLease("n1", new Date("2026-11-22T00:00:00Z"))], pods: [pod], jobs: new Set() },
        new Date("2026-11-22T00:00:01Z"),
        defaultPolicy(),
      );
      assert.deepEqual(Object.keys(l.jobs), jobs);
    });
  }
});
