/**
 * Issue 33, queue-capacity: a queued job its ClusterQueue can never admit is refused at CREATE (or warned, by the
 * rule's mode), naming the queue, the flavors and their quota, at the replica's GPU field or the queue label; a
 * queue that cannot be read is a warning at most; a job without a queue name costs no read. Driven through
 * `/validate/jobs` with a reader serving LocalQueues, ClusterQueues and ResourceFlavors (kueue.x-k8s.io/v1beta2).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KUEUE_QUEUE_NAME } from "../../../src/kueue/admission.js";
import { readQueue } from "../../../src/admission/queue.js";
import type { KubeObject, ObjectKind } from "../../../src/core/kube.js";
import { checkPolicy } from "../../../src/policy/load.js";
import type { JobReader } from "../../../src/membership/types.js";
import { createWebhooks } from "../../../webhooks/index.js";
import { capturingLogger } from "../../fixtures/https.js";
import { kindOf } from "../../fixtures/jobs.js";
import { deepFreeze, review } from "../../fixtures/reviews.js";
import { gpuRuntime, perNode, trainJob } from "../../fixtures/trainer-v2.js";

type Obj = Record<string, unknown>;

/** A reader over `objects` keyed `<Kind>/<namespace>/<name>` (an Error value: that read fails), recording reads. */
function kueueReader(objects: Record<string, KubeObject | Error>): JobReader & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    get(kind: ObjectKind, namespace: string, name: string) {
      const key = `${kind.kind}/${namespace}/${name}`;
      asked.push(key);
      const v = objects[key];
      return v instanceof Error ? Promise.reject(v) : Promise.resolve(v);
    },
  };
}

const A100 = "A100-SXM4-80GB";
const H100 = "H100-SXM5-80GB";
const PRODUCT = "nvidia.com/gpu.product";

const flavor = (name: string, spec: Obj = {}): KubeObject => ({ apiVersion: "kueue.x-k8s.io/v1beta2", kind: "ResourceFlavor", metadata: { name }, spec });
const FLAVORS: Record<string, KubeObject> = {
  a100: flavor("a100", { nodeLabels: { [PRODUCT]: A100 } }),
  h100: flavor("h100", { nodeLabels: { [PRODUCT]: H100 } }),
  spot: flavor("spot", { nodeLabels: { [PRODUCT]: H100, pool: "spot" }, nodeTaints: [{ key: "spot", value: "true", effect: "NoSchedule" }] }),
  "mig-1g": flavor("mig-1g", { nodeLabels: { "nvidia.com/mig.config": "all-1g.5gb" } }),
};

/** `resource` quota per flavor: `[flavor, nominal, borrowingLimit?]`. */
type Quota = [string, number, number?];
function clusterQueue(quotas: Quota[], o: { cohort?: string; resource?: string } = {}): KubeObject {
  const resource = o.resource ?? "nvidia.com/gpu";
  return {
    apiVersion: "kueue.x-k8s.io/v1beta2",
    kind: "ClusterQueue",
    metadata: { name: "gpu-cq" },
    spec: {
      ...(o.cohort ? { cohortName: o.cohort } : {}),
      resourceGroups: [
        {
          coveredResources: ["cpu", "memory"],
          flavors: [
            {
              name: "default",
              resources: [
                { name: "cpu", nominalQuota: "64" },
                { name: "memory", nominalQuota: "256Gi" },
              ],
            },
          ],
        },
        {
          coveredResources: [resource],
          flavors: quotas.map(([name, nominal, borrowingLimit]) => ({
            name,
            resources: [{ name: resource, nominalQuota: String(nominal), ...(borrowingLimit === undefined ? {} : { borrowingLimit: String(borrowingLimit) }) }],
          })),
        },
      ],
    },
  };
}

const localQueue: KubeObject = {
  apiVersion: "kueue.x-k8s.io/v1beta2",
  kind: "LocalQueue",
  metadata: { name: "gpu-queue", namespace: "team-a" },
  spec: { clusterQueue: "gpu-cq" },
};

/** The objects a reader serves: the LocalQueue, `cq` as gpu-cq and every flavor. */
const cluster = (cq: KubeObject, more: Record<string, KubeObject | Error> = {}): Record<string, KubeObject | Error> => ({
  "LocalQueue/team-a/gpu-queue": localQueue,
  "ClusterQueue//gpu-cq": cq,
  ...Object.fromEntries(Object.entries(FLAVORS).map(([n, f]) => [`ResourceFlavor//${n}`, f])),
  ...more,
});

/** A queued PyTorchJob as /mutate/jobs leaves it: Master 1 and `workers` Workers of `gpus` GPUs, request = limit. */
function pytorch(o: { workers?: number; gpus?: number; resource?: string; spec?: Obj; queued?: boolean } = {}): KubeObject {
  const resource = o.resource ?? "nvidia.com/gpu";
  const template = (): Obj => ({
    spec: {
      containers: [
        { name: "pytorch", image: "img", resources: { limits: { [resource]: String(o.gpus ?? 8) }, requests: { [resource]: String(o.gpus ?? 8) } } },
      ],
      tolerations: [{ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" }],
      ...o.spec,
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name: "bert", namespace: "team-a", uid: "u1", ...(o.queued === false ? {} : { labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } }) },
    spec: {
      runPolicy: { suspend: true },
      pytorchReplicaSpecs: { Master: { replicas: 1, template: template() }, Worker: { replicas: o.workers ?? 1, template: template() } },
    },
  };
}

const pinned = (product: string): Obj => ({ nodeSelector: { [PRODUCT]: product } });
const WORKER_GPU = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests[nvidia.com/gpu]";
const QUEUE_LABEL_FIELD = `metadata.labels[${KUEUE_QUEUE_NAME}]`;

async function create(job: KubeObject, objects: Record<string, KubeObject | Error>, policyDoc: Obj = {}, runtime?: KubeObject) {
  const kind = kindOf(String(job.kind));
  const reader = kueueReader({ ...objects, ...(runtime ? { "ClusterTrainingRuntime//torch-distributed": runtime } : {}) });
  const hooks = createWebhooks({ policy: checkPolicy(policyDoc, "queue"), log: capturingLogger().log, jobs: reader, now: () => new Date() });
  const res = await hooks["/validate/jobs"]!.admit(
    review({
      kind: { group: kind.group, version: kind.version, kind: kind.kind },
      resource: { group: kind.group, version: kind.version, resource: kind.plural },
      operation: "CREATE",
      namespace: "team-a",
      name: String((job.metadata as Obj).name),
      object: deepFreeze(structuredClone(job)),
    }),
  );
  const response = res.review.response!;
  const causes = (response.status?.details?.causes ?? []).map((c: { field?: string }) => c.field);
  return {
    allowed: response.allowed,
    message: String(response.status?.message ?? ""),
    causes,
    warnings: (response.warnings ?? []).join("\n"),
    asked: reader.asked,
  };
}

interface Case {
  name: string;
  job: KubeObject;
  objects: Record<string, KubeObject | Error>;
  allowed: boolean;
  causes?: string[];
  message?: RegExp;
  warnings?: RegExp;
  policy?: Obj;
  runtime?: KubeObject;
}

const cases: Case[] = [
  { name: "fits: 2 × 8 GPUs in a flavor of 16", job: pytorch(), objects: cluster(clusterQueue([["a100", 16]])), allowed: true },
  {
    name: "exceeds nominal: a Worker set of 3 × 8 over a flavor of 16 (no cohort) → refused at the Worker's GPU request",
    job: pytorch({ workers: 3 }),
    objects: cluster(clusterQueue([["a100", 16]])),
    allowed: false,
    causes: [WORKER_GPU],
    message:
      /Worker asks for 3 × 8 = 24 nvidia\.com\/gpu, more than ClusterQueue gpu-cq \(queue gpu-queue\) can ever admit into one flavor: a100 16 \(nominalQuota 16, no cohort to borrow from\)/,
  },
  {
    name: "fits with borrowing: nominal 16 + borrowingLimit 16 in a cohort",
    job: pytorch({ workers: 3 }),
    objects: cluster(clusterQueue([["a100", 16, 16]], { cohort: "org" })),
    allowed: true,
  },
  {
    name: "over nominal + borrowingLimit in a cohort → refused, naming the borrowing limit",
    job: pytorch({ workers: 3 }),
    objects: cluster(clusterQueue([["a100", 16, 4]], { cohort: "org" })),
    allowed: false,
    causes: [WORKER_GPU],
    message: /a100 20 \(nominalQuota 16 \+ borrowingLimit 4\)/,
  },
  {
    name: "a cohort without a borrowing limit: bounded only by the cohort (not read) → admitted",
    job: pytorch({ workers: 100 }),
    objects: cluster(clusterQueue([["a100", 16]], { cohort: "org" })),
    allowed: true,
  },
  {
    name: "pinned to A100 (quota 16) while H100 (64) could fit → refused, saying H100 does not fit its pods",
    job: pytorch({ workers: 3, spec: pinned(A100) }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["h100", 64],
      ]),
    ),
    allowed: false,
    causes: [WORKER_GPU],
    message:
      /into one flavor: a100 16 .*the other flavors do not fit its pods \(h100: its nodeLabels do not match nodeSelector nvidia\.com\/gpu\.product=A100-SXM4-80GB\)/,
  },
  {
    name: "the same job unpinned: H100's 64 can take it",
    job: pytorch({ workers: 3 }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["h100", 64],
      ]),
    ),
    allowed: true,
  },
  {
    name: "pinned by required node affinity to A100 → refused the same way",
    job: pytorch({
      workers: 3,
      spec: {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: PRODUCT, operator: "In", values: [A100] }] }] },
          },
        },
      },
    }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["h100", 64],
      ]),
    ),
    allowed: false,
    causes: [WORKER_GPU],
  },
  {
    name: "node selection on a key no flavor labels is not Kueue's concern → admitted",
    job: pytorch({ workers: 3, spec: { nodeSelector: { zone: "a" } } }),
    objects: cluster(clusterQueue([["h100", 64]])),
    allowed: true,
  },
  {
    name: "only a tainted spot flavor is large enough, the pods do not tolerate it → refused",
    job: pytorch({ workers: 3 }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["spot", 64],
      ]),
    ),
    allowed: false,
    message: /spot: untolerated taint spot=true:NoSchedule/,
  },
  {
    name: "the same job tolerating spot → admitted",
    job: pytorch({
      workers: 3,
      spec: {
        tolerations: [
          { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
          { key: "spot", operator: "Equal", value: "true", effect: "NoSchedule" },
        ],
      },
    }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["spot", 64],
      ]),
    ),
    allowed: true,
  },
  {
    name: "no flavor fits at all (pinned to a product no flavor has) → refused",
    job: pytorch({ spec: pinned("B200") }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["h100", 64],
      ]),
    ),
    allowed: false,
    message: /no flavor of ClusterQueue gpu-cq \(queue gpu-queue\) can take its pods \(a100: .*; h100: /,
  },
  {
    name: "MIG: 4 × 4 nvidia.com/mig-1g.5gb over a quota of 8 → refused",
    job: pytorch({ workers: 4, gpus: 4, resource: "nvidia.com/mig-1g.5gb" }),
    objects: cluster(clusterQueue([["mig-1g", 8]], { resource: "nvidia.com/mig-1g.5gb" })),
    allowed: false,
    causes: ["spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.requests[nvidia.com/mig-1g.5gb]"],
    message: /Worker asks for 4 × 4 = 16 nvidia\.com\/mig-1g\.5gb/,
  },
  {
    name: "MIG within its quota → admitted",
    job: pytorch({ workers: 1, gpus: 4, resource: "nvidia.com/mig-1g.5gb" }),
    objects: cluster(clusterQueue([["mig-1g", 8]], { resource: "nvidia.com/mig-1g.5gb" })),
    allowed: true,
  },
  {
    name: "a GPU resource the ClusterQueue has no quota for → refused",
    job: pytorch({ gpus: 1, resource: "nvidia.com/mig-1g.5gb" }),
    objects: cluster(clusterQueue([["a100", 16]])),
    allowed: false,
    message: /ClusterQueue gpu-cq \(queue gpu-queue\) has no quota for nvidia\.com\/mig-1g\.5gb \(it covers cpu, memory, nvidia\.com\/gpu\)/,
  },
  {
    name: "multiple pod sets: each fits a flavor of 12, 16 in all within 24 → admitted",
    job: pytorch(),
    objects: cluster(
      clusterQueue([
        ["a100", 12],
        ["h100", 12],
      ]),
    ),
    allowed: true,
  },
  {
    name: "multiple pod sets: each 8 fits the one flavor of 12, 16 in all does not → refused at the queue label",
    job: pytorch(),
    objects: cluster(clusterQueue([["a100", 12]])),
    allowed: false,
    causes: [QUEUE_LABEL_FIELD],
    message:
      /the job asks for 16 nvidia\.com\/gpu in all, more than ClusterQueue gpu-cq \(queue gpu-queue\) can ever admit in the flavors its pods fit: a100 12/,
  },
  {
    name: "TrainJob: 4 nodes × 8 GPUs over a flavor of 16 → refused at spec.trainer.resourcesPerNode",
    job: trainJob("llm", { numNodes: 4, resourcesPerNode: perNode(8) }, { metadata: { labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } } }),
    runtime: gpuRuntime(8),
    objects: cluster(clusterQueue([["a100", 16]])),
    allowed: false,
    causes: ["spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]"],
    message: /node asks for 4 × 8 = 32 nvidia\.com\/gpu/,
  },
  {
    name: "TrainJob within quota → admitted",
    job: trainJob("llm", { numNodes: 2, resourcesPerNode: perNode(8) }, { metadata: { labels: { [KUEUE_QUEUE_NAME]: "gpu-queue" } } }),
    runtime: gpuRuntime(8),
    objects: cluster(clusterQueue([["a100", 16]])),
    allowed: true,
  },
  {
    name: "queue missing → admitted, with a warning",
    job: pytorch({ workers: 100 }),
    objects: {},
    allowed: true,
    warnings: /queue gpu-queue not checked: LocalQueue team-a\/gpu-queue not found/,
  },
  {
    name: "ClusterQueue missing → admitted, with a warning",
    job: pytorch({ workers: 100 }),
    objects: { "LocalQueue/team-a/gpu-queue": localQueue },
    allowed: true,
    warnings: /ClusterQueue gpu-cq \(of LocalQueue team-a\/gpu-queue\) not found/,
  },
  {
    name: "read failure (ClusterQueue: 403) → admitted, with a warning",
    job: pytorch({ workers: 100 }),
    objects: cluster(clusterQueue([["a100", 16]]), { "ClusterQueue//gpu-cq": new Error("HTTP 403: forbidden") }),
    allowed: true,
    warnings: /queue gpu-queue not checked: reading ClusterQueue \/gpu-cq failed: HTTP 403: forbidden/,
  },
  {
    name: "a flavor that cannot be read counts as fitting, unbounded → admitted, with a warning",
    job: pytorch({ workers: 3, spec: pinned(A100) }),
    objects: cluster(
      clusterQueue([
        ["a100", 16],
        ["h100", 64],
      ]),
      { "ResourceFlavor//h100": new Error("timeout") },
    ),
    allowed: true,
    warnings: /some ResourceFlavors could not be read/,
  },
  {
    name: "rule in warn → admitted, the violation a warning",
    job: pytorch({ workers: 3 }),
    objects: cluster(clusterQueue([["a100", 16]])),
    policy: { enforcement: { rules: { "queue-capacity": "warn" } } },
    allowed: true,
    warnings: /queue-capacity \(warn\): spec\.pytorchReplicaSpecs\.Worker/,
  },
];

describe("queue-capacity through /validate/jobs (CREATE)", () => {
  for (const c of cases)
    it(c.name, async () => {
      const got = await create(c.job, c.objects, c.policy, c.runtime);
      assert.equal(got.allowed, c.allowed, `${got.message}\n${got.warnings}`);
      if (c.causes) assert.deepEqual(got.causes, c.causes);
      if (c.message) assert.match(got.message, c.message);
      if (c.warnings) assert.match(got.warnings, c.warnings);
    });

  it("a job without a queue name reads nothing, however large", async () => {
    const got = await create(pytorch({ workers: 100, queued: false }), cluster(clusterQueue([["a100", 16]])));
    assert.equal(got.allowed, true);
    assert.deepEqual(got.asked, []);
  });

  it("a queued job reads its LocalQueue, ClusterQueue and only the GPU groups' flavors", async () => {
    const got = await create(
      pytorch(),
      cluster(
        clusterQueue([
          ["a100", 16],
          ["h100", 64],
        ]),
      ),
    );
    assert.deepEqual(got.asked.sort(), ["ClusterQueue//gpu-cq", "LocalQueue/team-a/gpu-queue", "ResourceFlavor//a100", "ResourceFlavor//h100"]);
  });

  it("an UPDATE is not checked against the queue (no read)", async () => {
    const kind = kindOf("PyTorchJob");
    const reader = kueueReader(cluster(clusterQueue([["a100", 16]])));
    const hooks = createWebhooks({ policy: checkPolicy({}, "q"), log: capturingLogger().log, jobs: reader, now: () => new Date() });
    const job = pytorch({ workers: 3 });
    const res = await hooks["/validate/jobs"]!.admit(
      review({
        kind: { group: kind.group, version: kind.version, kind: kind.kind },
        resource: { group: kind.group, version: kind.version, resource: kind.plural },
        operation: "UPDATE",
        namespace: "team-a",
        name: "bert",
        object: deepFreeze(structuredClone(job)),
        oldObject: deepFreeze(structuredClone(job)),
      }),
    );
    assert.equal(res.review.response?.allowed, true);
    assert.deepEqual(reader.asked, []);
  });
});

describe("readQueue", () => {
  it("the whole chain within one time bound: a LocalQueue that never answers ends in time, as unavailable", async () => {
    const never: JobReader = { get: () => new Promise(() => undefined) };
    const started = performance.now();
    const got = await readQueue({ job: pytorch(), namespace: "team-a", isGpu: () => true, reader: never, timeoutMs: 60 });
    assert.equal(got.kind, "unavailable");
    assert.ok(performance.now() - started < 1000);
  });

  it("a LocalQueue naming no ClusterQueue → unavailable, saying so", async () => {
    const reader = kueueReader({ "LocalQueue/team-a/gpu-queue": { ...localQueue, spec: {} } });
    const got = await readQueue({ job: pytorch(), namespace: "team-a", isGpu: () => true, reader, timeoutMs: 1000 });
    assert.deepEqual(got, { kind: "unavailable", queue: "gpu-queue", reason: "LocalQueue team-a/gpu-queue names no ClusterQueue" });
  });

  it("not queued → answered at once, no promise", () => {
    const got = readQueue({ job: pytorch({ queued: false }), namespace: "team-a", isGpu: () => true, reader: kueueReader({}), timeoutMs: 1000 });
    assert.deepEqual(got, { kind: "none" });
  });
});
