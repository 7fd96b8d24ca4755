/**
 * One count of GPUs for every name a GPU can be asked for by (issue 45, findings 1 and 2): a bare `gpu` in a job's
 * templates (renamed in its pods by `/mutate/pods`), the extended-resource names of a GPU DeviceClass
 * (`deviceclass.resource.kubernetes.io/<class>`, a class's `extendedResourceName`), and GPU-looking names the
 * policy does not list (rule `gpu-unknown`). Each attack below was admitted before.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import { countedAs, effectivePodGpuNanos, sentAsGpu } from "../../../src/core/gpu.js";
import { QUEUED_WORKLOAD_KINDS } from "../../../src/core/job-shapes.js";
import { validateWorkload } from "../../../src/validate/workload.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { trainingPodExpression } from "../../../src/manifests/webhooks.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { looksLikeGpu } from "../../../src/vendors/index.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { container, ctx as mutationCtx, testPod } from "../../fixtures/pods.js";
import { mutatePod } from "../../../src/mutate/index.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const capped = checkPolicy(
  {
    gpu: { deviceClasses: [{ name: "gpu.nvidia.com", resourceName: "nvidia.com/gpu", extendedResourceName: "example.com/dra-gpu" }] },
    limits: { container: { gpus: { "nvidia.com/gpu": 8 } }, pod: { gpus: 8 }, job: { gpus: 16 } },
  },
  "capped",
);
const uncapped = checkPolicy({}, "uncapped");
const ctxOf = (policy = capped): ValidationContext => ({ policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") });

/** A PyTorchJob of `workers` Workers whose one container asks for `resources` (limits and requests alike). */
function pytorchJob(workers: number, resources: Record<string, string>): KubeObject {
  const j = structuredClone(job("PyTorchJob", "attack", "team-a", { Master: 1, Worker: workers }));
  const specs = (j.spec as { pytorchReplicaSpecs: Record<string, { template: { spec: V1PodSpec } }> }).pytorchReplicaSpecs;
  specs.Master!.template.spec.containers[0]!.resources = {};
  specs.Worker!.template.spec.containers[0]!.resources = { limits: { ...resources }, requests: { ...resources } };
  return j;
}
const rulesOf = (f: { violations: Array<{ rule: string; field: string; value?: number }> }): string[] =>
  f.violations.map((v) => `${v.rule} ${v.field}${v.value !== undefined ? ` = ${v.value}` : ""}`);

describe("countedAs: the resource each name counts as", () => {
  const cases: Array<[name: string, counted: string | undefined]> = [
    ["nvidia.com/gpu", "nvidia.com/gpu"],
    ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb"],
    ["amd.com/gpu", "amd.com/gpu"],
    ["gpu", "nvidia.com/gpu"],
    ["deviceclass.resource.kubernetes.io/gpu.nvidia.com", "nvidia.com/gpu"],
    ["deviceclass.resource.kubernetes.io/mig.nvidia.com", undefined], // not a class of this policy
    ["example.com/dra-gpu", "nvidia.com/gpu"],
    ["cpu", undefined],
    ["example.com/nic", undefined],
  ];
  for (const [name, want] of cases) it(`${name} → ${String(want)}`, () => assert.equal(countedAs(name, capped.gpu), want));

  it("the default policy counts every vendor class's implicit name", () => {
    assert.equal(countedAs("deviceclass.resource.kubernetes.io/gpu.amd.com", uncapped.gpu), "amd.com/gpu");
    assert.equal(countedAs("deviceclass.resource.kubernetes.io/mig.nvidia.com", uncapped.gpu), "nvidia.com/mig-any");
  });

  it("two names of one resource add up in the pod's count", () => {
    const spec = testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": "2", gpu: "3" } })] } }).spec!;
    assert.deepEqual([...effectivePodGpuNanos(spec, capped.gpu)], [["nvidia.com/gpu", 5_000_000_000n]]);
  });
});

describe("looksLikeGpu", () => {
  const cases: Array<[string, boolean]> = [
    ["example.com/gpu", true],
    ["nvidia.com/gpu.shared", true],
    ["vfio.gpu.nvidia.com", true],
    ["gpu.example.com", true],
    ["deviceclass.resource.kubernetes.io/vgpu.example.com", true],
    ["example.com/gpus", true],
    ["gpu.amd.com", true],
    ["example.com/nic", false],
    ["example.com/migration-slots", false],
    ["rdma/hca_shared_devices_a", false],
    ["cpu", false],
  ];
  for (const [name, want] of cases) it(`${name} → ${want}`, () => assert.equal(looksLikeGpu(name), want));
});

describe("the job caps count every name of a GPU (findings 1 and 2)", () => {
  const cases: Array<[name: string, job: KubeObject, want: string[]]> = [
    // Finding 1: 16 pods × `gpu: 8` passed a 16-GPU job cap, then /mutate/pods renamed each to nvidia.com/gpu: 128.
    ["bare gpu × 16 workers", pytorchJob(16, { gpu: "8" }), ["job-gpus spec = 128"]],
    // Finding 2: DRA's implicit extended-resource name counted 0.
    [
      "deviceclass.resource.kubernetes.io/gpu.nvidia.com × 16 workers",
      pytorchJob(16, { "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8" }),
      ["job-gpus spec = 128"],
    ],
    ["a DeviceClass's extendedResourceName × 16", pytorchJob(16, { "example.com/dra-gpu": "8" }), ["job-gpus spec = 128"]],
    [
      "bare gpu over the per-container cap of its resource",
      pytorchJob(1, { gpu: "9" }),
      [
        "container-limits spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits[gpu] = 9",
        "pod-gpus spec.pytorchReplicaSpecs.Worker.template.spec = 9",
      ],
    ],
    ["bare gpu within every cap", pytorchJob(2, { gpu: "8" }), []],
    [
      "a GPU-looking name the policy does not know",
      pytorchJob(1, { "example.com/gpu": "64" }),
      ["gpu-unknown spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits[example.com/gpu]"],
    ],
    ["a name that is no GPU", pytorchJob(16, { "example.com/nic": "8" }), []],
  ];
  for (const [name, j, want] of cases) {
    it(name, () => {
      const found = validateJob(deepFreeze(j), kindOf("PyTorchJob"), ctxOf());
      assert.deepEqual(
        rulesOf(found).filter((r) => !r.startsWith("job-shape") && !r.startsWith("extended-resources")),
        want,
      );
    });
  }

  it("without a GPU cap, a GPU-looking name is no refusal", () => {
    assert.deepEqual(rulesOf(validateJob(pytorchJob(16, { "example.com/gpu": "64" }), kindOf("PyTorchJob"), ctxOf(uncapped))), []);
  });
});

describe("the pod caps count DRA's extended-resource names (finding 2)", () => {
  const pod = (resources: Record<string, string>) => testPod({ spec: { containers: [container({ limits: resources, requests: resources })] } });
  const cases: Array<[string, ReturnType<typeof testPod>, string[]]> = [
    [
      "16 through the implicit name",
      pod({ "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "16" }),
      ["container-limits spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/gpu.nvidia.com] = 16", "pod-gpus spec = 16"],
    ],
    ["8 through the implicit name", pod({ "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "8" }), []],
    [
      "4 + 8 through two names of nvidia.com/gpu",
      pod({ "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "4", "nvidia.com/gpu": "8" }),
      ["pod-gpus spec = 12"],
    ],
    [
      "a class the policy does not list",
      pod({ "deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com": "64" }),
      ["gpu-unknown spec.containers[0].resources.limits[deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com]"],
    ],
  ];
  for (const [name, p, want] of cases) it(name, () => assert.deepEqual(rulesOf(validatePod(deepFreeze(p), ctxOf())), want));
});

describe("the webhooks' match condition sends such pods (finding 2: skipped before)", () => {
  const text = trainingPodExpression(capped);
  const cases: Array<[string, string]> = [
    ["a GPU DeviceClass's implicit name", "r == 'deviceclass.resource.kubernetes.io/gpu.nvidia.com'"],
    ["a class's extendedResourceName", "r == 'example.com/dra-gpu'"],
    ["a GPU-looking name (a word gpu or mig)", "r.matches('(?i)(^|[./_-])(mig|v?gpus?[0-9]*)([./_-]|$)')"],
  ];
  for (const [name, cel] of cases) it(`${name}: ${cel}`, () => assert.ok(text.includes(cel), text));
});

describe("outfitting: a DeviceClass's extended-resource name lands like its resource (finding 2)", () => {
  const pod = testPod({ spec: { containers: [container({ limits: { "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1" } })] } });
  it("gets the nvidia.com/gpu toleration, and mutating again changes nothing", () => {
    const once = mutatePod(deepFreeze(pod), mutationCtx());
    assert.deepEqual(
      (once.pod.spec?.tolerations ?? []).map((t) => t.key),
      ["nvidia.com/gpu"],
    );
    const twice = mutatePod(deepFreeze(once.pod), mutationCtx());
    assert.deepEqual(twice.applied, []);
  });
});

describe("cluster safety: a name that merely contains gpu or mig is no GPU (review finding)", () => {
  const cases: Array<[string, boolean]> = [
    ["example.com/migration-slot", false],
    ["example.com/gpumem", false],
    ["deviceclass.resource.kubernetes.io/nic.example.com", false],
    ["deviceclass.resource.kubernetes.io/gpu.nvidia.com", true],
    ["example.com/gpu", true],
    ["nvidia.com/mig-1g.10gb", true],
    ["gpu", true],
  ];
  for (const [name, want] of cases) it(`sentAsGpu(${name}) → ${want}`, () => assert.equal(sentAsGpu(name, capped.gpu), want));

  it("a batch Job asking for example.com/migration-slot and 64 cpu, under a 4-cpu cap, meets no rule", () => {
    const policy = checkPolicy({ limits: { container: { cpu: "4" }, job: { gpus: 8 } } }, "safety");
    const ctx = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };
    const job = {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "etl", namespace: "team-a" },
      spec: { template: { spec: { containers: [{ name: "m", image: "x", resources: { limits: { "example.com/migration-slot": "1", cpu: "64" } } }] } } },
    } as KubeObject;
    assert.deepEqual(
      validateWorkload(
        job,
        QUEUED_WORKLOAD_KINDS.find((k) => k.kind === "Job")!,
        ctx,
      ),
      { violations: [], warnings: [] },
    );
  });
});
