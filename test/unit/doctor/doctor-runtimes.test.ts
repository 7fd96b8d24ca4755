/**
 * `doctor` judges the cluster's Trainer runtimes against the GPU caps as `/validate/jobs` judges them at their CREATE
 * (issue 45: "doctor: runtimes over the caps"): one warning per runtime over them, naming the fields.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkRuntimes } from "../../../src/doctor/runtimes.js";
import { checkPolicy } from "../../../src/policy/load.js";

const policy = checkPolicy(
  {
    limits: { pod: { gpus: 4 } },
    namespaces: [{ pattern: "research-*", limits: { pod: { gpus: 16 } } }],
  },
  "doctor-runtimes",
);

/** A runtime whose one replicated Job `node` runs pods of `gpus` nvidia.com/gpu each. */
function runtime(kind: "ClusterTrainingRuntime" | "TrainingRuntime", name: string, gpus: number, namespace?: string): KubeObject {
  const resources = { limits: { "nvidia.com/gpu": String(gpus) }, requests: { "nvidia.com/gpu": String(gpus) } };
  return {
    apiVersion: "trainer.kubeflow.org/v1alpha1",
    kind,
    metadata: { name, ...(namespace ? { namespace } : {}) },
    spec: {
      template: {
        spec: { replicatedJobs: [{ name: "node", template: { spec: { template: { spec: { containers: [{ name: "node", image: "x", resources }] } } } } }] },
      },
    },
  };
}

describe("doctor: Trainer runtimes against the GPU caps", () => {
  const cases: Array<[string, Parameters<typeof checkRuntimes>[0], Array<[severity: string, subject: string]>]> = [
    ["no Trainer CRDs", "absent", []],
    ["not read", undefined, []],
    ["cannot list", { error: "forbidden" }, [["warning", "Trainer runtimes"]]],
    ["a ClusterTrainingRuntime within the caps", [runtime("ClusterTrainingRuntime", "torch", 4)], [["ok", "Trainer runtimes"]]],
    [
      "a ClusterTrainingRuntime over the pod cap",
      [runtime("ClusterTrainingRuntime", "torch-8", 8), runtime("ClusterTrainingRuntime", "torch", 4)],
      [["warning", "ClusterTrainingRuntime torch-8"]],
    ],
    ["a TrainingRuntime within its namespace's cap", [runtime("TrainingRuntime", "big", 16, "research-a")], [["ok", "Trainer runtimes"]]],
    ["a TrainingRuntime over its namespace's cap", [runtime("TrainingRuntime", "big", 16, "team-a")], [["warning", "TrainingRuntime team-a/big"]]],
  ];
  for (const [name, state, want] of cases) {
    it(name, () =>
      assert.deepEqual(
        checkRuntimes(state, policy).map((f) => [f.severity, f.subject]),
        want,
      ),
    );
  }

  it("the warning names the field and the count", () => {
    const [f] = checkRuntimes([runtime("ClusterTrainingRuntime", "torch-8", 8)], policy);
    assert.match(f!.message, /spec\.template\.spec\.replicatedJobs\[0\]\.template\.spec\.template\.spec: the pod requests 8 GPUs, over the per-pod limit of 4/);
    assert.equal(f!.check, "trainer-runtimes");
  });
});
