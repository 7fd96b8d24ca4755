import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { effectivePodGpus } from "../../../src/core/gpu.js";
import { jobGpusByResource, newOrWorse, validateCapacity, validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { container, testPod } from "../../fixtures/pods.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const strict = checkPolicy(
  {
    limits: {
      container: { cpu: "4", memory: "16Gi", gpus: { "nvidia.com/gpu": 8, "nvidia.com/mig-*": 2 } },
      pod: { gpus: 8 },
      job: { gpus: 16, replicas: { Worker: 4 } },
      runPolicy: {
        requireTtlSecondsAfterFinished: true,
        maxTtlSecondsAfterFinished: 86400,
        maxActiveDeadlineSeconds: 3600,
        maxBackoffLimit: 3,
        allowedCleanPodPolicies: ["All", "Running"],
        allowedRestartPolicies: ["OnFailure", "Never", "ExitCode"],
      },
      allowedAccelerators: ["A100-SXM4-40GB", "H100-SXM5-80GB"],
    },
    namespaces: [{ pattern: "research-*", limits: { container: { gpus: { "nvidia.com/gpu": 16 } }, pod: { gpus: 16 } } }],
  },
  "strict",
);
const ctx = (namespace = "team-a"): ValidationContext => ({ policy: strict, namespace, limits: effectiveLimits(strict, namespace) });
type Want = Array<[rule: string, field: string, message: string]>;
const got = (f: { violations: Array<{ rule: string; field: string; message: string }> }): Want => f.violations.map((v) => [v.rule, v.field, v.message]);

describe("validatePod", () => {
  const successCases: Array<[string, V1Pod]> = [
    ["no resources", testPod()],
    [
      "8 GPUs, request == limit, 4 cpu",
      testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "8", cpu: "4" }, requests: { "nvidia.com/gpu": "8", cpu: "4" } })] } }),
    ],
    ["MIG slices only", testPod({ spec: { containers: [container({ limits: { "nvidia.com/mig-1g.5gb": "2" } })] } })],
    ["allowed accelerator", testPod({ annotations: { "quartermaster.dev/accelerator": "H100-SXM5-80GB" } })],
    [
      "init container GPUs do not add to the containers'",
      testPod({
        spec: { initContainers: [container({ name: "i", limits: { "nvidia.com/gpu": "8" } })], containers: [container({ limits: { "nvidia.com/gpu": "8" } })] },
      }),
    ],
  ];
  for (const [name, pod] of successCases) it(`${name} → allowed`, () => assert.deepEqual(got(validatePod(deepFreeze(pod), ctx())), []));

  const errorCases: Array<[string, V1Pod, Want]> = [
    [
      "16 GPUs in one container",
      testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "16" } })] } }),
      [
        ["container-limits", "spec.containers[0].resources.limits[nvidia.com/gpu]", "16 exceeds the per-container limit of 8"],
        ["pod-gpus", "spec", "the pod requests 16 GPUs, over the per-pod limit of 8"],
      ],
    ],
    [
      "cpu and memory over the limit, in an init container too",
      testPod({
        spec: {
          initContainers: [container({ name: "i", requests: { cpu: "4500m" } })],
          containers: [container({ requests: { memory: "17Gi" }, limits: { memory: "32Gi" } })],
        },
      }),
      [
        ["container-limits", "spec.initContainers[0].resources.requests[cpu]", "4500m exceeds the per-container limit of 4"],
        ["container-limits", "spec.containers[0].resources.requests[memory]", "17Gi exceeds the per-container limit of 16Gi"],
        ["container-limits", "spec.containers[0].resources.limits[memory]", "32Gi exceeds the per-container limit of 16Gi"],
      ],
    ],
    [
      "request equal to an over-limit limit → reported once, at the limit",
      testPod({ spec: { containers: [container({ requests: { "nvidia.com/gpu": "9" }, limits: { "nvidia.com/gpu": "9" } })] } }),
      [
        ["container-limits", "spec.containers[0].resources.limits[nvidia.com/gpu]", "9 exceeds the per-container limit of 8"],
        ["pod-gpus", "spec", "the pod requests 9 GPUs, over the per-pod limit of 8"],
      ],
    ],
    [
      "a MIG pattern limit",
      testPod({ spec: { containers: [container({ limits: { "nvidia.com/mig-1g.5gb": "3" } })] } }),
      [["container-limits", "spec.containers[0].resources.limits[nvidia.com/mig-1g.5gb]", "3 exceeds the per-container limit of 2"]],
    ],
    [
      "fractional GPU, request != limit",
      testPod({ spec: { containers: [container({ requests: { "nvidia.com/gpu": "500m" }, limits: { "nvidia.com/gpu": "1" } })] } }),
      [
        ["extended-resources", "spec.containers[0].resources.requests[nvidia.com/gpu]", "500m must be a whole number: nvidia.com/gpu cannot be shared"],
        ["extended-resources", "spec.containers[0].resources.requests[nvidia.com/gpu]", "request 500m must equal limit 1: nvidia.com/gpu is not overcommitted"],
      ],
    ],
    [
      "GPU request without a limit",
      testPod({ spec: { containers: [container({ requests: { "nvidia.com/gpu": "1" } })] } }),
      [["extended-resources", "spec.containers[0].resources.limits[nvidia.com/gpu]", "a limit is required and must equal the request 1"]],
    ],
    [
      "whole GPUs and MIG slices in one container",
      testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "1", "nvidia.com/mig-1g.5gb": "1" } })] } }),
      [
        [
          "gpu-mig-mixing",
          "spec.containers[0].resources",
          "asks for whole GPUs (nvidia.com/gpu) and MIG slices (nvidia.com/mig-1g.5gb) at once; use one or the other",
        ],
      ],
    ],
    [
      "pod total over 8 across containers and a native sidecar",
      testPod({
        spec: {
          initContainers: [{ ...container({ name: "side", limits: { "nvidia.com/gpu": "1" } }), restartPolicy: "Always" }],
          containers: [container({ limits: { "nvidia.com/gpu": "4" } }), container({ name: "b", limits: { "nvidia.com/gpu": "4" } })],
        },
      }),
      [["pod-gpus", "spec", "the pod requests 9 GPUs, over the per-pod limit of 8"]],
    ],
    [
      "an accelerator not allowed here",
      testPod({ annotations: { "quartermaster.dev/accelerator": "T4" } }),
      [
        [
          "accelerator-allowed",
          "metadata.annotations[quartermaster.dev/accelerator]",
          "accelerator T4 is not allowed in namespace team-a; allowed: A100-SXM4-40GB, H100-SXM5-80GB",
        ],
      ],
    ],
    [
      "a quantity that is not one",
      testPod({ spec: { containers: [container({ limits: { cpu: "lots" } })] } }),
      [["quantity", "spec.containers[0].resources.limits[cpu]", "lots is not a valid quantity"]],
    ],
  ];
  for (const [name, pod, want] of errorCases) it(`${name} → exactly these violations`, () => assert.deepEqual(got(validatePod(deepFreeze(pod), ctx())), want));

  it("namespace override (research-*): 16 GPUs allowed there, defaults kept for the rest", () => {
    const pod = testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "16", cpu: "8" } })] } });
    assert.deepEqual(got(validatePod(pod, ctx("research-vision"))), [
      ["container-limits", "spec.containers[0].resources.limits[cpu]", "8 exceeds the per-container limit of 4"],
    ]);
  });

  it("near a limit → a warning, not a denial", () => {
    const f = validatePod(testPod({ spec: { containers: [container({ limits: { cpu: "3800m" } })] } }), ctx());
    assert.deepEqual(f.violations, []);
    assert.deepEqual(f.warnings, ["quartermaster: spec.containers[0].resources.limits[cpu] 3800m is near the per-container limit of 4"]);
  });
});

describe("effectivePodGpus", () => {
  const cases: Array<[string, V1Pod, number]> = [
    [
      "sum of containers",
      testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "2" } }), container({ name: "b", limits: { "nvidia.com/gpu": "3" } })] } }),
      5,
    ],
    [
      "an init container larger than the containers",
      testPod({
        spec: { initContainers: [container({ name: "i", limits: { "nvidia.com/gpu": "6" } })], containers: [container({ limits: { "nvidia.com/gpu": "2" } })] },
      }),
      6,
    ],
    [
      "sidecars add to containers and to later init containers",
      testPod({
        spec: {
          initContainers: [
            { ...container({ name: "s", limits: { "nvidia.com/gpu": "1" } }), restartPolicy: "Always" },
            container({ name: "i", limits: { "nvidia.com/gpu": "4" } }),
          ],
          containers: [container({ limits: { "nvidia.com/gpu": "2" } })],
        },
      }),
      5,
    ],
  ];
  for (const [name, pod, want] of cases) it(`${name} → ${want}`, () => assert.equal(effectivePodGpus(pod.spec!, ctx().policy.gpu).get("nvidia.com/gpu"), want));
});

describe("validateJob", () => {
  const tf = (replicas: Record<string, number>, spec: Record<string, unknown> = {}, name = "mnist"): KubeObject =>
    job("TFJob", name, "team-a", replicas, { runPolicy: { ttlSecondsAfterFinished: 3600, cleanPodPolicy: "Running" }, ...spec });
  const gpuTf = (workers: number, gpus: string): KubeObject => {
    const j = structuredClone(tf({ Worker: workers })) as any;
    j.spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": gpus } };
    return deepFreeze(j);
  };
  it("a well-formed job under the limits → allowed", () => assert.deepEqual(got(validateJob(tf({ Chief: 1, Worker: 4, PS: 1 }), kindOf("TFJob"), ctx())), []));
  it("a 50-character job name: its longest pod name (59 characters) is fine", () =>
    assert.deepEqual(got(validateJob(tf({ Worker: 2 }, {}, "a".repeat(50)), kindOf("TFJob"), ctx())), []));

  const errorCases: Array<[string, KubeObject, Want]> = [
    [
      "name not DNS-1035",
      tf({ Worker: 1 }, {}, "MNIST_1"),
      [
        [
          "job-name",
          "metadata.name",
          "\"MNIST_1\" must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter, at most 63 characters",
        ],
      ],
    ],
    [
      "two chiefs and a master",
      tf({ Chief: 2, Master: 1, Worker: 1 }),
      [["job-shape", "spec.tfReplicaSpecs", "at most one Chief or Master replica in all, got 3"]],
    ],
    ["5 workers over a cap of 4", tf({ Worker: 5 }), [["job-replicas", "spec.tfReplicaSpecs.Worker.replicas", "5 exceeds the limit of 4 Worker replicas"]]],
    ["4 workers × 8 GPUs = 32 over 16", gpuTf(4, "8"), [["job-gpus", "spec", "the job requests 32 GPUs in all, over the per-job limit of 16"]]],
    [
      "run policy: no TTL, too long a deadline, too many retries, cleanPodPolicy None",
      job("TFJob", "mnist", "team-a", { Worker: 1 }, { runPolicy: { activeDeadlineSeconds: 7200, backoffLimit: 10, cleanPodPolicy: "None" } }),
      [
        ["run-policy", "spec.runPolicy.ttlSecondsAfterFinished", "is required: finished jobs must be cleaned up"],
        ["run-policy", "spec.runPolicy.activeDeadlineSeconds", "7200 exceeds the limit of 3600 seconds"],
        ["run-policy", "spec.runPolicy.backoffLimit", "10 exceeds the limit of 3 retries"],
        ["run-policy", "spec.runPolicy.cleanPodPolicy", "None is not allowed; allowed: All, Running"],
      ],
    ],
    [
      "no tensorflow container, a container without an image",
      (() => {
        const j = structuredClone(tf({ Worker: 1 })) as any;
        j.spec.tfReplicaSpecs.Worker.template.spec.containers = [{ name: "main" }];
        return deepFreeze(j);
      })(),
      [
        ["job-shape", "spec.tfReplicaSpecs.Worker.template.spec.containers", "one container must be named tensorflow"],
        ["job-shape", "spec.tfReplicaSpecs.Worker.template.spec.containers[0].image", "an image is required"],
      ],
    ],
    [
      "a template over the per-container GPU limit → its own path",
      gpuTf(1, "9"),
      [
        [
          "container-limits",
          "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
          "9 exceeds the per-container limit of 8",
        ],
        ["pod-gpus", "spec.tfReplicaSpecs.Worker.template.spec", "the pod requests 9 GPUs, over the per-pod limit of 8"],
      ],
    ],
  ];
  for (const [name, j, want] of errorCases) {
    it(`${name} → exactly these violations`, () => assert.deepEqual(got(validateJob(j, kindOf("TFJob"), ctx())), want));
  }

  it("pod names: a 55-character job name makes worker-10 65 characters", () => {
    const name = "a".repeat(55);
    assert.deepEqual(got(validateJob(tf({ Worker: 11 }, {}, name), kindOf("TFJob"), { ...ctx(), limits: { ...ctx().limits, job: {} } })), [
      ["job-name", "metadata.name", `pod name ${name}-worker-10 would be 65 characters, over 63: shorten the job name`],
    ]);
  });

  it("PyTorch: Master with 2 replicas; deprecated elasticPolicy.nProcPerNode → warning", () => {
    const pt = job("PyTorchJob", "pt", "team-a", { Master: 2, Worker: 1 }, { runPolicy: { ttlSecondsAfterFinished: 60 }, elasticPolicy: { nProcPerNode: 4 } });
    const f = validateJob(pt, kindOf("PyTorchJob"), ctx());
    assert.deepEqual(got(f), [["job-shape", "spec.pytorchReplicaSpecs.Master.replicas", "the Master replica type must have exactly 1 replica, got 2"]]);
    assert.deepEqual(f.warnings, ["quartermaster: spec.elasticPolicy.nProcPerNode is deprecated; use spec.nprocPerNode"]);
  });

  it("restartPolicy Always is not allowed by this policy; ExitCode is", () => {
    const j = structuredClone(tf({ Worker: 1, PS: 1 })) as any;
    j.spec.tfReplicaSpecs.Worker.restartPolicy = "Always";
    j.spec.tfReplicaSpecs.PS.restartPolicy = "ExitCode";
    assert.deepEqual(got(validateJob(j, kindOf("TFJob"), ctx())), [
      ["run-policy", "spec.tfReplicaSpecs.Worker.restartPolicy", "Always is not allowed; allowed: OnFailure, Never, ExitCode"],
    ]);
  });

  describe("UPDATE: only what the update makes worse", () => {
    const over = tf({ Worker: 6 });
    const kind = kindOf("TFJob");
    const check = (before: KubeObject, after: KubeObject) => got(newOrWorse(validateJob(after, kind, ctx()), validateJob(before, kind, ctx())));
    it("already over a lowered cap, labels changed → allowed", () => {
      const relabelled = deepFreeze({ ...over, metadata: { ...(over.metadata as object), labels: { team: "x" } } });
      assert.deepEqual(check(over, relabelled), []);
    });
    it("already over, scaled down but still over → allowed", () => assert.deepEqual(check(over, tf({ Worker: 5 })), []));
    it("already over, scaled further up → refused", () =>
      assert.deepEqual(check(over, tf({ Worker: 7 })), [["job-replicas", "spec.tfReplicaSpecs.Worker.replicas", "7 exceeds the limit of 4 Worker replicas"]]));
    it("a new kind of violation → refused", () => {
      assert.deepEqual(check(over, tf({ Worker: 6 }, { runPolicy: { ttlSecondsAfterFinished: 3600, cleanPodPolicy: "None" } })), [
        ["run-policy", "spec.runPolicy.cleanPodPolicy", "None is not allowed; allowed: All, Running"],
      ]);
    });
  });
});

describe("validateCapacity", () => {
  const j = (() => {
    const x = structuredClone(job("PyTorchJob", "pt", "team-a", { Master: 1, Worker: 3 })) as any;
    for (const t of ["Master", "Worker"]) x.spec.pytorchReplicaSpecs[t].template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": "8" } };
    return deepFreeze(x) as KubeObject;
  })();
  const kind = kindOf("PyTorchJob");
  it("job GPUs by resource: 4 replicas × 8", () => assert.deepEqual([...jobGpusByResource(j, kind, ctx())], [["nvidia.com/gpu", 32]]));
  it("no ledger → skipped with a warning", () =>
    assert.deepEqual(validateCapacity(j, kind, ctx(), undefined), {
      violations: [],
      warnings: ["quartermaster: cluster capacity not checked: no GPU device ledger yet"],
    }));
  it("no GPUs asked → no warning either", () =>
    assert.deepEqual(validateCapacity(job("PyTorchJob", "pt", "team-a", { Worker: 1 }), kind, ctx(), undefined), { violations: [], warnings: [] }));
  it("enough GPUs in the cluster → allowed", () => assert.deepEqual(got(validateCapacity(j, kind, ctx(), { total: () => 32 })), []));
  it("more than the whole cluster has → refused up front", () => {
    assert.deepEqual(got(validateCapacity(j, kind, ctx(), { total: (r) => (r === "nvidia.com/gpu" ? 24 : undefined) })), [
      ["capacity", "spec", "the job asks for 32 nvidia.com/gpu but the whole cluster has 24; it would never be scheduled"],
    ]);
  });
});
