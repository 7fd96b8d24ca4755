/**
 * Issue 33, a queued Kubeflow Trainer v2 TrainJob outfitted at CREATE (`src/mutate/trainjob-outfit.ts`): what
 * `/mutate/pods` would give its trainer pods, and Kueue reads from the JobSet Trainer would build, written into
 * `spec.trainer.resourcesPerNode` and Quartermaster's own runtime patch; an unqueued TrainJob, or one whose
 * runtime cannot be read, unchanged; mutating the result again changes nothing (also after Trainer's webhook
 * stamped the patches' `time`); the pods Trainer then makes (built here from the runtime template, the patches by
 * strategic-merge rules and resourcesPerNode merged, independently of the module) get no further change to
 * resources, affinity, nodeSelector or tolerations from `/mutate/pods`; and Kueue's two admission UPDATEs are
 * still told apart by `kueueAdmissionOnly` when Quartermaster's patch is there.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1Container, V1PodSpec, V1Toleration } from "@kubernetes/client-node";
import { KUEUE_QUEUE_NAME, KUEUE_RUNTIME_PATCH_MANAGER, kueueAdmissionOnly } from "../../../src/kueue/admission.js";
import { applyPatch } from "../../../src/admission/patch.js";
import { ANNOTATION_ACCELERATOR, ANNOTATION_INTERRUPTIBLE, ANNOTATION_MUTATIONS } from "../../../src/core/keys.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { jobPath } from "../../../src/kube/jobs.js";
import { outfitQueuedTrainJob, QM_RUNTIME_PATCH_MANAGER, trainerNodeTemplate } from "../../../src/mutate/trainjob-outfit.js";
import { renameTrainJobBareGpu } from "../../../src/mutate/trainjob-resources.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { kindOf } from "../../fixtures/jobs.js";
import { ALL_MUTATIONS } from "../../fixtures/policies.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { gpuRuntime, upstream } from "../../fixtures/trainer-v2.js";

type Obj = Record<string, any>;
const policy = checkPolicy({ ...ALL_MUTATIONS, resources: { ...ALL_MUTATIONS.resources, defaultRequests: { cpu: "1", memory: "1Gi" } } }, "kueue");
const TJ = kindOf("TrainJob");
const torch = upstream("torch_distributed.yaml");
const GPU_TOLERATION = { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" };
const OFF_INTERRUPTIBLE = { key: "x/interruptible", operator: "DoesNotExist" };

/** A user's runtime patch on the `node` pods (where a TrainJob's placement annotations live). */
const userPatch = (pod: Obj): Obj => ({
  manager: "example.com/user",
  trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name: "node", template: { spec: { template: pod } } }] } } },
});

/** A TrainJob on torch-distributed, 2 nodes; `queued` by label. Through JSON, as a review's object arrives. */
function tj(opts: { resources?: Obj; patches?: Obj[]; queued?: boolean } = {}): KubeObject {
  return deepFreeze(
    JSON.parse(
      JSON.stringify({
        apiVersion: "trainer.kubeflow.org/v1alpha1",
        kind: "TrainJob",
        metadata: { name: "llm", namespace: "team-a", uid: "uid-llm", ...(opts.queued === false ? {} : { labels: { [KUEUE_QUEUE_NAME]: "team-a-queue" } }) },
        spec: {
          suspend: true,
          runtimeRef: { name: "torch-distributed" },
          trainer: { numNodes: 2, ...(opts.resources ? { resourcesPerNode: opts.resources } : {}) },
          ...(opts.patches ? { runtimePatches: opts.patches } : {}),
        },
      }),
    ) as KubeObject,
  );
}

/**
 * The trainer pod Trainer v2.3.0 makes, built here independently of the module: the runtime's `node` template,
 * each patch by strategic-merge rules (maps merged, affinity replaced per top-level kind, tolerations replaced),
 * resourcesPerNode merged key by key into the `node` container's resources.
 */
function trainerPod(job: KubeObject, runtime: KubeObject): Obj {
  const rjob = (runtime as Obj).spec.template.spec.replicatedJobs[0];
  const t: Obj = structuredClone(rjob.template.spec.template);
  t.metadata ??= {};
  for (const p of (job as Obj).spec.runtimePatches ?? []) {
    const r = (p.trainingRuntimeSpec?.template?.spec?.replicatedJobs ?? []).find((x: Obj) => x.name === rjob.name);
    const pod = r?.template?.spec?.template;
    if (!pod) continue;
    for (const f of ["labels", "annotations"]) if (pod.metadata?.[f]) t.metadata[f] = { ...t.metadata[f], ...pod.metadata[f] };
    if (pod.spec?.nodeSelector) t.spec.nodeSelector = { ...t.spec.nodeSelector, ...pod.spec.nodeSelector };
    if (pod.spec?.tolerations) t.spec.tolerations = structuredClone(pod.spec.tolerations);
    if (pod.spec?.affinity) t.spec.affinity = { ...t.spec.affinity, ...structuredClone(pod.spec.affinity) };
  }
  const perNode = (job as Obj).spec.trainer?.resourcesPerNode;
  const c: V1Container = t.spec.containers.find((x: V1Container) => x.name === "node");
  if (perNode) {
    const base: Obj = c.resources ?? {};
    c.resources = {
      ...base,
      ...(perNode.limits || base.limits ? { limits: { ...base.limits, ...perNode.limits } } : {}),
      ...(perNode.requests || base.requests ? { requests: { ...base.requests, ...perNode.requests } } : {}),
    };
  }
  return { apiVersion: "v1", kind: "Pod", metadata: { ...t.metadata, name: "llm-node-0-0", namespace: "team-a" }, spec: t.spec };
}

const qmPatchOf = (job: KubeObject): Obj | undefined => ((job as Obj).spec.runtimePatches ?? []).find((p: Obj) => p.manager === QM_RUNTIME_PATCH_MANAGER);
const qmPodOf = (job: KubeObject): Obj | undefined => qmPatchOf(job)?.trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template;

interface Case {
  name: string;
  job: KubeObject;
  runtime?: KubeObject;
  changed: boolean;
  check?: (job: KubeObject, pod: Obj) => void;
}

const CASES: Case[] = [
  {
    name: "bare gpu in resourcesPerNode: renamed, request = limit, cpu/memory defaults; GPU toleration and kept off interruptible nodes",
    job: tj({ resources: { limits: { gpu: "4" } } }),
    changed: true,
    check(job, pod) {
      assert.deepEqual((job as Obj).spec.trainer.resourcesPerNode, {
        limits: { "nvidia.com/gpu": "4", memory: "1Gi" },
        requests: { "nvidia.com/gpu": "4", cpu: "1", memory: "1Gi" },
      });
      assert.deepEqual(qmPodOf(job)!.spec.tolerations, [GPU_TOLERATION]);
      assert.deepEqual(pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
        { matchExpressions: [OFF_INTERRUPTIBLE] },
      ]);
      assert.equal(qmPodOf(job)!.metadata.annotations[ANNOTATION_MUTATIONS], "resources,gpu-tolerations,interruptible");
    },
  },
  {
    name: "no resourcesPerNode, GPUs in the runtime's node container: resourcesPerNode written with the pods' full resources",
    job: tj(),
    runtime: gpuRuntime(8),
    changed: true,
    check(job, pod) {
      assert.deepEqual((job as Obj).spec.trainer.resourcesPerNode, {
        limits: { "nvidia.com/gpu": 8, memory: "1Gi" },
        requests: { "nvidia.com/gpu": 8, cpu: "1", memory: "1Gi" },
      });
      assert.deepEqual(pod.spec.tolerations, [GPU_TOLERATION]);
    },
  },
  {
    name: "accelerator annotation in a user's runtime patch: required affinity on the product, its toleration; the user's tolerations kept (SMP replaces the list)",
    job: tj({
      resources: { limits: { "nvidia.com/gpu": "4" }, requests: { "nvidia.com/gpu": "4", cpu: "8", memory: "64Gi" } },
      patches: [
        userPatch({ metadata: { annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } }, spec: { tolerations: [{ key: "team", operator: "Exists" }] } }),
      ],
    }),
    changed: true,
    check(job, pod) {
      const terms = pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms;
      assert.deepEqual(terms, [{ matchExpressions: [{ key: "nvidia.com/gpu.product", operator: "In", values: ["H100-SXM5-80GB"] }, OFF_INTERRUPTIBLE] }]);
      const tol = qmPodOf(job)!.spec.tolerations as V1Toleration[];
      assert.deepEqual(tol[0], { key: "team", operator: "Exists" });
      assert.ok(
        tol.some((t) => t.key === "nvidia.com/gpu"),
        "GPU toleration",
      );
      assert.ok(
        tol.some((t) => t.key === "nvidia.com/gpu.product" && t.value === "H100-SXM5-80GB"),
        "product toleration",
      );
      // Its memory limit from the request: resourcesPerNode rewritten; its cpu/memory requests kept.
      assert.deepEqual((job as Obj).spec.trainer.resourcesPerNode.requests, { "nvidia.com/gpu": "4", cpu: "8", memory: "64Gi" });
      assert.equal((job as Obj).spec.runtimePatches[0].manager, "example.com/user", "the user's patch stays first");
    },
  },
  {
    name: "interruptible: its tolerations and node requirement",
    job: tj({ resources: { limits: { "nvidia.com/gpu": "1" } }, patches: [userPatch({ metadata: { annotations: { [ANNOTATION_INTERRUPTIBLE]: "true" } } })] }),
    changed: true,
    check(_job, pod) {
      assert.ok(
        (pod.spec.tolerations as V1Toleration[]).some((t) => t.key === "x/interruptible"),
        "interruptible toleration",
      );
      assert.deepEqual(pod.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, [
        { matchExpressions: [{ key: "x/interruptible", operator: "In", values: ["true"] }] },
      ]);
    },
  },
  {
    name: "CPU only: cpu/memory defaults in resourcesPerNode, no GPU toleration; kept off interruptible nodes",
    job: tj({ resources: { limits: { cpu: "2" } } }),
    changed: true,
    check(job, pod) {
      assert.deepEqual((job as Obj).spec.trainer.resourcesPerNode, { limits: { cpu: "2", memory: "1Gi" }, requests: { cpu: "2", memory: "1Gi" } });
      assert.equal(pod.spec.tolerations, undefined);
      assert.deepEqual(Object.keys(qmPodOf(job)!.spec), ["affinity"]);
    },
  },
  { name: "not queued: the very same TrainJob", job: tj({ resources: { limits: { gpu: "4" } }, queued: false }), changed: false },
  {
    name: "queued, everything already there: the very same TrainJob",
    job: tj({
      resources: { limits: { "nvidia.com/gpu": "4", memory: "1Gi" }, requests: { "nvidia.com/gpu": "4", cpu: "1", memory: "1Gi" } },
      patches: [
        userPatch({
          spec: {
            tolerations: [GPU_TOLERATION],
            affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [OFF_INTERRUPTIBLE] }] } } },
          },
        }),
      ],
    }),
    changed: false,
  },
];

describe("outfitQueuedTrainJob", () => {
  for (const c of CASES) {
    it(c.name, () => {
      const runtime = c.runtime ?? torch;
      const out = outfitQueuedTrainJob(c.job, TJ, runtime, { policy, namespace: "team-a" });
      assert.equal(out.job !== c.job, c.changed);
      if (c.changed) assert.ok(out.applied.length > 0 && out.warnings.length > 0, "applied and warned");
      c.check?.(out.job, trainerPod(out.job, runtime));
      // Reinvocation: the result mutated again is the very same object, also once Trainer's webhook stamped `time`.
      const again = outfitQueuedTrainJob(deepFreeze(out.job), TJ, runtime, { policy, namespace: "team-a" });
      assert.equal(again.job, out.job, "mutating the result again changes nothing");
      const stamped = structuredClone(out.job) as Obj;
      for (const p of stamped.spec.runtimePatches ?? []) p.time = "2026-11-29T16:00:00Z";
      assert.equal(outfitQueuedTrainJob(deepFreeze(stamped), TJ, runtime, { policy, namespace: "team-a" }).job, stamped);
    });
  }

  it("Quartermaster's patch is recomputed in place, not duplicated, when the job changed under it", () => {
    const out = outfitQueuedTrainJob(tj({ resources: { limits: { "nvidia.com/gpu": "4" } } }), TJ, torch, { policy, namespace: "team-a" }).job as Obj;
    const edited = structuredClone(out);
    edited.spec.runtimePatches.unshift(userPatch({ metadata: { annotations: { [ANNOTATION_ACCELERATOR]: "A100-SXM4-80GB" } } }));
    const again = outfitQueuedTrainJob(deepFreeze(edited), TJ, torch, { policy, namespace: "team-a" }).job as Obj;
    assert.equal(again.spec.runtimePatches.filter((p: Obj) => p.manager === QM_RUNTIME_PATCH_MANAGER).length, 1);
    assert.ok(
      (qmPodOf(again)!.spec.tolerations as V1Toleration[]).some((t) => t.value === "A100-SXM4-80GB"),
      "A100 toleration",
    );
  });

  it("trainerNodeTemplate follows strategic merge patch: tolerations replaced, nodeSelector merged, resourcesPerNode merged key by key", () => {
    const job = tj({
      resources: { limits: { "nvidia.com/gpu": "2" } },
      patches: [
        userPatch({ spec: { tolerations: [{ key: "a", operator: "Exists" }], nodeSelector: { zone: "z1" } } }),
        { ...userPatch({ spec: { tolerations: [{ key: "b", operator: "Exists" }], nodeSelector: { rack: "r1" } } }), manager: "example.com/other" },
      ],
    });
    const node = trainerNodeTemplate(job, gpuRuntime(8))!;
    assert.deepEqual(node.template.spec!.tolerations, [{ key: "b", operator: "Exists" }]);
    assert.deepEqual(node.template.spec!.nodeSelector, { zone: "z1", rack: "r1" });
    assert.deepEqual(node.template.spec!.containers[node.container!]!.resources, { limits: { "nvidia.com/gpu": "2" } });
  });
});

/** A reader that has `runtimes` (cluster-scoped: namespace ""), or fails every read. */
const runtimeReader = (runtimes: KubeObject[], fail = false) => ({
  asked: [] as string[],
  get(kind: Parameters<typeof jobPath>[0], namespace: string, name: string): Promise<KubeObject | undefined> {
    this.asked.push(jobPath(kind, namespace, name));
    if (fail) return Promise.reject(new Error("connection refused"));
    return Promise.resolve(runtimes.find((r) => r.kind === kind.kind && (r.metadata as { name?: string }).name === name && namespace === ""));
  },
});

const b64 = (r: { review: { response?: { patch?: string } } }): Parameters<typeof applyPatch>[1] =>
  r.review.response?.patch ? JSON.parse(Buffer.from(r.review.response.patch, "base64").toString()) : [];

const create = (object: KubeObject) =>
  review({
    kind: { group: TJ.group, version: TJ.version, kind: TJ.kind },
    resource: { group: TJ.group, version: TJ.version, resource: TJ.plural },
    operation: "CREATE",
    namespace: "team-a",
    object,
    oldObject: null,
  });

describe("/mutate/jobs on a queued TrainJob, then /mutate/pods on its trainer pods", () => {
  for (const c of CASES) {
    it(c.name, async () => {
      const runtime = c.runtime ?? torch;
      const reader = runtimeReader([runtime]);
      const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: reader, now: () => new Date() });
      const res = await hooks["/mutate/jobs"]!.admit(create(c.job));
      assert.notEqual(res.outcome, "error", String(res.error));
      const job = deepFreeze(applyPatch(c.job, b64(res)) as KubeObject);
      // The same as the pure function's, after the bare-gpu rename the webhook does for every TrainJob.
      const renamed = renameTrainJobBareGpu(c.job, TJ, "nvidia.com/gpu").job;
      assert.deepEqual(job, outfitQueuedTrainJob(renamed, TJ, runtime, { policy, namespace: "team-a" }).job);
      assert.equal(reader.asked.length, c.name.startsWith("not queued") ? 0 : 1, "the runtime is read for a queued TrainJob only");
      if (!c.changed) return;
      const pod = deepFreeze(trainerPod(job, runtime));
      const out = await hooks["/mutate/pods"]!.admit(
        review({
          kind: { group: "", version: "v1", kind: "Pod" },
          resource: { group: "", version: "v1", resource: "pods" },
          operation: "CREATE",
          namespace: "team-a",
          object: pod,
          oldObject: null,
        }),
      );
      assert.notEqual(out.outcome, "error", String(out.error));
      const after = applyPatch(pod, b64(out)) as { spec: V1PodSpec };
      assert.deepEqual(after.spec.containers[0]!.resources, pod.spec.containers[0].resources, "resources");
      for (const f of ["affinity", "nodeSelector", "tolerations"] as const) assert.deepEqual(after.spec[f], pod.spec[f], f);
    });
  }

  it("runtime unreadable: the TrainJob gets only its rename, with a warning", async () => {
    const job = tj({ resources: { limits: { gpu: "4" } } });
    const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: runtimeReader([], true), now: () => new Date() });
    const res = await hooks["/mutate/jobs"]!.admit(create(job));
    const out = applyPatch(job, b64(res)) as Obj;
    assert.deepEqual(out.spec.trainer.resourcesPerNode, { limits: { "nvidia.com/gpu": "4" } });
    assert.equal(out.spec.runtimePatches, undefined);
    const warnings = res.review.response?.warnings ?? [];
    assert.ok(
      warnings.some((w) => w.startsWith("quartermaster: not outfitted for Kueue: the TrainJob's runtime could not be read")),
      warnings.join("\n"),
    );
  });

  it("runtime not found: unchanged beyond the rename, with a warning", async () => {
    const job = tj({ resources: { limits: { "nvidia.com/gpu": "4" } } });
    const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: runtimeReader([]), now: () => new Date() });
    const res = await hooks["/mutate/jobs"]!.admit(create(job));
    assert.equal(res.review.response?.patch, undefined);
    const warnings = res.review.response?.warnings ?? [];
    assert.ok(
      warnings.some((w) => w.startsWith("quartermaster: not outfitted for Kueue")),
      warnings.join("\n"),
    );
  });
});

describe("/mutate/jobs prices a queued TrainJob's runtime templates before outfitting (issue 46, bench:abuse)", () => {
  const wide = (containers: number): KubeObject => {
    const r = structuredClone(torch) as unknown as {
      spec: { template: { spec: { replicatedJobs: Array<{ template: { spec: { template: { spec: Obj } } } }> } } };
    };
    r.spec.template.spec.replicatedJobs[0]!.template.spec.template.spec.containers = Array.from({ length: containers }, (_, i) => ({
      name: `c${i}`,
      image: "x",
      resources: { limits: { "nvidia.com/gpu": "1" } },
    }));
    return deepFreeze(r as unknown as KubeObject);
  };
  const cases: Array<{ name: string; containers: number; outfitted: boolean }> = [
    {
      name: "a runtime of 20,000 containers → not outfitted, a warning naming the bound (before: all merged and outfitted)",
      containers: 20_000,
      outfitted: false,
    },
    { name: "a runtime of 4 containers → outfitted", containers: 4, outfitted: true },
  ];
  for (const c of cases)
    it(c.name, async () => {
      const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: runtimeReader([wide(c.containers)]), now: () => new Date() });
      const res = await hooks["/mutate/jobs"]!.admit(create(tj({ resources: { limits: { "nvidia.com/gpu": "1" } } })));
      assert.notEqual(res.outcome, "error", String(res.error));
      const job = applyPatch(tj(), b64(res)) as Obj;
      assert.equal(qmPatchOf(job as KubeObject) !== undefined, c.outfitted);
      const warnings = (res.review.response?.warnings ?? []).join("\n");
      if (c.outfitted) assert.doesNotMatch(warnings, /too large to check/);
      else assert.match(warnings, /not outfitted for Kueue: with its runtime's templates, too large to check/);
    });
});

describe("kueueAdmissionOnly with Quartermaster's runtime patch present", () => {
  const outfitted = outfitQueuedTrainJob(
    tj({
      resources: { limits: { "nvidia.com/gpu": "4" } },
      patches: [userPatch({ metadata: { annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } } })],
    }),
    TJ,
    torch,
    { policy, namespace: "team-a" },
  ).job as Obj;
  // As Kueue's webhook leaves it at CREATE: its own empty patch, after ours.
  const created: Obj = structuredClone(outfitted);
  created.spec.runtimePatches.push({ manager: KUEUE_RUNTIME_PATCH_MANAGER, trainingRuntimeSpec: { template: { spec: {} } } });
  const kueuePatched: Obj = structuredClone(created);
  kueuePatched.spec.runtimePatches[2].trainingRuntimeSpec.template.spec.replicatedJobs = [
    {
      name: "node",
      template: {
        spec: {
          template: { metadata: { labels: { "kueue.x-k8s.io/podset": "node" } }, spec: { nodeSelector: { "nvidia.com/gpu.product": "H100-SXM5-80GB" } } },
        },
      },
    },
  ];
  const unsuspended: Obj = structuredClone(kueuePatched);
  unsuspended.spec.suspend = false;

  it("Kueue's runtime patch UPDATE (still suspended) is Kueue's admission", () => {
    const a = kueueAdmissionOnly(created as KubeObject, kueuePatched as KubeObject, TJ);
    assert.ok(a, "Kueue's admission");
    assert.deepEqual(a.templates[0]!.nodeSelector, { "nvidia.com/gpu.product": "H100-SXM5-80GB" });
    assert.match(a.templates[0]!.templateField, /^spec\.runtimePatches\[2\]\./);
  });
  it("then suspend=false is Kueue's admission", () =>
    assert.equal(kueueAdmissionOnly(kueuePatched as KubeObject, unsuspended as KubeObject, TJ)?.unsuspended, true));
  it("a change to Quartermaster's patch in the same UPDATE is not", () => {
    const tampered: Obj = structuredClone(unsuspended);
    tampered.spec.runtimePatches[1].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.tolerations = [];
    assert.equal(kueueAdmissionOnly(kueuePatched as KubeObject, tampered as KubeObject, TJ), undefined);
  });
});
