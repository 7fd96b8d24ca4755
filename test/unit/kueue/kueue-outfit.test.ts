/**
 * Issue 33, outfitting at the job: a queued job's pod templates get, at CREATE, the pod mutations Kueue reads
 * (`src/mutate/job-templates.ts`); an unqueued job's do not; mutating the result again changes nothing; and the
 * pod the operator then makes from such a template gets no further change to resources, affinity, nodeSelector
 * or tolerations from `/mutate/pods`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1PodSpec } from "@kubernetes/client-node";
import { KUEUE_QUEUE_NAME } from "../../../src/kueue/admission.js";
import { applyPatch } from "../../../src/admission/patch.js";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION, ANNOTATION_INTERRUPTIBLE } from "../../../src/core/keys.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { QUEUED_WORKLOAD_KINDS, workloadTemplateSpecs, type QueuedWorkloadKind } from "../../../src/core/job-shapes.js";
import { KUEUE_READ_MUTATIONS, outfitQueuedJobTemplates, outfitQueuedWorkloadTemplates } from "../../../src/mutate/job-templates.js";
import { POD_MUTATIONS } from "../../../src/mutate/index.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { corpusPods } from "../../fixtures/corpus.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { ALL_MUTATIONS } from "../../fixtures/policies.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

const policy = checkPolicy({ ...ALL_MUTATIONS, resources: { ...ALL_MUTATIONS.resources, defaultRequests: { cpu: "1", memory: "1Gi" } } }, "kueue");

interface Tmpl {
  annotations?: Record<string, string>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  spec?: Partial<V1PodSpec>;
}

/** A PyTorchJob with one Master and 2 Workers from `tmpl`; `queue`: how it is queued. */
function ptJob(tmpl: Tmpl, queue: "label" | "annotation" | "none" = "label", kind = "PyTorchJob"): KubeObject {
  const k = kindOf(kind);
  const container = { name: kind === "PyTorchJob" ? "pytorch" : "tensorflow", image: "img", ...(tmpl.resources ? { resources: tmpl.resources } : {}) };
  const template = { ...(tmpl.annotations ? { metadata: { annotations: tmpl.annotations } } : {}), spec: { containers: [container], ...tmpl.spec } };
  const q = { [KUEUE_QUEUE_NAME]: "team-a-queue" };
  // Through JSON, as a review's object arrives: no object shared between the replica specs.
  return deepFreeze(
    JSON.parse(
      JSON.stringify({
        apiVersion: `${k.group}/${k.version}`,
        kind,
        metadata: {
          name: "bert",
          namespace: "team-a",
          uid: "uid-bert",
          ...(queue === "label" ? { labels: q } : queue === "annotation" ? { annotations: q } : {}),
        },
        spec: {
          runPolicy: { suspend: true },
          [kind === "PyTorchJob" ? "pytorchReplicaSpecs" : "tfReplicaSpecs"]: {
            [kind === "PyTorchJob" ? "Master" : "Chief"]: { replicas: 1, template },
            Worker: { replicas: 2, template },
          },
        },
      }),
    ) as KubeObject,
  );
}

const workerSpec = (j: KubeObject): V1PodSpec => {
  const specs = (j.spec as Record<string, Record<string, { template: { spec: V1PodSpec } }>>).pytorchReplicaSpecs!;
  return specs.Worker!.template.spec;
};

const GPU_TOLERATION = { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" };
const OFF_INTERRUPTIBLE = { key: "x/interruptible", operator: "DoesNotExist" };

describe("KUEUE_READ_MUTATIONS", () => {
  it("are the very objects of POD_MUTATIONS, in its order", () => {
    assert.deepEqual(
      KUEUE_READ_MUTATIONS.map((m) => m.name),
      ["resources", "gpu-tolerations", "accelerator", "interruptible"],
    );
    for (const m of KUEUE_READ_MUTATIONS) assert.ok(POD_MUTATIONS.includes(m), `${m.name} is POD_MUTATIONS' own`);
  });
});

describe("outfitQueuedJobTemplates", () => {
  const kind = kindOf("PyTorchJob");
  const cases: Array<{ name: string; job: KubeObject; changed: boolean; check?: (worker: V1PodSpec) => void }> = [
    {
      name: "queued by label: bare gpu renamed, request = limit, cpu/memory defaults, GPU toleration, kept off interruptible nodes",
      job: ptJob({ resources: { limits: { gpu: "8" } } }),
      changed: true,
      check(w) {
        assert.deepEqual(w.containers[0]!.resources, {
          limits: { "nvidia.com/gpu": "8", memory: "1Gi" },
          requests: { "nvidia.com/gpu": "8", cpu: "1", memory: "1Gi" },
        });
        assert.deepEqual(w.tolerations, [GPU_TOLERATION]);
        assert.deepEqual(w.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms, [
          { matchExpressions: [OFF_INTERRUPTIBLE] },
        ]);
      },
    },
    {
      name: "queued by the older annotation: outfitted the same",
      job: ptJob({ resources: { limits: { gpu: "8" } } }, "annotation"),
      changed: true,
      check: (w) => assert.deepEqual(w.tolerations, [GPU_TOLERATION]),
    },
    {
      name: "accelerator and partition annotations on the template → required affinity and Equal tolerations",
      job: ptJob({ annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" }, resources: { limits: { "nvidia.com/gpu": "8" } } }),
      changed: true,
      check(w) {
        const terms = w.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
        assert.deepEqual(terms, [{ matchExpressions: [{ key: "nvidia.com/gpu.product", operator: "In", values: ["H100-SXM5-80GB"] }, OFF_INTERRUPTIBLE] }]);
        assert.ok(w.tolerations?.some((t) => t.key === "nvidia.com/gpu.product" && t.value === "H100-SXM5-80GB"));
      },
    },
    {
      name: "MIG partition → GFD terms",
      job: ptJob({ annotations: { [ANNOTATION_GPU_PARTITION]: "1g.10gb" }, resources: { limits: { "nvidia.com/mig-1g.10gb": "1" } } }),
      changed: true,
      check(w) {
        const terms = w.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms ?? [];
        assert.ok(terms.some((t) => t.matchExpressions?.some((e) => e.key === "nvidia.com/mig-1g.10gb.count")));
      },
    },
    {
      name: "interruptible → its tolerations and node requirement",
      job: ptJob({ annotations: { [ANNOTATION_INTERRUPTIBLE]: "true" }, resources: { limits: { "nvidia.com/gpu": "1" } } }),
      changed: true,
      check(w) {
        assert.ok(w.tolerations?.some((t) => t.key === "x/interruptible"));
        const terms = w.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
        assert.deepEqual(terms, [{ matchExpressions: [{ key: "x/interruptible", operator: "In", values: ["true"] }] }]);
      },
    },
    {
      name: "not queued → the very same job (kept as written; its pods are outfitted at CREATE)",
      job: ptJob({ resources: { limits: { gpu: "8" } } }, "none"),
      changed: false,
    },
    {
      name: "queued, everything already there → the very same job",
      job: ptJob({
        resources: { limits: { "nvidia.com/gpu": "8", memory: "1Gi" }, requests: { "nvidia.com/gpu": "8", cpu: "1", memory: "1Gi" } },
        spec: {
          tolerations: [GPU_TOLERATION],
          affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [OFF_INTERRUPTIBLE] }] } } },
        },
      }),
      changed: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const out = outfitQueuedJobTemplates(c.job, kind, { policy, namespace: "team-a" });
      assert.equal(out.job !== c.job, c.changed);
      if (c.changed) {
        assert.deepEqual(
          out.applied.map((a) => a.templateField),
          ["spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"],
        );
        assert.ok(out.warnings.length > 0);
      }
      c.check?.(workerSpec(out.job));
      // Reinvocation: the result mutated again is the very same object.
      const again = outfitQueuedJobTemplates(deepFreeze(out.job), kind, { policy, namespace: "team-a" });
      assert.equal(again.job, out.job, "mutating the result again changes nothing");
    });
  }

  it("a TrainJob's templates are its runtime's: the very same TrainJob", () => {
    const tj = deepFreeze({
      apiVersion: "trainer.kubeflow.org/v1alpha1",
      kind: "TrainJob",
      metadata: { name: "t", namespace: "team-a", labels: { [KUEUE_QUEUE_NAME]: "q" } },
      spec: { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: 2, resourcesPerNode: { limits: { "nvidia.com/gpu": "8" } } } },
    });
    assert.equal(outfitQueuedJobTemplates(tj, kindOf("TrainJob"), { policy, namespace: "team-a" }).job, tj);
  });
});

describe("/mutate/jobs then /mutate/pods: a queued job's pods get no further change to what Kueue read", () => {
  const patchOf = (r: { review: { response?: { patch?: string } } }): Parameters<typeof applyPatch>[1] =>
    r.review.response?.patch ? JSON.parse(Buffer.from(r.review.response.patch, "base64").toString()) : [];
  const cases: Array<{ name: string; job: KubeObject }> = [
    { name: "bare gpu", job: ptJob({ resources: { limits: { gpu: "8" } } }) },
    { name: "accelerator", job: ptJob({ annotations: { [ANNOTATION_ACCELERATOR]: "A100-SXM4-80GB" }, resources: { limits: { "nvidia.com/gpu": "4" } } }) },
    { name: "MIG partition", job: ptJob({ annotations: { [ANNOTATION_GPU_PARTITION]: "1g.10gb" }, resources: { limits: { "nvidia.com/mig-1g.10gb": "1" } } }) },
    { name: "interruptible", job: ptJob({ annotations: { [ANNOTATION_INTERRUPTIBLE]: "true" }, resources: { requests: { "nvidia.com/gpu": "1" } } }) },
    { name: "CPU only", job: ptJob({}) },
    { name: "a TFJob", job: ptJob({ resources: { limits: { gpu: "2" } } }, "label", "TFJob") },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const kind = kindOf(String(c.job.kind));
      const reader = fakeJobReader();
      const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: reader, now: () => new Date() });
      const res = await hooks["/mutate/jobs"]!.admit(
        review({
          kind: { group: kind.group, version: kind.version, kind: kind.kind },
          resource: { group: kind.group, version: kind.version, resource: kind.plural },
          operation: "CREATE",
          namespace: "team-a",
          object: c.job,
          oldObject: null,
        }),
      );
      assert.equal(res.outcome, "patched");
      const job = deepFreeze(applyPatch(c.job, patchOf(res)) as KubeObject);
      const pods = corpusPods([{ file: "kueue.yaml", object: job }]);
      assert.ok(pods.length >= 2);
      const withJob = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader([job]), now: () => new Date() });
      for (const { source, pod } of pods) {
        const out = await withJob["/mutate/pods"]!.admit(
          review({
            kind: { group: "", version: "v1", kind: "Pod" },
            resource: { group: "", version: "v1", resource: "pods" },
            operation: "CREATE",
            namespace: "team-a",
            object: deepFreeze(pod),
            oldObject: null,
          }),
        );
        assert.notEqual(out.outcome, "error", String(out.error));
        const after = applyPatch(pod, patchOf(out)) as { spec: V1PodSpec };
        const before = pod.spec as V1PodSpec;
        for (const list of ["containers", "initContainers"] as const)
          (before[list] ?? []).forEach((ct, i) => assert.deepEqual(after.spec[list]![i]!.resources, ct.resources, `${source}: ${list}[${i}] resources`));
        for (const f of ["affinity", "nodeSelector", "tolerations"] as const) assert.deepEqual(after.spec[f], before[f], `${source}: ${f}`);
      }
    });
  }

  it("an unqueued job's templates are not patched (no jobDefaults configured: no patch at all)", async () => {
    const job = ptJob({ resources: { limits: { gpu: "8" } } }, "none");
    const kind = kindOf("PyTorchJob");
    const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() });
    const res = await hooks["/mutate/jobs"]!.admit(
      review({
        kind: { group: kind.group, version: kind.version, kind: kind.kind },
        resource: { group: kind.group, version: kind.version, resource: kind.plural },
        operation: "CREATE",
        namespace: "team-a",
        object: job,
        oldObject: null,
      }),
    );
    assert.equal(res.review.response?.patch, undefined);
  });
});

describe("queued batch Jobs and JobSets (QUEUED_WORKLOAD_KINDS): templates outfitted at CREATE, their pods then unchanged", () => {
  const [BATCH_JOB, JOBSET] = QUEUED_WORKLOAD_KINDS as [QueuedWorkloadKind, QueuedWorkloadKind];
  const podTemplate = (tmpl: Tmpl) => ({
    ...(tmpl.annotations ? { metadata: { annotations: tmpl.annotations } } : {}),
    spec: { restartPolicy: "Never", containers: [{ name: "train", image: "img", ...(tmpl.resources ? { resources: tmpl.resources } : {}) }], ...tmpl.spec },
  });
  const meta = (queued: boolean) => ({ name: "w", namespace: "team-a", uid: "uid-w", ...(queued ? { labels: { [KUEUE_QUEUE_NAME]: "q" } } : {}) });
  const batchJob = (tmpl: Tmpl, queued = true): KubeObject =>
    deepFreeze(
      JSON.parse(JSON.stringify({ apiVersion: "batch/v1", kind: "Job", metadata: meta(queued), spec: { parallelism: 2, template: podTemplate(tmpl) } })),
    );
  const jobSet = (tmpls: Tmpl[], queued = true): KubeObject =>
    deepFreeze(
      JSON.parse(
        JSON.stringify({
          apiVersion: "jobset.x-k8s.io/v1alpha2",
          kind: "JobSet",
          metadata: meta(queued),
          spec: { replicatedJobs: tmpls.map((t, i) => ({ name: `rj${i}`, replicas: 1, template: { spec: { parallelism: 2, template: podTemplate(t) } } })) },
        }),
      ),
    );
  const specsOf = (o: KubeObject, kind: QueuedWorkloadKind): V1PodSpec[] => workloadTemplateSpecs(o, kind);
  const GPU8 = { resources: { limits: { gpu: "8" } } };
  const cases: Array<{ name: string; obj: KubeObject; kind: QueuedWorkloadKind; fields: string[]; check?: (specs: V1PodSpec[]) => void }> = [
    {
      name: "batch Job, bare gpu: renamed, defaults, GPU toleration",
      obj: batchJob(GPU8),
      kind: BATCH_JOB,
      fields: ["spec.template"],
      check([s]) {
        assert.deepEqual(s!.containers[0]!.resources?.requests, { "nvidia.com/gpu": "8", cpu: "1", memory: "1Gi" });
        assert.deepEqual(s!.tolerations, [GPU_TOLERATION]);
      },
    },
    {
      name: "batch Job with an accelerator annotation: required affinity on the product",
      obj: batchJob({ annotations: { [ANNOTATION_ACCELERATOR]: "NVIDIA-H100-80GB-HBM3" }, resources: { limits: { "nvidia.com/gpu": "4" } } }),
      kind: BATCH_JOB,
      fields: ["spec.template"],
      check([s]) {
        const terms = s!.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
        assert.deepEqual(terms?.[0]?.matchExpressions?.[0], { key: "nvidia.com/gpu.product", operator: "In", values: ["NVIDIA-H100-80GB-HBM3"] });
      },
    },
    {
      name: "JobSet: each replicated Job's template, at its index; a CPU one gets only defaults",
      obj: jobSet([GPU8, {}, { annotations: { [ANNOTATION_INTERRUPTIBLE]: "true" }, resources: { limits: { "nvidia.com/gpu": "1" } } }]),
      kind: JOBSET,
      fields: [
        "spec.replicatedJobs[0].template.spec.template",
        "spec.replicatedJobs[1].template.spec.template",
        "spec.replicatedJobs[2].template.spec.template",
      ],
      check([a, cpu, spot]) {
        assert.deepEqual(a!.tolerations, [GPU_TOLERATION]);
        assert.equal(cpu!.tolerations, undefined);
        assert.deepEqual(cpu!.containers[0]!.resources?.requests, { cpu: "1", memory: "1Gi" });
        assert.ok(spot!.tolerations?.some((t) => t.key === "x/interruptible"));
      },
    },
    { name: "batch Job not queued: the very same object", obj: batchJob(GPU8, false), kind: BATCH_JOB, fields: [] },
    { name: "JobSet not queued: the very same object", obj: jobSet([GPU8], false), kind: JOBSET, fields: [] },
    {
      name: "JobSet without replicatedJobs: the very same object",
      obj: deepFreeze({ kind: "JobSet", metadata: meta(true), spec: {} }),
      kind: JOBSET,
      fields: [],
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const out = outfitQueuedWorkloadTemplates(c.obj, c.kind, { policy, namespace: "team-a" });
      assert.deepEqual(
        out.applied.map((a) => a.templateField),
        c.fields,
      );
      assert.equal(out.job === c.obj, c.fields.length === 0);
      c.check?.(specsOf(out.job, c.kind));
      const again = outfitQueuedWorkloadTemplates(deepFreeze(out.job), c.kind, { policy, namespace: "team-a" });
      assert.equal(again.job, out.job, "mutating the result again changes nothing");
      // Through the webhook, as the `workloads.mutate` hook sends it: the same object after the patch.
      const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date() });
      const res = await hooks["/mutate/jobs"]!.admit(
        review({
          kind: { group: c.kind.group, version: c.kind.version, kind: c.kind.kind },
          resource: { group: c.kind.group, version: c.kind.version, resource: c.kind.plural },
          operation: "CREATE",
          namespace: "team-a",
          object: c.obj,
          oldObject: null,
        }),
      );
      assert.notEqual(res.outcome, "error", String(res.error));
      const patched = res.review.response?.patch ? applyPatch(c.obj, JSON.parse(Buffer.from(res.review.response.patch, "base64").toString())) : c.obj;
      assert.deepEqual(patched, out.job);
      // A pod made from each outfitted template: /mutate/pods changes nothing Kueue read.
      for (const path of c.kind.templatePaths(out.job)) {
        const template = path.reduce<any>((o, k) => o[k], out.job);
        const spec = template.spec as V1PodSpec;
        const pod = deepFreeze({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { ...structuredClone(template.metadata ?? {}), name: "p", namespace: "team-a" },
          spec: structuredClone(spec),
        });
        const podRes = await hooks["/mutate/pods"]!.admit(
          review({
            kind: { group: "", version: "v1", kind: "Pod" },
            resource: { group: "", version: "v1", resource: "pods" },
            operation: "CREATE",
            namespace: "team-a",
            object: pod,
            oldObject: null,
          }),
        );
        const after = (podRes.review.response?.patch ? applyPatch(pod, JSON.parse(Buffer.from(podRes.review.response.patch, "base64").toString())) : pod) as {
          spec: V1PodSpec;
        };
        if (c.fields.length === 0) continue;
        for (const f of ["affinity", "nodeSelector", "tolerations"] as const) assert.deepEqual(after.spec[f], spec[f], f);
        assert.deepEqual(after.spec.containers[0]!.resources, spec.containers[0]!.resources);
      }
    });
  }
});
