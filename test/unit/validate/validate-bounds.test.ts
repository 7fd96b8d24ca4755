/**
 * Limits that must not be got around with odd values (issue 16, items 3 and 8): quantities that parsed to NaN,
 * are too long or out of range, non-integer GPU counts, and strings where a count is capped.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { parsePolicy } from "../../../src/policy/parse.js";
import { validateCapacity, validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import { validatePod } from "../../../src/validate/pod.js";
import type { ValidationContext } from "../../../src/validate/types.js";
import { job, kindOf } from "../../fixtures/jobs.js";
import { container, testPod } from "../../fixtures/pods.js";
import { policyProblems } from "../../fixtures/policies.js";
import { deepFreeze } from "../../fixtures/reviews.js";

const policy = checkPolicy(
  {
    limits: {
      container: { cpu: "4", memory: "16Gi", gpus: { "nvidia.com/gpu": 8 } },
      pod: { gpus: 8 },
      job: { gpus: 32 },
      runPolicy: { requireTtlSecondsAfterFinished: true, maxTtlSecondsAfterFinished: 86400, maxActiveDeadlineSeconds: 3600, maxBackoffLimit: 3 },
    },
  },
  "bounds",
);
const ctx: ValidationContext = { policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") };
type Want = Array<[rule: string, field: string]>;
const fields = (f: { violations: Array<{ rule: string; field: string }> }): Want => f.violations.map((v) => [v.rule, v.field]);

/** 8 GPUs written so that floating point gives NaN (8e309 / 1e309 = Infinity / Infinity). */
const EIGHT = "8." + "0".repeat(309);
const C0 = "spec.containers[0].resources.limits[nvidia.com/gpu]";

describe("pods: quantities that must not pass", () => {
  const cases: Array<[string, unknown, Want]> = [
    [
      "136 GPUs written long (was NaN: passed the pod cap of 8)",
      "136." + "0".repeat(309),
      [
        ["container-limits", C0],
        ["pod-gpus", "spec"],
      ],
    ],
    ["a quantity over the length bound", "1".padEnd(2000, "0"), [["quantity", C0]]],
    ["1M characters", "8." + "0".repeat(1_000_000), [["quantity", C0]]],
    ["out of range (1e1001)", "1e1001", [["quantity", C0]]],
    ["a negative GPU count", "-8", [["quantity", C0]]],
    ["a fraction of a GPU", "1500m", [["extended-resources", C0]]],
    ["an object where a quantity belongs", { n: 136 }, [["quantity", C0]]],
  ];
  for (const [name, value, want] of cases) {
    it(`${name} → ${want.map((w) => w[0]).join(", ")}`, () => {
      const pod = testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": value as string } })] } }) as V1Pod;
      assert.deepEqual(fields(validatePod(deepFreeze(pod), ctx)), want);
    });
  }

  // Nothing denied by default: where no limit applies, a value Quartermaster cannot compare is the apiserver's call.
  const uncapped = checkPolicy({}, "defaults");
  const uncappedCtx: ValidationContext = { policy: uncapped, namespace: "team-a", limits: effectiveLimits(uncapped, "team-a") };
  const only: Array<[string, string, string, Want, Want]> = [
    // [name, resource, value, under the capped policy, under the built-in policy]
    ["cpu out of range", "cpu", "100E", [["quantity", "spec.containers[0].resources.requests[cpu]"]], []],
    ["cpu 1e1001", "cpu", "1e1001", [["quantity", "spec.containers[0].resources.requests[cpu]"]], []],
    ["an uncapped extended resource out of range", "example.com/fpga", "1e1001", [], []],
    [
      "a GPU count out of range (summed by pod, job and capacity limits)",
      "nvidia.com/gpu",
      "1e1001",
      [["quantity", "spec.containers[0].resources.requests[nvidia.com/gpu]"]],
      [["quantity", "spec.containers[0].resources.requests[nvidia.com/gpu]"]],
    ],
  ];
  for (const [name, resource, value, capped, builtIn] of only) {
    it(`${name}: a violation only where a limit applies`, () => {
      const pod = testPod({ spec: { containers: [container({ requests: { [resource]: value } })] } }) as V1Pod;
      assert.deepEqual(
        fields(validatePod(deepFreeze(pod), ctx)).filter(([rule]) => rule === "quantity"),
        capped,
      );
      assert.deepEqual(
        fields(validatePod(deepFreeze(pod), uncappedCtx)).filter(([rule]) => rule === "quantity"),
        builtIn,
      );
    });
  }

  it("8 GPUs written long are 8: allowed", () => {
    const pod = testPod({ spec: { containers: [container({ limits: { "nvidia.com/gpu": EIGHT } })] } }) as V1Pod;
    assert.deepEqual(fields(validatePod(deepFreeze(pod), ctx)), []);
  });

  it("two containers of 8 GPUs written long: 16 over the pod cap of 8", () => {
    const pod = testPod({
      spec: { containers: [container({ limits: { "nvidia.com/gpu": EIGHT } }), container({ name: "b", limits: { "nvidia.com/gpu": EIGHT } })] },
    }) as V1Pod;
    const f = validatePod(deepFreeze(pod), ctx);
    assert.deepEqual(fields(f), [["pod-gpus", "spec"]]);
    assert.match(f.violations[0]!.message, /requests 16 GPUs/);
  });

  it("a negative GPU count in one container does not offset another's", () => {
    const pod = testPod({
      spec: {
        containers: [
          container({ limits: { "nvidia.com/gpu": "8" } }),
          container({ name: "b", limits: { "nvidia.com/gpu": "8" } }),
          container({ name: "c", limits: { "nvidia.com/gpu": "-8" } }),
        ],
      },
    }) as V1Pod;
    assert.deepEqual(fields(validatePod(deepFreeze(pod), ctx)), [
      ["quantity", "spec.containers[2].resources.limits[nvidia.com/gpu]"],
      ["pod-gpus", "spec"],
    ]);
  });
});

describe("jobs: a 136-GPU job must not pass a 32-GPU cap nor the capacity check", () => {
  const ttl = { runPolicy: { ttlSecondsAfterFinished: 3600 } };
  const gpuJob = (workers: number, gpus: string, extra: Record<string, unknown> = ttl): KubeObject => {
    const j = structuredClone(job("PyTorchJob", "big", "team-a", { Master: 1, Worker: workers }, extra)) as any;
    for (const t of ["Master", "Worker"]) j.spec.pytorchReplicaSpecs[t].template.spec.containers[0].resources = { limits: { "nvidia.com/gpu": gpus } };
    return deepFreeze(j);
  };
  const kind = kindOf("PyTorchJob");

  it("17 replicas × 8 GPUs written long: job-gpus (was NaN: passed)", () => {
    const f = validateJob(gpuJob(16, EIGHT), kind, ctx);
    assert.deepEqual(fields(f), [["job-gpus", "spec"]]);
    assert.match(f.violations[0]!.message, /requests 136 GPUs in all, over the per-job limit of 32/);
  });

  it("the capacity check too: 136 wanted, 32 in the cluster", () => {
    const f = validateCapacity(gpuJob(16, EIGHT), kind, ctx, { total: () => 32 });
    assert.deepEqual(fields(f), [["capacity", "spec"]]);
    assert.match(f.violations[0]!.message, /asks for 136 nvidia.com\/gpu but the whole cluster has 32/);
  });

  it("a capacity the ledger cannot count (NaN) is no capacity", () => {
    assert.deepEqual(fields(validateCapacity(gpuJob(1, "8"), kind, ctx, { total: () => Number.NaN })), [["capacity", "spec"]]);
  });

  it("3 replicas × 8 = 24 of 32: allowed, 4 × 8 = 32: allowed with a warning", () => {
    assert.deepEqual(fields(validateJob(gpuJob(2, EIGHT), kind, ctx)), []);
    const f = validateJob(gpuJob(3, "8"), kind, ctx);
    assert.deepEqual(fields(f), []);
    assert.ok(f.warnings.includes("quartermaster: the job requests 32 of the 32 GPUs allowed per job"), JSON.stringify(f.warnings));
  });

  const countCases: Array<[string, (j: any) => void, Want]> = [
    ['replicas: "3"', (j) => (j.spec.pytorchReplicaSpecs.Worker.replicas = "3"), [["job-replicas", "spec.pytorchReplicaSpecs.Worker.replicas"]]],
    [
      'replicas: "136" with 8 GPUs each',
      (j) => (j.spec.pytorchReplicaSpecs.Worker.replicas = "136"),
      [["job-replicas", "spec.pytorchReplicaSpecs.Worker.replicas"]],
    ],
    ["replicas: 2.5", (j) => (j.spec.pytorchReplicaSpecs.Worker.replicas = 2.5), [["job-replicas", "spec.pytorchReplicaSpecs.Worker.replicas"]]],
    ["replicas: -1", (j) => (j.spec.pytorchReplicaSpecs.Worker.replicas = -1), [["job-replicas", "spec.pytorchReplicaSpecs.Worker.replicas"]]],
    ["replicas: null", (j) => (j.spec.pytorchReplicaSpecs.Worker.replicas = null), [["job-replicas", "spec.pytorchReplicaSpecs.Worker.replicas"]]],
    [
      'ttlSecondsAfterFinished: "999999999"',
      (j) => (j.spec.runPolicy.ttlSecondsAfterFinished = "999999999"),
      [["run-policy", "spec.runPolicy.ttlSecondsAfterFinished"]],
    ],
    ['backoffLimit: "x"', (j) => (j.spec.runPolicy.backoffLimit = "x"), [["run-policy", "spec.runPolicy.backoffLimit"]]],
    ["backoffLimit: 1.5", (j) => (j.spec.runPolicy.backoffLimit = 1.5), [["run-policy", "spec.runPolicy.backoffLimit"]]],
    ['activeDeadlineSeconds: "7200"', (j) => (j.spec.runPolicy.activeDeadlineSeconds = "7200"), [["run-policy", "spec.runPolicy.activeDeadlineSeconds"]]],
    ["activeDeadlineSeconds: 1e300", (j) => (j.spec.runPolicy.activeDeadlineSeconds = 1e300), [["run-policy", "spec.runPolicy.activeDeadlineSeconds"]]],
  ];
  for (const [name, change, want] of countCases) {
    it(`${name} → a violation at its path`, () => {
      const j = structuredClone(gpuJob(1, "8")) as any;
      change(j);
      assert.deepEqual(fields(validateJob(deepFreeze(j), kind, ctx)), want);
    });
  }

  it("a string TTL is refused even without a TTL cap, when a TTL is required", () => {
    const p = checkPolicy({ limits: { runPolicy: { requireTtlSecondsAfterFinished: true } } }, "t");
    const j = gpuJob(1, "8", { runPolicy: { ttlSecondsAfterFinished: "forever" } });
    assert.deepEqual(fields(validateJob(j, kind, { policy: p, namespace: "team-a", limits: effectiveLimits(p, "team-a") })), [
      ["run-policy", "spec.runPolicy.ttlSecondsAfterFinished"],
    ]);
  });

  it("no cap on a field: its value is not judged", () => {
    const p = checkPolicy({}, "t");
    const j = gpuJob(1, "8", { runPolicy: { backoffLimit: "x" } });
    assert.deepEqual(fields(validateJob(j, kind, { policy: p, namespace: "team-a", limits: effectiveLimits(p, "team-a") })), []);
  });
});

describe("policy: quantities and caps in range", () => {
  const problems = policyProblems;

  it('cpu: "1e1001" is refused with its path (it disabled the limit)', () => {
    assert.deepEqual(problems('limits:\n  container:\n    cpu: "1e1001"\n'), [
      "limits.container.cpu: 1e1001 is out of range: the magnitude must be at most 2^63-1 (9223372036854775807)",
    ]);
  });

  it("every problem listed at once, each with its path", () => {
    const text = [
      "limits:",
      "  container:",
      '    cpu: "1e1001"',
      `    memory: "${"1".padEnd(1100, "0")}"`,
      "  job:",
      "    gpus: 1e300",
      "resources:",
      "  defaultRequests:",
      '    cpu: "9223372036854775808"',
      "namespaces:",
      "  - pattern: research-*",
      "    limits:",
      "      container:",
      '        cpu: "-1"',
    ].join("\n");
    const got = problems(text).map((p) => p.split(":")[0]);
    assert.deepEqual(got, [
      "limits.container.cpu",
      "limits.container.memory",
      "limits.job.gpus",
      "namespaces[0].limits.container.cpu",
      "resources.defaultRequests.cpu",
    ]);
  });

  it("quantities in range pass: the largest, and 8 written long", () => {
    parsePolicy(`limits:\n  container:\n    cpu: "9223372036854775807"\n    memory: "${EIGHT}Gi"\n`, "ok.yaml");
  });
});
