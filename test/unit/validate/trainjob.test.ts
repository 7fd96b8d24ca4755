/**
 * Kubeflow Trainer v2's TrainJob as one entry of the job-kind vocabulary (issue 32): its shape (replicas from
 * the runtime's JobSet template, src/kinds/trainjob-runtime.ts and trainjob.ts), `/validate/jobs` against the same caps
 * as v1 jobs with field paths into the TrainJob, `/mutate/jobs` job defaults, and the reconciler's decisions
 * (finished TrainJobs deleted only with a TTL someone set, uid preconditions, managedBy, ledger attribution).
 * Inputs: Trainer v2.3.0's own default runtimes and examples (test/fixtures/trainer-v2/).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ANNOTATION_TTL_AFTER_FINISHED } from "../../../src/core/job-shapes.js";
import { namespaceScope } from "../../../src/core/scope.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { jobPath } from "../../../src/kube/jobs.js";
import { fillJobDefaults } from "../../../src/mutate/job-defaults.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { quartermasterControls, type JobDefaults } from "../../../src/policy/types.js";
import { finishedAt, planFinishedJob } from "../../../src/reconcile/finished.js";
import { buildLedger } from "../../../src/ledger/compute.js";
import { managedElsewhere, planPass } from "../../../src/reconcile/plan.js";
import { jobShape, labelScheme } from "../../../src/kinds/index.js";
import { lookupTopology, readRuntime, runtimeKind } from "../../../src/membership/lookup.js";
import { jobRef, replicaOf, replicaSpecs } from "../../../src/membership/resolve.js";
import { trainJobReplicas } from "../../../src/kinds/trainjob-runtime.js";
import { validateCapacity, validateJob } from "../../../src/validate/job.js";
import { effectiveLimits } from "../../../src/validate/limits.js";
import type { Findings } from "../../../src/validate/types.js";
import { runtimeRead } from "../../../src/validate/job-review.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { applyPatch } from "../../../src/admission/patch.js";
import { capturingLogger } from "../../fixtures/https.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { gpuRuntime, perNode, trainJob, upstream } from "../../fixtures/trainer-v2.js";

const TJ = kindOf("TrainJob");
const torch = upstream("torch_distributed.yaml");
const deepspeed = upstream("deepspeed_distributed.yaml");

const ctxOf = (policy: ReturnType<typeof checkPolicy>) => ({ policy, namespace: "team-a", limits: effectiveLimits(policy, "team-a") });
const capped = checkPolicy({ limits: { job: { gpus: 32 } } }, "capped");
const brief = (f: Findings): string[] => f.violations.map((v) => `${v.rule} ${v.field}`).sort();

describe("TrainJob shape: replicas resolved against the runtime", () => {
  const cases: Array<{ name: string; job: KubeObject; runtime?: KubeObject; want: Array<[string, unknown, string]> }> = [
    {
      name: "01-multi-node on torch-distributed: numNodes 3 → node × 3",
      job: upstream("01-multi-node.yaml"),
      runtime: torch,
      want: [["node", 3, "spec.trainer.numNodes"]],
    },
    {
      name: "no numNodes → the runtime's mlPolicy.numNodes",
      job: trainJob("a"),
      runtime: torch,
      want: [["node", 1, "(ClusterTrainingRuntime torch-distributed).spec.mlPolicy.numNodes"]],
    },
    {
      name: "deepspeed (MPI, runLauncherAsNode): numNodes 4 → node × 3 and the launcher",
      job: trainJob("d", { numNodes: 4 }),
      runtime: deepspeed,
      want: [
        ["node", 3, "spec.trainer.numNodes"],
        ["launcher", 1, "(ClusterTrainingRuntime deepspeed-distributed).spec.mlPolicy.numNodes"],
      ],
    },
    { name: "no runtime: the TrainJob's node Job alone", job: trainJob("n", { numNodes: 5 }), want: [["node", 5, "spec.trainer.numNodes"]] },
    { name: "no runtime, no numNodes: one node", job: trainJob("n"), want: [["node", 1, "spec.trainer.numNodes"]] },
  ];
  for (const tc of cases)
    it(tc.name, () =>
      assert.deepEqual(
        trainJobReplicas(tc.job, tc.runtime).map((r) => [r.type, r.replicas, r.replicasField]),
        tc.want,
      ),
    );

  it("resourcesPerNode merged into the node container's resources; runtimePatches lay pod fields over the template", () => {
    const [node] = trainJobReplicas(upstream("02-runtime-patches.yaml"), torch);
    const spec = node!.template.spec!;
    assert.deepEqual(spec.containers[0]!.resources, { requests: { cpu: "2", memory: "4Gi" }, limits: { cpu: "4", memory: "8Gi" } });
    assert.equal(spec.containers[0]!.image, "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime");
    assert.deepEqual(spec.nodeSelector, { "node-type": "training" });
    assert.deepEqual(spec.tolerations, [{ key: "training-workload", operator: "Equal", value: "true", effect: "NoSchedule" }]);
    assert.equal(spec.serviceAccountName, "training-sa");
  });

  it("the runtime is not changed (its template is copied)", () => {
    const before = JSON.stringify(torch);
    trainJobReplicas(upstream("02-runtime-patches.yaml"), torch);
    assert.equal(JSON.stringify(torch), before);
  });

  it("replicaSpecs of the kind: the same replicas, through the shape descriptor", () => {
    assert.deepEqual(
      replicaSpecs(trainJob("x", { numNodes: 2 }), TJ, torch).map(([t, s]) => [t, s.replicas]),
      [["node", 2]],
    );
  });

  it("each default kind has one shape; only TrainJob's replicas come from a runtime", () => {
    const policy = checkPolicy({}, "defaults");
    assert.deepEqual(
      policy.jobKinds.map((k) => `${k.kind}:${jobShape(k).name}`),
      ["TFJob", "PyTorchJob", "MXJob", "XGBoostJob", "PaddleJob", "JAXJob"].map((k) => `${k}:replica-map`).concat(["Caffe2Job:pool", "TrainJob:trainjob"]),
    );
    assert.equal(quartermasterControls(TJ), false, "the Trainer's controller runs TrainJobs");
    assert.equal(quartermasterControls(kindOf("Caffe2Job")), true);
  });
});

describe("TrainJob validation: the v1 caps with field paths into the TrainJob", () => {
  const container4 = checkPolicy({ limits: { container: { gpus: { "nvidia.com/gpu": 4 } } } }, "container");
  const pod4 = checkPolicy({ limits: { pod: { gpus: 4 } } }, "pod");
  const nodes4 = checkPolicy({ limits: { job: { replicas: { node: 4 } } } }, "replicas");
  const a100 = checkPolicy({ limits: { allowedAccelerators: ["A100-SXM4-80GB"] } }, "accelerators");
  const ttl = checkPolicy(
    { limits: { runPolicy: { requireTtlSecondsAfterFinished: true, maxTtlSecondsAfterFinished: 86400, maxActiveDeadlineSeconds: 3600 } } },
    "ttl",
  );
  const h100Patch = {
    runtimePatches: [
      {
        manager: "example.io/platform",
        trainingRuntimeSpec: {
          template: {
            spec: {
              replicatedJobs: [{ name: "node", template: { spec: { template: { spec: { nodeSelector: { "nvidia.com/gpu.product": "H100-SXM5-80GB" } } } } } }],
            },
          },
        },
      },
    ],
  };
  const cases: Array<{ name: string; policy: ReturnType<typeof checkPolicy>; job: KubeObject; runtime?: KubeObject; want: string[] }> = [
    {
      name: "8 nodes × 8 GPUs under a 32-GPU job cap → refused at numNodes",
      policy: capped,
      job: trainJob("big", { numNodes: 8, resourcesPerNode: perNode(8) }),
      runtime: torch,
      want: ["job-gpus spec.trainer.numNodes"],
    },
    {
      name: "4 × 8 under the same cap → admitted",
      policy: capped,
      job: trainJob("ok", { numNodes: 4, resourcesPerNode: perNode(8) }),
      runtime: torch,
      want: [],
    },
    {
      name: "runtime-template GPUs counted when resourcesPerNode is absent: 8 × 8 → refused",
      policy: capped,
      job: trainJob("rt", { numNodes: 8 }),
      runtime: gpuRuntime(8),
      want: ["job-gpus spec.trainer.numNodes"],
    },
    { name: "runtime-template GPUs, 4 × 8 → admitted", policy: capped, job: trainJob("rt", { numNodes: 4 }), runtime: gpuRuntime(8), want: [] },
    {
      name: "resourcesPerNode overrides the runtime's GPUs: 8 × 2 on an 8-GPU runtime → admitted",
      policy: capped,
      job: trainJob("rt", { numNodes: 8, resourcesPerNode: perNode(2) }),
      runtime: gpuRuntime(8),
      want: [],
    },
    {
      name: "runtime's mlPolicy.numNodes when the TrainJob has none: 1 × 64 → refused at resourcesPerNode",
      policy: capped,
      job: trainJob("one", { resourcesPerNode: perNode(64) }),
      runtime: torch,
      want: ["job-gpus spec.trainer.resourcesPerNode"],
    },
    {
      name: "runtime unknown: numNodes × resourcesPerNode still capped",
      policy: capped,
      job: trainJob("alone", { numNodes: 8, resourcesPerNode: perNode(8) }),
      want: ["job-gpus spec.trainer.numNodes"],
    },
    {
      name: "per-container cap → at resourcesPerNode's limit",
      policy: container4,
      job: trainJob("c", { numNodes: 1, resourcesPerNode: perNode(8) }),
      runtime: torch,
      want: ["container-limits spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]"],
    },
    {
      name: "per-container cap on the runtime's own GPUs → at the runtime's container",
      policy: container4,
      job: trainJob("c", { numNodes: 1 }),
      runtime: gpuRuntime(8),
      want: [
        "container-limits (ClusterTrainingRuntime torch-distributed).spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]",
      ],
    },
    {
      name: "per-pod cap → at the node template",
      policy: pod4,
      job: trainJob("p", { numNodes: 2, resourcesPerNode: perNode(8) }),
      runtime: torch,
      want: ["pod-gpus (ClusterTrainingRuntime torch-distributed).spec.template.spec.replicatedJobs[0].template.spec.template.spec"],
    },
    {
      name: "node replicas cap → at numNodes",
      policy: nodes4,
      job: trainJob("r", { numNodes: 8 }),
      runtime: torch,
      want: ["job-replicas spec.trainer.numNodes"],
    },
    {
      name: "numNodes not a number → refused",
      policy: nodes4,
      job: trainJob("r", { numNodes: "8" }),
      runtime: torch,
      want: ["job-replicas spec.trainer.numNodes"],
    },
    {
      name: "runtimePatches' accelerator outside allowedAccelerators → refused",
      policy: a100,
      job: trainJob("h", { numNodes: 1, resourcesPerNode: perNode(8) }, { spec: h100Patch }),
      runtime: torch,
      want: [
        "accelerator-allowed (ClusterTrainingRuntime torch-distributed).spec.template.spec.replicatedJobs[0].template.spec.template.spec.nodeSelector[nvidia.com/gpu.product]",
      ],
    },
    {
      name: "TTL required and absent → at the TTL annotation",
      policy: ttl,
      job: trainJob("t", { numNodes: 1 }),
      runtime: torch,
      want: [`run-policy metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]`],
    },
    {
      name: "TTL annotation within the cap → admitted",
      policy: ttl,
      job: trainJob("t", { numNodes: 1 }, { metadata: { annotations: { [ANNOTATION_TTL_AFTER_FINISHED]: "3600" } } }),
      runtime: torch,
      want: [],
    },
    {
      name: "TTL annotation over the cap, activeDeadlineSeconds over its cap → both refused",
      policy: ttl,
      job: trainJob("t", { numNodes: 1 }, { metadata: { annotations: { [ANNOTATION_TTL_AFTER_FINISHED]: "999999" } }, spec: { activeDeadlineSeconds: 7200 } }),
      runtime: torch,
      want: [`run-policy metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]`, "run-policy spec.activeDeadlineSeconds"],
    },
    {
      name: "TTL annotation not a number → refused",
      policy: ttl,
      job: trainJob("t", { numNodes: 1 }, { metadata: { annotations: { [ANNOTATION_TTL_AFTER_FINISHED]: "1d" } } }),
      runtime: torch,
      want: [`run-policy metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]`],
    },
    {
      name: "a name too long for JobSet's pod names → job-name",
      policy: capped,
      job: trainJob("x".repeat(60), { numNodes: 2 }),
      runtime: torch,
      want: ["job-name metadata.name"],
    },
    { name: "upstream example 02 under the 32-GPU cap → admitted", policy: capped, job: upstream("02-runtime-patches.yaml"), runtime: torch, want: [] },
  ];
  for (const tc of cases) it(tc.name, () => assert.deepEqual(brief(validateJob(tc.job, TJ, ctxOf(tc.policy), tc.runtime)), tc.want.sort()));

  it("the refusal's message counts numNodes × GPUs per node", () => {
    const v = validateJob(trainJob("big", { numNodes: 8, resourcesPerNode: perNode(8) }), TJ, ctxOf(capped), torch).violations[0]!;
    assert.equal(v.message, "the job requests 64 GPUs in all, over the per-job limit of 32");
  });

  it("capacity: the runtime's GPUs count against the cluster's", () => {
    const f = validateCapacity(trainJob("c", { numNodes: 4 }), TJ, ctxOf(capped), { total: () => 16 }, gpuRuntime(8));
    assert.deepEqual(brief(f), ["capacity spec"]);
  });
});

describe("TrainJob runtime lookup", () => {
  it("a ClusterTrainingRuntime is read cluster-scoped, a TrainingRuntime in the TrainJob's namespace", async () => {
    const reads: string[] = [];
    const reader = {
      get(kind: Parameters<typeof jobPath>[0], namespace: string, name: string) {
        reads.push(jobPath(kind, namespace, name));
        return Promise.resolve(name === "torch-distributed" ? torch : undefined);
      },
    };
    const found = await readRuntime(trainJob("a"), TJ, "team-a", reader, 1000);
    assert.equal(found.kind, "found");
    const ns = await readRuntime(trainJob("b", {}, { spec: { runtimeRef: { name: "mine", kind: "TrainingRuntime" } } }), TJ, "team-a", reader, 1000);
    assert.equal(ns.kind, "missing");
    assert.deepEqual(reads, [
      "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed",
      "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainingruntimes/mine",
    ]);
  });

  const cases: Array<{ name: string; job: KubeObject; want: string }> = [
    { name: "no runtimeRef → missing", job: trainJob("a", {}, { spec: { runtimeRef: {} } }), want: "missing" },
    {
      name: "a runtimeRef of another API group → missing",
      job: trainJob("a", {}, { spec: { runtimeRef: { name: "x", apiGroup: "example.com" } } }),
      want: "missing",
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const r = await readRuntime(tc.job, TJ, "team-a", fakeJobReader([]), 1000);
      assert.equal(r.kind, tc.want);
    });

  it("runtimeKind: the Trainer's runtime kinds as the reader addresses them", () => {
    assert.deepEqual(runtimeKind({ kind: "ClusterTrainingRuntime", apiGroup: "trainer.kubeflow.org" }).plural, "clustertrainingruntimes");
  });

  const failures: Array<{ name: string; onFailure: "warn" | "deny"; want: string[]; warnings: number }> = [
    { name: "unreadable runtime under deny → job-runtime at spec.runtimeRef", onFailure: "deny", want: ["job-runtime spec.runtimeRef"], warnings: 0 },
    { name: "unreadable runtime under warn → checked alone, with a warning", onFailure: "warn", want: [], warnings: 1 },
  ];
  for (const tc of failures)
    it(tc.name, () => {
      const r = runtimeRead({ kind: "failed", reason: "timed out" }, tc.onFailure);
      assert.equal(r.object, undefined);
      assert.deepEqual(brief(r.findings), tc.want);
      assert.equal(r.findings.warnings.length, tc.warnings);
    });
});

describe("TrainJob job defaults (/mutate/jobs)", () => {
  const ALL: JobDefaults = { ttlSecondsAfterFinished: 86400, cleanPodPolicy: "Running", activeDeadlineSeconds: 3600, backoffLimit: 3 };
  const ttlOf = (j: KubeObject): unknown => (j.metadata as { annotations?: Record<string, string> }).annotations?.[ANNOTATION_TTL_AFTER_FINISHED];
  const cases: Array<{ name: string; job: KubeObject; defaults: JobDefaults; ttl?: string; deadline?: number; filled: string[] }> = [
    { name: "no defaults → unchanged", job: trainJob("a"), defaults: {}, filled: [] },
    {
      name: "TTL and deadline filled; cleanPodPolicy and backoffLimit have no TrainJob meaning",
      job: trainJob("a"),
      defaults: ALL,
      ttl: "86400",
      deadline: 3600,
      filled: ["ttlSecondsAfterFinished=86400", "activeDeadlineSeconds=3600"],
    },
    {
      name: "the job's own TTL annotation and deadline are kept",
      job: trainJob("a", {}, { metadata: { annotations: { [ANNOTATION_TTL_AFTER_FINISHED]: "60" } }, spec: { activeDeadlineSeconds: 10 } }),
      defaults: ALL,
      ttl: "60",
      deadline: 10,
      filled: [],
    },
    {
      name: "other annotations kept beside the TTL",
      job: trainJob("a", {}, { metadata: { annotations: { team: "x" } } }),
      defaults: { ttlSecondsAfterFinished: 5 },
      ttl: "5",
      filled: ["ttlSecondsAfterFinished=5"],
    },
    { name: "only cleanPodPolicy and backoffLimit → unchanged", job: trainJob("a"), defaults: { cleanPodPolicy: "All", backoffLimit: 1 }, filled: [] },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const out = fillJobDefaults(tc.job, TJ, tc.defaults);
      assert.deepEqual(out.filled, tc.filled);
      assert.equal(out.warnings.length, tc.filled.length);
      if (tc.filled.length === 0) assert.equal(out.job, tc.job, "same reference when nothing is filled");
      assert.equal(ttlOf(out.job), tc.ttl);
      assert.equal((out.job.spec as { activeDeadlineSeconds?: number }).activeDeadlineSeconds, tc.deadline);
      // Reinvocation: a second pass finds every field set and changes nothing.
      const again = fillJobDefaults(out.job, TJ, tc.defaults);
      assert.equal(again.job, out.job);
      assert.deepEqual(again.filled, []);
      if (tc.ttl !== undefined && tc.filled.length > 0)
        assert.deepEqual(
          brief(validateJob(out.job, TJ, ctxOf(checkPolicy({ limits: { runPolicy: { requireTtlSecondsAfterFinished: true } } }, "r")), torch)),
          [],
        );
    });
});

describe("TrainJob in the reconciler", () => {
  const policy = checkPolicy({}, "defaults");
  const NOW = new Date("2026-11-29T12:00:00Z");
  const done = (type: string, at = "2026-11-29T11:00:00Z", status = "True") => ({ status: { conditions: [{ type, status, lastTransitionTime: at }] } });
  const withTtl = (ttl: string) => ({ metadata: { annotations: { [ANNOTATION_TTL_AFTER_FINISHED]: ttl } } });
  const finished = (name: string, extra: Record<string, unknown>, more: Parameters<typeof trainJob>[2] = {}): KubeObject => ({
    ...trainJob(name, {}, more),
    ...extra,
  });
  const cases: Array<{ name: string; job: KubeObject; want: string[]; problems?: number }> = [
    { name: "Complete, no TTL anywhere → kept (safe by default)", job: finished("a", done("Complete")), want: [] },
    { name: "Complete, TTL 60 s, an hour ago → deleted with its uid", job: finished("a", done("Complete"), withTtl("60")), want: ["Job team-a/a uid-a"] },
    { name: "Failed, TTL 60 s → deleted", job: finished("f", done("Failed"), withTtl("60")), want: ["Job team-a/f uid-f"] },
    { name: "Complete, TTL not yet past → kept", job: finished("a", done("Complete"), withTtl("7200")), want: [] },
    { name: "Complete False → not finished, kept", job: finished("a", done("Complete", undefined, "False"), withTtl("0")), want: [] },
    { name: "v1's Succeeded is no TrainJob condition → kept", job: finished("a", done("Succeeded"), withTtl("0")), want: [] },
    { name: "suspended → kept", job: finished("a", done("Complete"), { ...withTtl("0"), spec: { suspend: true } }), want: [] },
    { name: "TTL annotation not a number → kept, a problem", job: finished("a", done("Complete"), withTtl("soon")), want: [], problems: 1 },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const plan = planFinishedJob({ job: tc.job, kind: TJ, pods: [], services: [], now: NOW, policy });
      assert.deepEqual(
        plan.actions.map((a) => `${a.kind} ${a.namespace}/${a.name} ${a.uid}`),
        tc.want,
      );
      assert.equal(plan.problems.length, tc.problems ?? 0);
    });

  it("finishedAt: the finished condition's lastTransitionTime", () => {
    assert.deepEqual(finishedAt(finished("a", done("Failed", "2026-11-29T10:00:00Z")), TJ), {
      finished: true,
      completionTime: new Date("2026-11-29T10:00:00Z"),
    });
  });

  const managed: Array<{ name: string; managedBy?: string; skipped: boolean }> = [
    { name: "managedBy unset → ours", skipped: false },
    { name: "managedBy the Trainer's controller → ours", managedBy: "trainer.kubeflow.org/trainjob-controller", skipped: false },
    { name: "managedBy MultiKueue → skipped", managedBy: "kueue.x-k8s.io/multikueue", skipped: true },
  ];
  for (const tc of managed)
    it(tc.name, () => {
      const job = trainJob("m", {}, { spec: tc.managedBy ? { managedBy: tc.managedBy } : {} });
      assert.equal(managedElsewhere(job, TJ) !== undefined, tc.skipped);
      // A v1 job's runPolicy.managedBy is not a TrainJob's: read only where the kind keeps it.
      assert.equal(managedElsewhere(job, kindOf("PyTorchJob")), undefined);
    });

  const jobsetPod = (name: string, jobset: string, extra: Record<string, unknown> = {}): KubeObject => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "team-a",
      uid: `uid-${name}`,
      labels: { "jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "1" },
      ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: `${jobset}-node-0`, uid: "job-uid", controller: true }],
    },
    spec: { nodeName: "n1", containers: [{ name: "node", resources: { limits: { "nvidia.com/gpu": "8" } } }] },
    status: { phase: "Running" },
    ...extra,
  });

  it("a pass: MultiKueue's TrainJob skipped; ours never claims its JobSet pods; a finished one with a TTL deleted", () => {
    const ours = finished("done", done("Complete"), withTtl("60"));
    const theirs = trainJob("mk", {}, { spec: { managedBy: "kueue.x-k8s.io/multikueue" } });
    const orphan = jobsetPod("done-node-0-1", "done", {
      metadata: { name: "orphan", namespace: "team-a", uid: "o", labels: { "jobset.sigs.k8s.io/jobset-name": "done" } },
    });
    const plan = planPass(
      {
        namespaces: [{ name: "team-a", labels: { "quartermaster.dev/enabled": "true" } }],
        jobs: [
          { kind: TJ, job: ours },
          { kind: TJ, job: theirs },
        ],
        pods: [jobsetPod("done-node-0-1", "done"), orphan],
        services: [],
        nodes: [],
        nodeLeases: [],
        ledger: new Map(),
      },
      NOW,
      policy,
      namespaceScope("quartermaster"),
    );
    assert.deepEqual(
      plan.skipped.map((s) => `${s.kind} ${s.name}`),
      ["TrainJob mk"],
    );
    assert.deepEqual(plan.claims, []);
    assert.deepEqual(plan.creates, []);
    assert.deepEqual(
      plan.actions.map((a) => `${a.kind} ${a.name} ${a.uid}`),
      ["Job done uid-done"],
    );
  });

  it("the ledger charges a JobSet pod to the TrainJob its jobset-name names, and only when that TrainJob exists", () => {
    const node = {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "n1", uid: "n1" },
      status: { allocatable: { "nvidia.com/gpu": "8" }, capacity: { "nvidia.com/gpu": "8" }, conditions: [{ type: "Ready", status: "True" }] },
    };
    const ledger = (trainJobs: string[]) =>
      buildLedger(
        {
          nodes: [node],
          nodeLeases: [],
          pods: [jobsetPod("a-node-0-1", "a"), jobsetPod("b-node-0-1", "b")],
          jobs: new Set(trainJobs),
          trainJobs: new Set(trainJobs),
        },
        NOW,
        policy,
      );
    assert.deepEqual(Object.keys(ledger(["team-a/a"]).jobs), ["team-a/a"]);
    assert.deepEqual(Object.keys(ledger([]).jobs), []);
  });
});

describe("TrainJob pods: found by JobSet's labels", () => {
  const policy = checkPolicy({}, "defaults");
  const pod = (labels: Record<string, string>, owner = "Job") =>
    ({
      metadata: {
        name: "p",
        namespace: "team-a",
        labels,
        ownerReferences: [{ apiVersion: owner === "Job" ? "batch/v1" : "apps/v1", kind: owner, name: "o", uid: "u", controller: true }],
      },
    }) as never;
  const labels = { "jobset.sigs.k8s.io/jobset-name": "tj", "jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "2" };
  const cases: Array<{ name: string; pod: never; want: string | undefined }> = [
    { name: "a Job's pod with jobset-name → the TrainJob of that name", pod: pod(labels), want: "TrainJob team-a/tj jobset" },
    { name: "a Job's pod without JobSet labels → no job", pod: pod({}), want: undefined },
    { name: "a ReplicaSet's pod with jobset-name → no job", pod: pod(labels, "ReplicaSet"), want: undefined },
  ];
  for (const tc of cases)
    it(tc.name, () => {
      const ref = jobRef(tc.pod, "team-a", policy);
      assert.equal(ref && `${ref.candidates.map((k) => k.kind).join()} ${ref.namespace}/${ref.name} ${ref.via}`, tc.want);
    });

  it("replicaOf: replicatedjob-name and job-completion-index", () => {
    assert.deepEqual(replicaOf(pod(labels), trainJob("tj", { numNodes: 3 }), TJ), { replicaType: "node", index: 2 });
    assert.deepEqual(labelScheme(TJ).selector(trainJob("tj")), { "jobset.sigs.k8s.io/jobset-name": "tj" });
  });

  it("a JobSet without a TrainJob of its name is no training job's pod (not a lookup failure)", async () => {
    assert.deepEqual(await lookupTopology(pod(labels), "team-a", policy, fakeJobReader([])), { kind: "none" });
    const found = await lookupTopology(pod(labels), "team-a", policy, fakeJobReader([trainJob("tj", { numNodes: 3 })]));
    assert.equal(found.kind, "found");
  });
});

describe("TrainJob through the webhooks", () => {
  const jobReview = (object: KubeObject, operation: "CREATE" | "UPDATE" = "CREATE") =>
    review({
      kind: { group: TJ.group, version: TJ.version, kind: TJ.kind },
      resource: { group: TJ.group, version: TJ.version, resource: TJ.plural },
      operation,
      namespace: "team-a",
      object,
      oldObject: operation === "UPDATE" ? object : null,
    });
  /** A reader that has `runtimes` (cluster-scoped: namespace "") and counts what it was asked for. */
  const runtimeReader = (runtimes: KubeObject[], fail = false) => {
    const asked: string[] = [];
    return {
      asked,
      get(kind: Parameters<typeof jobPath>[0], namespace: string, name: string): Promise<KubeObject | undefined> {
        asked.push(jobPath(kind, namespace, name));
        if (fail) return Promise.reject(new Error("connection refused"));
        return Promise.resolve(runtimes.find((r) => r.kind === kind.kind && (r.metadata as { name?: string }).name === name && namespace === ""));
      },
    };
  };
  const webhooks = (policy: ReturnType<typeof checkPolicy>, jobs: ReturnType<typeof runtimeReader>) =>
    createWebhooks({ policy, log: capturingLogger().log, jobs, now: () => new Date() });
  const deny = checkPolicy({ limits: { job: { gpus: 32 } }, clusterSpec: { onJobLookupFailure: "deny" } }, "deny");

  const cases: Array<{
    name: string;
    policy: ReturnType<typeof checkPolicy>;
    job: KubeObject;
    runtimes: KubeObject[];
    fail?: boolean;
    allowed: boolean;
    causes: string[];
    warnings?: RegExp;
  }> = [
    {
      name: "8 × 8 GPUs over the 32-GPU cap → denied at spec.trainer.numNodes",
      policy: capped,
      job: trainJob("big", { numNodes: 8, resourcesPerNode: perNode(8) }),
      runtimes: [torch],
      allowed: false,
      causes: ["spec.trainer.numNodes"],
    },
    {
      name: "4 × 8 → allowed",
      policy: capped,
      job: trainJob("ok", { numNodes: 4, resourcesPerNode: perNode(8) }),
      runtimes: [torch],
      allowed: true,
      causes: [],
    },
    {
      name: "8 nodes on an 8-GPU runtime → denied (the runtime read)",
      policy: capped,
      job: trainJob("rt", { numNodes: 8 }),
      runtimes: [gpuRuntime(8)],
      allowed: false,
      causes: ["spec.trainer.numNodes"],
    },
    {
      name: "runtime missing, lookup failures denied → denied at spec.runtimeRef",
      policy: deny,
      job: trainJob("m", { numNodes: 1 }),
      runtimes: [],
      allowed: false,
      causes: ["spec.runtimeRef"],
    },
    {
      name: "runtime unreadable under warn → allowed when its own part fits, with a warning",
      policy: capped,
      job: trainJob("w", { numNodes: 1 }),
      runtimes: [],
      fail: true,
      allowed: true,
      causes: [],
      warnings: /runtime could not be read/,
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const jobs = runtimeReader(tc.runtimes, tc.fail);
      const res = await webhooks(tc.policy, jobs)["/validate/jobs"]!.admit(jobReview(tc.job));
      assert.equal(res.review.response?.allowed, tc.allowed);
      assert.deepEqual(
        (res.review.response?.status?.details?.causes ?? []).map((c: { field?: string }) => c.field),
        tc.causes,
      );
      assert.deepEqual(jobs.asked, ["/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed"]);
      if (tc.warnings) assert.match((res.review.response?.warnings ?? []).join("\n"), tc.warnings);
    });

  it("/mutate/jobs: a TrainJob CREATE gets the TTL annotation and deadline; mutating the result again changes nothing", async () => {
    const policy = checkPolicy(
      { jobDefaults: { ttlSecondsAfterFinished: 86400, activeDeadlineSeconds: 3600, cleanPodPolicy: "All", backoffLimit: 2 } },
      "defaults",
    );
    const hook = webhooks(policy, runtimeReader([torch]))["/mutate/jobs"]!;
    const object = trainJob("d", { numNodes: 2 });
    const res = await hook.admit(jobReview(object));
    assert.equal(res.outcome, "patched");
    const patch = JSON.parse(Buffer.from(res.review.response!.patch!, "base64").toString()) as Parameters<typeof applyPatch>[1];
    const patched = applyPatch(object, patch);
    assert.deepEqual((patched.metadata as { annotations?: unknown }).annotations, { [ANNOTATION_TTL_AFTER_FINISHED]: "86400" });
    assert.equal((patched.spec as { activeDeadlineSeconds?: number }).activeDeadlineSeconds, 3600);
    assert.equal(res.review.response?.warnings?.length, 2);
    const again = await hook.admit(jobReview(deepFreeze(patched)));
    assert.equal(again.outcome, "allowed");
    assert.equal(again.review.response?.patch, undefined);
  });

  // A v1 job's bare `gpu` reaches its pods, which /mutate/pods renames; a TrainJob's reaches its JobSet's Jobs
  // first, which the apiserver refuses ("must be a standard resource type or fully qualified"): no pod is
  // ever made (seen against the real Trainer and JobSet, test/conformance/trainer.test.ts). So /mutate/jobs
  // renames it in spec.trainer.resourcesPerNode, by the pods' rule.
  const bareGpuCases: Array<{ name: string; policy?: Record<string, unknown>; resources: Record<string, unknown>; want?: Record<string, unknown> }> = [
    { name: "limits.gpu → the policy's GPU resource", resources: { limits: { gpu: "2" } }, want: { limits: { "nvidia.com/gpu": "2" } } },
    {
      name: "requests and limits both renamed; cpu kept",
      resources: { requests: { gpu: "1", cpu: "4" }, limits: { gpu: "1" } },
      want: { requests: { cpu: "4", "nvidia.com/gpu": "1" }, limits: { "nvidia.com/gpu": "1" } },
    },
    {
      name: "an explicit value of the GPU resource wins; the bare one is dropped",
      resources: { limits: { gpu: "4", "nvidia.com/gpu": "2" } },
      want: { limits: { "nvidia.com/gpu": "2" } },
    },
    {
      name: "gpu.resourceName amd.com/gpu",
      policy: { gpu: { resourceName: "amd.com/gpu" } },
      resources: { limits: { gpu: "1" } },
      want: { limits: { "amd.com/gpu": "1" } },
    },
    { name: "no bare gpu → not patched", resources: { limits: { "nvidia.com/gpu": "1" } } },
  ];
  for (const tc of bareGpuCases)
    it(`/mutate/jobs renames a TrainJob's bare gpu in resourcesPerNode: ${tc.name}`, async () => {
      const hook = webhooks(checkPolicy(tc.policy ?? {}, "bare-gpu"), runtimeReader([torch]))["/mutate/jobs"]!;
      const object = trainJob("g", { numNodes: 2, resourcesPerNode: tc.resources });
      const res = await hook.admit(jobReview(object));
      if (!tc.want) {
        assert.equal(res.outcome, "allowed");
        assert.equal(res.review.response?.patch, undefined);
        return;
      }
      assert.equal(res.outcome, "patched");
      const patch = JSON.parse(Buffer.from(res.review.response!.patch!, "base64").toString()) as Parameters<typeof applyPatch>[1];
      const patched = applyPatch(object, patch);
      assert.deepEqual((patched.spec as { trainer: { resourcesPerNode: unknown } }).trainer.resourcesPerNode, tc.want);
      assert.match((res.review.response?.warnings ?? []).join("\n"), /renamed gpu to [a-z.]+\/gpu in spec\.trainer\.resourcesPerNode/);
      const again = await hook.admit(jobReview(deepFreeze(patched)));
      assert.equal(again.review.response?.patch, undefined, "mutating the result again changes it");
    });
});

describe("TrainJob pods through /mutate/pods", () => {
  const policy = checkPolicy({}, "defaults");
  const pod = deepFreeze({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "tj-node-0-1",
      namespace: "team-a",
      labels: { "jobset.sigs.k8s.io/jobset-name": "tj", "jobset.sigs.k8s.io/replicatedjob-name": "node", "batch.kubernetes.io/job-completion-index": "1" },
      ownerReferences: [{ apiVersion: "batch/v1", kind: "Job", name: "tj-node-0", uid: "j", controller: true }],
    },
    spec: { containers: [{ name: "node", image: "x", resources: { limits: { "nvidia.com/gpu": "8" } } }] },
  });
  const cases: Array<{ name: string; jobs: KubeObject[] }> = [
    { name: "its TrainJob exists: GPU outfitting, no Kubeflow v1 labels, no cluster spec", jobs: [trainJob("tj", { numNodes: 2 })] },
    { name: "no TrainJob of that name: the same, and no lookup failure", jobs: [] },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      const hook = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(tc.jobs), now: () => new Date() })["/mutate/pods"]!;
      const res = await hook.admit(review({ object: pod, namespace: "team-a" }));
      assert.equal(res.review.response?.allowed, true);
      const patched = applyPatch(pod, res.review.response?.patch ? JSON.parse(Buffer.from(res.review.response.patch, "base64").toString()) : []);
      const labels = (patched.metadata as { labels: Record<string, string> }).labels;
      assert.deepEqual(
        Object.keys(labels).filter((k) => k.startsWith("training.kubeflow.org/")),
        [],
      );
      const tolerations = (patched.spec as { tolerations?: Array<{ key?: string }> }).tolerations ?? [];
      assert.ok(
        tolerations.some((t) => t.key === "nvidia.com/gpu"),
        "the GPU toleration",
      );
      assert.doesNotMatch((res.review.response?.warnings ?? []).join("\n"), /not found|failed/);
    });
});
