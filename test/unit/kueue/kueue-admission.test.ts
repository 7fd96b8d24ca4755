/**
 * Issue 33, never strand an admitted job: `kueueAdmissionOnly` tells Kueue's admission UPDATE (kueue
 * `pkg/podset/podset.go` Merge, `pkg/controller/jobs/kubeflow/kubeflowjob/kubeflowjob_controller.go`
 * RunWithPodSetsInfo, `pkg/controller/jobs/trainjob/trainjob_controller.go`) from every other UPDATE, and
 * `/validate/jobs` refuses such an UPDATE only for what the node labels Kueue wrote select.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KUEUE_QUEUE_NAME, KUEUE_RUNTIME_PATCH_MANAGER, kueueAdmissionOnly, queueNameOf, waitingQueueOf } from "../../../src/kueue/admission.js";
import { ANNOTATION_ACCELERATOR } from "../../../src/core/keys.js";
import type { KubeObject } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { fakeJobReader, kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";

type Obj = Record<string, unknown>;
const clone = <T>(o: T): T => JSON.parse(JSON.stringify(o)) as T;

/** A queued, suspended PyTorchJob: a Master and `workers` Workers of `gpus` GPUs each; `annotations` on the templates. */
function queued(o: { workers?: number; gpus?: number; annotations?: Record<string, string>; containers?: number } = {}): Obj {
  const template = (): Obj => ({
    ...(o.annotations ? { metadata: { annotations: o.annotations } } : {}),
    spec: {
      containers: Array.from({ length: o.containers ?? 1 }, (_, i) => ({
        name: i === 0 ? "pytorch" : `side-${i}`,
        image: "img",
        resources: { limits: { "nvidia.com/gpu": String(o.gpus ?? 8) }, requests: { "nvidia.com/gpu": String(o.gpus ?? 8) } },
      })),
      tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "bert", namespace: "team-a", uid: "u1", resourceVersion: "10", generation: 1, labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } },
    spec: {
      runPolicy: { suspend: true, ttlSecondsAfterFinished: 60 },
      pytorchReplicaSpecs: { Master: { replicas: 1, template: template() }, Worker: { replicas: o.workers ?? 1, template: template() } },
    },
  };
}

const H100 = { "nvidia.com/gpu.product": "H100-SXM5-80GB" };
const A100 = { "nvidia.com/gpu.product": "A100-SXM4-80GB" };
const FLAVOR_TOLERATION = { key: "flavor", operator: "Equal", value: "gpu", effect: "NoSchedule" };

/** `job` as Kueue's admission leaves it: suspend false, `labels` merged into each template's nodeSelector, tolerations appended. */
function admitted(job: Obj, labels: Record<string, string>, extra: (j: Obj) => void = () => {}): Obj {
  const j = clone(job);
  const spec = j.spec as { runPolicy: Obj; pytorchReplicaSpecs: Record<string, { template: { metadata?: Obj; spec: Obj } }> };
  spec.runPolicy.suspend = false;
  for (const r of Object.values(spec.pytorchReplicaSpecs)) {
    r.template.spec.nodeSelector = { ...(r.template.spec.nodeSelector as Obj | undefined), ...labels };
    r.template.spec.tolerations = [...((r.template.spec.tolerations as unknown[]) ?? []), FLAVOR_TOLERATION];
  }
  (j.metadata as Obj).resourceVersion = "11";
  (j.metadata as Obj).generation = 2;
  extra(j);
  return j;
}

const workerTemplate = (j: Obj): { metadata?: Obj; spec: Obj } =>
  (j.spec as { pytorchReplicaSpecs: Record<string, { template: { metadata?: Obj; spec: Obj } }> }).pytorchReplicaSpecs.Worker!.template;

describe("queueNameOf", () => {
  const cases: Array<[string, KubeObject, string | undefined]> = [
    ["the label", { metadata: { labels: { [KUEUE_QUEUE_NAME]: "q" } } }, "q"],
    ["the older annotation", { metadata: { annotations: { [KUEUE_QUEUE_NAME]: "q2" } } }, "q2"],
    ["the label before the annotation", { metadata: { labels: { [KUEUE_QUEUE_NAME]: "a" }, annotations: { [KUEUE_QUEUE_NAME]: "b" } } }, "a"],
    ["an empty value: not queued", { metadata: { labels: { [KUEUE_QUEUE_NAME]: "" } } }, undefined],
    ["none", { metadata: { labels: { app: "x" } } }, undefined],
    ["no metadata", {}, undefined],
  ];
  for (const [name, job, want] of cases) it(name, () => assert.equal(queueNameOf(job), want));
});

describe("waitingQueueOf: the queue a job waits in", () => {
  const labelled: KubeObject = { metadata: { labels: { [KUEUE_QUEUE_NAME]: "team" } } };
  const cases: Array<[string, KubeObject | undefined, KubeObject | undefined, string | undefined]> = [
    ["its Workload's queueName first", labelled, { spec: { queueName: "moved" } }, "moved"],
    ["no Workload yet: the job's label", labelled, undefined, "team"],
    ["no Workload yet: the job's older annotation", { metadata: { annotations: { [KUEUE_QUEUE_NAME]: "old" } } }, undefined, "old"],
    ["a Workload without queueName: the job's", labelled, { spec: {} }, "team"],
    ["neither", { metadata: {} }, undefined, undefined],
    ["no job read, its Workload's", undefined, { spec: { queueName: "w" } }, "w"],
  ];
  for (const [name, job, workload, want] of cases) it(name, () => assert.equal(waitingQueueOf(job, workload), want));
});

describe("kueueAdmissionOnly (v1 kinds)", () => {
  const kind = kindOf("PyTorchJob");
  const base = queued();
  const cases: Array<{ name: string; old: Obj; now: Obj; want: "admission" | "no"; nodeSelector?: Record<string, string> }> = [
    { name: "suspend true → false, node labels and a toleration added", old: base, now: admitted(base, H100), want: "admission", nodeSelector: H100 },
    { name: "suspend true → false only (a flavor without node labels)", old: base, now: admitted(base, {}), want: "admission", nodeSelector: {} },
    {
      name: "plus pod labels, annotations and a scheduling gate added (Kueue's PodSetInfo, TAS)",
      old: base,
      now: admitted(base, H100, (j) => {
        const t = workerTemplate(j);
        t.metadata = { labels: { "kueue.x-k8s.io/podset": "worker" }, annotations: { "kueue.x-k8s.io/podset-unconstrained-topology": "true" } };
        t.spec.schedulingGates = [{ name: "kueue.x-k8s.io/topology" }];
        (j.metadata as Obj).managedFields = [{ manager: "kueue" }];
      }),
      want: "admission",
      nodeSelector: H100,
    },
    {
      name: "status changed too (ignored: not the main resource's)",
      old: { ...base, status: {} },
      now: { ...admitted(base, A100), status: { x: 1 } },
      want: "admission",
      nodeSelector: A100,
    },
    // Negative cases: anything else.
    {
      name: "suspend stays true (a user's edit)",
      old: base,
      now: admitted(base, H100, (j) => (((j.spec as Obj).runPolicy as Obj).suspend = true)),
      want: "no",
    },
    { name: "suspend false → true (Kueue stopping the job)", old: admitted(base, H100), now: base, want: "no" },
    {
      name: "suspend unset → false (a job never suspended)",
      old: { ...base, spec: { ...(base.spec as Obj), runPolicy: {} } },
      now: admitted(base, {}),
      want: "no",
    },
    {
      name: "a nodeSelector value the job had is changed",
      old: admitted(base, A100, (j) => (((j.spec as Obj).runPolicy as Obj).suspend = true)),
      now: admitted(base, H100),
      want: "no",
    },
    {
      name: "a toleration the job had is removed",
      old: base,
      now: admitted(base, H100, (j) => (workerTemplate(j).spec.tolerations = [FLAVOR_TOLERATION])),
      want: "no",
    },
    {
      name: "tolerations reordered",
      old: base,
      now: admitted(base, {}, (j) => (workerTemplate(j).spec.tolerations = [...(workerTemplate(j).spec.tolerations as unknown[])].reverse())),
      want: "no",
    },
    {
      name: "a container's resources changed",
      old: base,
      now: admitted(base, H100, (j) => (((workerTemplate(j).spec.containers as Obj[])[0]!.resources as Obj).limits = { "nvidia.com/gpu": "16" })),
      want: "no",
    },
    {
      name: "replicas changed",
      old: base,
      now: admitted(base, H100, (j) => ((j.spec as { pytorchReplicaSpecs: Record<string, Obj> }).pytorchReplicaSpecs.Worker!.replicas = 4)),
      want: "no",
    },
    {
      name: "a replica type added",
      old: base,
      now: admitted(base, H100, (j) => ((j.spec as { pytorchReplicaSpecs: Record<string, Obj> }).pytorchReplicaSpecs.Extra = {})),
      want: "no",
    },
    {
      name: "another run-policy field changed",
      old: base,
      now: admitted(base, H100, (j) => (((j.spec as Obj).runPolicy as Obj).ttlSecondsAfterFinished = 1)),
      want: "no",
    },
    { name: "the job's labels changed", old: base, now: admitted(base, H100, (j) => (((j.metadata as Obj).labels as Obj).team = "b")), want: "no" },
    {
      name: "a template label the job had is changed",
      old: queued({ annotations: { a: "1" } }),
      now: admitted(queued({ annotations: { a: "2" } }), H100),
      want: "no",
    },
    {
      name: "a template's affinity added (Kueue never writes it)",
      old: base,
      now: admitted(base, H100, (j) => (workerTemplate(j).spec.affinity = {})),
      want: "no",
    },
  ];
  for (const c of cases) {
    it(`${c.want === "admission" ? "admission" : "not"}: ${c.name}`, () => {
      const got = kueueAdmissionOnly(deepFreeze(clone(c.old)), deepFreeze(clone(c.now)), kind);
      if (c.want === "no") return assert.equal(got, undefined);
      assert.ok(got, "an admission");
      assert.equal(got.unsuspended, true);
      assert.deepEqual(
        got.templates.map((t) => t.templateField),
        ["spec.pytorchReplicaSpecs.Master.template", "spec.pytorchReplicaSpecs.Worker.template"],
      );
      assert.deepEqual(got.templates[1]!.nodeSelector, c.nodeSelector);
    });
  }
});

describe("kueueAdmissionOnly (TrainJob: runtime patch, then unsuspend)", () => {
  const kind = kindOf("TrainJob");
  const tj = (suspend: boolean, patches: unknown[] = [], numNodes = 2): Obj => ({
    apiVersion: "trainer.kubeflow.org/v1alpha1",
    kind: "TrainJob",
    metadata: { name: "t", namespace: "team-a", labels: { [KUEUE_QUEUE_NAME]: "q" } },
    spec: { suspend, runtimeRef: { name: "torch-distributed" }, trainer: { numNodes }, ...(patches.length ? { runtimePatches: patches } : {}) },
  });
  const kueuePatch = (labels: Record<string, string>, manager = KUEUE_RUNTIME_PATCH_MANAGER): Obj => ({
    manager,
    trainingRuntimeSpec: {
      template: {
        spec: { replicatedJobs: [{ name: "node", template: { spec: { template: { spec: { nodeSelector: labels, tolerations: [FLAVOR_TOLERATION] } } } } }] },
      },
    },
  });
  const userPatch = { manager: "me", trainingRuntimeSpec: { template: { spec: { replicatedJobs: [] } } } };
  const cases: Array<{ name: string; old: Obj; now: Obj; want: "admission" | "no"; unsuspended?: boolean; nodeSelector?: Record<string, string> }> = [
    {
      name: "Kueue's patch written while suspended",
      old: tj(true),
      now: tj(true, [kueuePatch(H100)]),
      want: "admission",
      unsuspended: false,
      nodeSelector: H100,
    },
    {
      name: "then suspend true → false alone",
      old: tj(true, [kueuePatch(H100)]),
      now: tj(false, [kueuePatch(H100)]),
      want: "admission",
      unsuspended: true,
      nodeSelector: {},
    },
    {
      name: "Kueue's patch beside a user's",
      old: tj(true, [userPatch]),
      now: tj(true, [userPatch, kueuePatch(A100)]),
      want: "admission",
      unsuspended: false,
      nodeSelector: A100,
    },
    { name: "a patch of another manager", old: tj(true), now: tj(true, [kueuePatch(H100, "me")]), want: "no" },
    { name: "numNodes changed", old: tj(true), now: tj(false, [], 4), want: "no" },
    { name: "nothing changed", old: tj(true), now: tj(true), want: "no" },
  ];
  for (const c of cases) {
    it(`${c.want === "admission" ? "admission" : "not"}: ${c.name}`, () => {
      const got = kueueAdmissionOnly(deepFreeze(c.old), deepFreeze(c.now), kind);
      if (c.want === "no") return assert.equal(got, undefined);
      assert.ok(got);
      assert.equal(got.unsuspended, c.unsuspended);
      assert.deepEqual(got.templates[0]?.nodeSelector ?? {}, c.nodeSelector);
    });
  }
});

describe("/validate/jobs on Kueue's admission UPDATE", () => {
  const kind = kindOf("PyTorchJob");
  const update = (policyDoc: Obj, old: Obj, now: Obj, gpus?: number) => {
    const policy = checkPolicy(policyDoc, "kueue");
    const capacity = gpus === undefined ? {} : { capacity: { current: () => ({ total: () => gpus }) } };
    const hooks = createWebhooks({ policy, log: capturingLogger().log, jobs: fakeJobReader(), now: () => new Date(), ...capacity });
    return hooks["/validate/jobs"]!.admit(
      review({
        kind: { group: kind.group, version: kind.version, kind: kind.kind },
        resource: { group: kind.group, version: kind.version, resource: kind.plural },
        operation: "UPDATE",
        namespace: "team-a",
        name: "bert",
        object: deepFreeze(clone(now)),
        oldObject: deepFreeze(clone(old)),
      }),
    );
  };
  const allowA100 = { limits: { allowedAccelerators: ["A100-SXM4-80GB"] } };
  const cases: Array<{ name: string; policy: Obj; old: Obj; now: Obj; denied: boolean; message?: RegExp; gpus?: number }> = [
    {
      name: "the cluster's GPUs shrank below the job since CREATE (capacity) → admitted",
      policy: {},
      old: queued({ workers: 3 }),
      now: admitted(queued({ workers: 3 }), A100),
      gpus: 8,
      denied: false,
    },
    {
      name: "not Kueue's: a capacity violation made worse → refused",
      policy: {},
      old: queued({ workers: 3 }),
      now: admitted(queued({ workers: 3, gpus: 16 }), A100),
      gpus: 8,
      denied: true,
      message: /whole cluster has 8/,
    },
    { name: "a flavor on an allowed accelerator → admitted", policy: allowA100, old: queued(), now: admitted(queued(), A100), denied: false },
    {
      name: "a flavor whose node labels select a disallowed accelerator → refused, naming the node labels Kueue wrote and the queue",
      policy: allowA100,
      old: queued(),
      now: admitted(queued(), H100),
      denied: true,
      message:
        /the node labels Kueue wrote \(nvidia\.com\/gpu\.product=H100-SXM5-80GB\) at admission from queue gpu-queue: accelerator H100-SXM5-80GB is not allowed/,
    },
    {
      name: "a flavor whose node labels are not on the accelerator label → admitted",
      policy: allowA100,
      old: queued(),
      now: admitted(queued(), { "cloud.google.com/gke-spot": "true", pool: "a" }),
      denied: false,
    },
    {
      name: "the job's own accelerator annotation disallowed since CREATE, its flavor on H100 → refused at the node labels Kueue wrote only",
      policy: allowA100,
      old: queued({ annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } }),
      now: admitted(queued({ annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } }), H100),
      denied: true,
      message: /nodeSelector\[nvidia\.com\/gpu\.product\]: the node labels Kueue wrote/,
    },
    {
      name: "the same job, its flavor on an allowed accelerator: the annotation it had does not refuse it",
      policy: allowA100,
      old: queued({ annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } }),
      now: admitted(queued({ annotations: { [ANNOTATION_ACCELERATOR]: "H100-SXM5-80GB" } }), {}),
      denied: false,
    },
    {
      name: "a per-job GPU cap lowered since CREATE → admitted",
      policy: { limits: { job: { gpus: 8 } } },
      old: queued({ workers: 3 }),
      now: admitted(queued({ workers: 3 }), A100),
      denied: false,
    },
    {
      name: "a replica cap lowered since CREATE → admitted",
      policy: { limits: { job: { replicas: { Worker: 1 } } } },
      old: queued({ workers: 3 }),
      now: admitted(queued({ workers: 3 }), A100),
      denied: false,
    },
    {
      name: "a run-policy cap lowered since CREATE → admitted",
      policy: { limits: { runPolicy: { maxTtlSecondsAfterFinished: 10 } } },
      old: queued(),
      now: admitted(queued(), A100),
      denied: false,
    },
    // Against: the same caps refuse an UPDATE that is not Kueue's and makes things worse.
    {
      name: "not Kueue's: Workers raised over the cap → refused",
      policy: { limits: { job: { replicas: { Worker: 1 } } } },
      old: queued({ workers: 3 }),
      now: admitted(queued({ workers: 4 }), A100),
      denied: true,
      message: /4 exceeds the limit of 1 Worker replicas/,
    },
    // A job within the cost bound at CREATE but over it when priced twice (old and new).
    {
      name: "a job priced under the bound alone, over it twice → Kueue's admission admitted",
      policy: {},
      old: queued({ containers: 150 }),
      now: admitted(queued({ containers: 150 }), A100),
      denied: false,
    },
    {
      name: "the same job, an UPDATE that is not Kueue's → refused by the cost bound",
      policy: {},
      old: queued({ containers: 150 }),
      now: admitted(queued({ containers: 150 }), A100, (j) => (((j.metadata as Obj).labels as Obj).x = "y")),
      denied: true,
      message: /review-cost|cost|bound/,
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const res = await update(c.policy, c.old, c.now, c.gpus);
      assert.equal(res.outcome === "denied", c.denied, JSON.stringify(res.review.response?.status ?? res.review.response?.warnings));
      if (c.message) assert.match(String(res.review.response?.status?.message), c.message);
    });
  }
});
