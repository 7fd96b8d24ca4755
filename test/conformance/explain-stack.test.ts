/**
 * `quartermaster explain` and the resident reconciler's verdicts on the live stack (issue 49, "Done when"): one
 * control plane (kube-apiserver, kube-scheduler, kube-controller-manager's job-, resourceclaim- and
 * node-lifecycle controllers), kwok running GPU nodes of several shapes and their pods, a stand-in DRA driver's
 * ResourceSlices for kwok nodes, the real Kubeflow training operator v1.9.4 (QM_OPERATOR_BIN), Kueue v0.19.2
 * (QM_KUEUE_BIN), Quartermaster's webhooks as its manifests install them, and `quartermaster reconcile --watch` as a
 * child process running as the reconciler's ServiceAccount (its Events).
 *
 * A table of named scenarios, each in a namespace of its own and on nodes of its own (`qm.e2e/pool`), run at once:
 * each sets up a cause and creates a PyTorchJob, then
 * 1. `explain pytorchjob/<name> -o json` (the CLI's own entry, `runCli`, against the apiserver) names the expected
 *    reason (and, for the two-cause scenarios, the other one under `also`), with the evidence expected;
 * 2. the Event expected appears on the job within 30 s of the cause (a Warning `QuartermasterBlocked` from the
 *    reconciler naming the reason its caches allow, or the webhook's `KueueAdmissionRefused`);
 * 3. the cause removed, `explain` moves to the next reason or to running, and the reconciler says so (a
 *    `QuartermasterRunning`, or a new `QuartermasterBlocked` for the next reason).
 *
 * The training operator, its controller stand-in Deployment (what `explain` reads to say whether the controller
 * runs: here the operator is a process, so the test keeps a Deployment `kubeflow/training-operator` whose status
 * says what the process does) and no-controller (which stops the operator) run last, alone.
 *
 * phantom-reservation: Kueue v0.19.2 keeps an evicted workload's quota until the job is no longer active, which for
 * a Kubeflow job is the operator's word (KubeflowJob.IsActive reads `status.replicaStatuses[].active`); the
 * operator v1.9.4 deletes a suspended job's pods and writes active 0 at once, terminating or not, so a pod kept by
 * a finalizer does not hold the reservation here. What holds it is an operator that does not report: a
 * ValidatingAdmissionPolicy refuses its writes of the job's status while the Workload is deactivated
 * (`spec.active: false`), as in kubernetes-sigs/kueue#14811 where no controller reconciled after the suspend. The
 * reconciler caches Kueue's Workloads and queues (src/run/blocked-kueue.ts): its Events name the same reasons.
 *
 * Not produced here, and why (docs/explain.md, "On the live stack"): `warned` (a warning never holds a job back: a
 * warned job whose pods run is `running`, so `warned` leads only for a job held by something `explain` cannot see,
 * and removing the warning would not start it; its evidence is also the PolicyReport of a reconciler pass);
 * `not-found`, `finished`, `pending` (no cause to remove). Skips, saying why, without the binaries.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runCli } from "../../src/cli/commands.js";
import type { Reason, Verdict } from "../../src/explain/types.js";
import type { ClusterNode } from "../fixtures/nodes.js";
import { startControlPlane, type ControlPlane } from "../e2e/harness/controlplane.js";
import { createQueues, type Flavor, installKueueCrds, KUEUE_API, kueueBin, QUEUE_LABEL, startKueue, workloadFor } from "../e2e/harness/kueue.js";
import { kwokBin, kwokNodes, resumeNodeLease, startKwok, stopNodeLease, type Controller } from "../e2e/harness/kwok.js";
import { installOperatorCrds, operatorBin, startOperator } from "../e2e/harness/operator.js";
import { JOB_CONTROLLER } from "../e2e/harness/trainer.js";
import { createNamespace, registerOwnWebhook, spawnCli, waitForPodWebhook, type CliRun, type WebhookProcess } from "../e2e/harness/webhook.js";

type Obj = Record<string, any>;
const kwok = kwokBin();
const kueue = kueueBin();
const OPERATOR = operatorBin();
const SKIP =
  "skip" in kwok ? kwok.skip : "skip" in kueue ? kueue.skip : !OPERATOR ? "QM_OPERATOR_BIN not set: the explain suite runs the real training operator" : false;

const GPU = "nvidia.com/gpu";
const PRODUCT = "nvidia.com/gpu.product";
const A100 = "A100-SXM4-80GB";
const H100 = "H100-SXM5-80GB";
const POOL = "qm.e2e/pool";
const DRIVER = "gpu.example.com";
const TAINT = { key: "dedicated", value: "research", effect: "NoSchedule" as const };
/** node-lifecycle-controller's grace before a node whose Lease stopped goes Ready=Unknown. */
const GRACE_S = 20;
const EVENT_MS = 30_000;
/** A ClusterQueue's quota: Quartermaster's webhook gives the pods cpu and memory requests, which Kueue counts too. */
const QUOTA = { [GPU]: 8, cpu: 64, memory: "512Gi" };
const POLICY = ["namespaces:", "  - pattern: ex-refused", `    limits: {allowedAccelerators: [${A100}]}`, ""].join("\n");

const node = (name: string, o: { pool: string; product?: string; gpus?: number; cpu?: number; taints?: Array<typeof TAINT> }): ClusterNode =>
  ({
    name,
    labels: {
      "kubernetes.io/hostname": name,
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "amd64",
      [PRODUCT]: o.product ?? A100,
      [POOL]: o.pool,
    },
    allocatable: o.gpus === 0 ? {} : { [GPU]: o.gpus ?? 8 },
    taints: o.taints ?? [],
    cpu: o.cpu ?? 64,
    memoryGi: 256,
    pods: 110,
  }) as unknown as ClusterNode;

const NODES: ClusterNode[] = [
  node("taint-1", { pool: "taint", taints: [TAINT] }),
  node("nomatch-1", { pool: "nomatch-spare" }),
  node("shape-1", { pool: "shape", product: H100 }),
  node("dra-1", { pool: "dra", gpus: 0 }),
  node("stale-1", { pool: "stale" }),
  node("gang-1", { pool: "gang", cpu: 8 }),
  node("dbl1-1", { pool: "dbl1" }),
  node("dbl2-1", { pool: "dbl2", taints: [TAINT] }),
  node("queued-1", { pool: "queued" }),
  node("inadm-1", { pool: "inadm" }),
  node("refused-a", { pool: "refused" }),
  node("refused-h", { pool: "refused", product: H100 }),
  node("ctlerr-1", { pool: "ctlerr" }),
  node("noctl-1", { pool: "noctl" }),
  node("phantom-1", { pool: "phantom" }),
];

interface Pod {
  pool: string;
  gpus?: number;
  cpu?: string;
  claim?: string;
  nodeName?: string;
  /** terminationGracePeriodSeconds (kwok removes a deleted pod at a random moment of it). */
  grace?: number;
}
/** A PyTorchJob: Master 1 and `workers` Workers (each template `pod`, the Master's `master` if given). */
function pytorchJob(name: string, o: { pod: Pod; master?: Pod; workers?: number; queue?: string }): Obj {
  const template = (p: Pod): Obj => ({
    spec: {
      nodeSelector: { [POOL]: p.pool },
      ...(p.nodeName ? { nodeName: p.nodeName } : {}),
      ...(p.grace !== undefined ? { terminationGracePeriodSeconds: p.grace } : {}),
      containers: [
        {
          name: "pytorch",
          image: "registry.invalid/train:1",
          resources: {
            ...(p.gpus ? { limits: { [GPU]: String(p.gpus) } } : {}),
            ...(p.cpu ? { requests: { cpu: p.cpu } } : {}),
            ...(p.claim ? { claims: [{ name: "gpus" }] } : {}),
          },
        },
      ],
      ...(p.claim ? { resourceClaims: [{ name: "gpus", resourceClaimTemplateName: p.claim }] } : {}),
    },
  });
  return {
    apiVersion: "kubeflow.org/v1",
    kind: "PyTorchJob",
    metadata: { name, ...(o.queue ? { labels: { [QUEUE_LABEL]: o.queue } } : {}) },
    spec: {
      pytorchReplicaSpecs: {
        Master: { replicas: 1, restartPolicy: "OnFailure", template: template(o.master ?? o.pod) },
        ...(o.workers ? { Worker: { replicas: o.workers, restartPolicy: "OnFailure", template: template(o.pod) } } : {}),
      },
    },
  };
}

interface Ctx {
  cp: ControlPlane;
  ns: string;
}
interface Scenario {
  name: string;
  ns: string;
  /** Creates the cause and the job (named `job`); returns when the cause holds (the Event's clock starts then). */
  setup(c: Ctx): Promise<void>;
  job: string;
  reason: Reason;
  also?: Reason;
  /** Patterns the verdict's summary, evidence and next step must match. */
  evidence: RegExp[];
  /** The Event expected within 30 s: its reason and message, or why none is expected from the caches. */
  event: { reason: "QuartermasterBlocked" | "KueueAdmissionRefused"; message: RegExp } | { none: string };
  remove(c: Ctx): Promise<void>;
  next: Reason;
  /** The Event after removal: `QuartermasterRunning`, a Blocked of the next reason, or none. */
  nextEvent?: { reason: string; message: RegExp };
  /** `explain` still names the reason this long after it first did (a state that lasts, not one passing by). */
  holdsMs?: number;
  /** When the cause began, if not when setup returned (ms since the epoch). */
  causeAt?: (c: Ctx) => Promise<number>;
  /** Runs after every other scenario, alone (it stops a controller they need). */
  last?: boolean;
}

const MERGE = { "content-type": "application/merge-patch+json" };
const JSON_PATCH = { "content-type": "application/json-patch+json" };
async function must(what: string, r: Promise<{ status: number; body: any }>, ok = [200, 201]): Promise<any> {
  const x = await r;
  assert.ok(ok.includes(x.status), `${what}: ${x.status} ${JSON.stringify(x.body)}`);
  return x.body;
}
const createJob = (c: Ctx, job: Obj): Promise<any> =>
  must(`PyTorchJob ${job.metadata.name}`, c.cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${c.ns}/pytorchjobs`, job));
const patchNode = (c: Ctx, name: string, body: Obj): Promise<any> => must(`node ${name}`, c.cp.api("PATCH", `/api/v1/nodes/${name}`, body, MERGE));
/**
 * A scenario's queues (`createQueues`, all Active): ClusterQueue `cq-<pool>` with {@link QUOTA} of one flavor,
 * LocalQueue `lq-<pool>` in the scenario's namespace; the flavor is ResourceFlavor `fl-<pool>` on the pool's nodes
 * unless `flavor` is given.
 */
const queueFor = (c: Ctx, pool: string, flavor: Flavor = { name: `fl-${pool}`, nodeLabels: { [POOL]: pool } }): Promise<void> =>
  createQueues(c.cp, { namespace: c.ns, flavors: [flavor], clusterQueue: `cq-${pool}`, localQueue: `lq-${pool}`, quota: () => QUOTA });

/** A ResourceSlice of `count` devices of {@link DRIVER} on `node`. */
const slice = (c: Ctx, nodeName: string, count: number): Promise<any> =>
  must(
    `ResourceSlice of ${nodeName}`,
    c.cp.api("POST", "/apis/resource.k8s.io/v1/resourceslices", {
      apiVersion: "resource.k8s.io/v1",
      kind: "ResourceSlice",
      metadata: { name: `${nodeName}-gpus` },
      spec: {
        driver: DRIVER,
        nodeName,
        pool: { name: nodeName, generation: 1, resourceSliceCount: 1 },
        devices: Array.from({ length: count }, (_, i) => ({ name: `gpu-${i}`, attributes: { productName: { string: "NVIDIA A100" } } })),
      },
    }),
  );

/** The training operator's stand-in Deployment: what `explain` reads of the controller, its status as the process is. */
async function operatorDeployment(cp: ControlPlane, ready: number): Promise<void> {
  const path = "/apis/apps/v1/namespaces/kubeflow/deployments";
  const labels = { app: "training-operator" };
  const got = await cp.api("GET", `${path}/training-operator`);
  if (got.status === 404)
    await must(
      "Deployment training-operator",
      cp.api("POST", path, {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "training-operator", labels },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: "training-operator", image: "kubeflow/training-operator:v1-5170a36" }] } },
        },
      }),
    );
  await must(
    "Deployment training-operator status",
    cp.api("PATCH", `${path}/training-operator/status`, { status: { replicas: 1, readyReplicas: ready, availableReplicas: ready, updatedReplicas: 1 } }, MERGE),
  );
}

/** A ValidatingAdmissionPolicy (and its binding) refusing every write of PyTorchJob status in `c.ns`. */
const STATUS_REFUSED = "qm-e2e-pytorchjob-status-refused";
const ADMISSION = "/apis/admissionregistration.k8s.io/v1";
async function refuseStatusWrites(c: Ctx, job: string): Promise<void> {
  await must(
    "ValidatingAdmissionPolicy",
    c.cp.api("POST", `${ADMISSION}/validatingadmissionpolicies`, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicy",
      metadata: { name: STATUS_REFUSED },
      spec: {
        failurePolicy: "Fail",
        matchConstraints: {
          namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": c.ns } },
          resourceRules: [{ apiGroups: ["kubeflow.org"], apiVersions: ["*"], operations: ["UPDATE"], resources: ["pytorchjobs/status"] }],
        },
        validations: [{ expression: "false", message: `${STATUS_REFUSED}: the job's status is not written` }],
      },
    }),
  );
  await must(
    "ValidatingAdmissionPolicyBinding",
    c.cp.api("POST", `${ADMISSION}/validatingadmissionpolicybindings`, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingAdmissionPolicyBinding",
      metadata: { name: STATUS_REFUSED },
      spec: { policyName: STATUS_REFUSED, validationActions: ["Deny"] },
    }),
  );
  // The apiserver loads policies asynchronously: in force once a dry-run write of the job's status is refused.
  await c.cp.until(
    "the status writes refused",
    async () => {
      const r = await c.cp.api(
        "PATCH",
        `/apis/kubeflow.org/v1/namespaces/${c.ns}/pytorchjobs/${job}/status?dryRun=All`,
        { status: { lastReconcileTime: new Date().toISOString() } },
        MERGE,
      );
      return r.status >= 400 && JSON.stringify(r.body).includes(STATUS_REFUSED);
    },
    30_000,
    250,
  );
}

let operator: Controller | undefined;
let opBin = "";

const SCENARIOS: Scenario[] = [
  {
    name: "a pod tolerating no taint of its nodes → untolerated-taint; untainted → running",
    ns: "ex-taint",
    job: "tainted",
    setup: (c) => createJob(c, pytorchJob("tainted", { pod: { pool: "taint", gpus: 4 } })),
    reason: "untolerated-taint",
    evidence: [/taint dedicated=research:NoSchedule/, /add a toleration for dedicated=research:NoSchedule/],
    event: { reason: "QuartermasterBlocked", message: /^untolerated-taint: / },
    remove: (c) => patchNode(c, "taint-1", { spec: { taints: null } }),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(untolerated-taint/ },
  },
  {
    name: "a nodeSelector no node matches → no-matching-node; a node labelled → running",
    ns: "ex-nomatch",
    job: "nomatch",
    setup: (c) => createJob(c, pytorchJob("nomatch", { pod: { pool: "nomatch", gpus: 2 } })),
    reason: "no-matching-node",
    evidence: [/requires qm\.e2e\/pool=nomatch; none of \d+ nodes matches/, /labels qm\.e2e\/pool: .*nomatch-spare \(1\)/],
    event: { reason: "QuartermasterBlocked", message: /^no-matching-node: / },
    remove: (c) => patchNode(c, "nomatch-1", { metadata: { labels: { [POOL]: "nomatch" } } }),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(no-matching-node/ },
  },
  {
    name: "16 GPUs a pod where the largest H100 node has 8 → no-gpu-shape; a 16-GPU node added → running",
    ns: "ex-shape",
    job: "big",
    setup: (c) => createJob(c, pytorchJob("big", { pod: { pool: "shape", gpus: 16 } })),
    reason: "no-gpu-shape",
    evidence: [
      /asks 16 nvidia\.com\/gpu per pod/,
      /Nodes \(H100-SXM5-80GB nvidia\.com\/gpu\): largest free block 8 on shape-1/,
      /ask at most \d+ nvidia\.com\/gpu per pod/,
    ],
    event: { reason: "QuartermasterBlocked", message: /^no-gpu-shape: .*asks 16 nvidia\.com\/gpu per pod/ },
    remove: async (c) => void (await kwokNodes(c.cp, [node("shape-2", { pool: "shape", product: H100, gpus: 16 })])),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(no-gpu-shape/ },
  },
  {
    name: "a ResourceClaim of 8 devices where the node's slice has 4 → dra-unsatisfiable; a node with 8 published → running",
    ns: "ex-dra",
    job: "dra",
    setup: async (c) => {
      await must(
        "ResourceClaimTemplate",
        c.cp.api("POST", `/apis/resource.k8s.io/v1/namespaces/${c.ns}/resourceclaimtemplates`, {
          apiVersion: "resource.k8s.io/v1",
          kind: "ResourceClaimTemplate",
          metadata: { name: "eight" },
          spec: { spec: { devices: { requests: [{ name: "gpu", exactly: { deviceClassName: DRIVER, count: 8 } }] } } },
        }),
      );
      await createJob(c, pytorchJob("dra", { pod: { pool: "dra", claim: "eight" } }));
    },
    reason: "dra-unsatisfiable",
    evidence: [/not allocated; requests gpu: 8 × gpu\.example\.com/, /ResourceSlices: \d+ slice\(s\) publish \d+ device\(s\) \(drivers gpu\.example\.com\)/],
    event: { reason: "QuartermasterBlocked", message: /^dra-unsatisfiable: / },
    remove: async (c) => {
      await kwokNodes(c.cp, [node("dra-2", { pool: "dra", gpus: 0 })]);
      await slice(c, "dra-2", 8);
    },
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(dra-unsatisfiable/ },
  },
  {
    name: "a pod bound to a node whose kubelet stopped → stale-node; the node back → running",
    ns: "ex-stale",
    job: "stale",
    setup: async (c) => {
      await stopNodeLease(c.cp, "stale-1");
      await c.cp.until(
        "stale-1 Ready=Unknown",
        async () =>
          ((await c.cp.api("GET", "/api/v1/nodes/stale-1")).body.status?.conditions ?? []).some((x: Obj) => x.type === "Ready" && x.status === "Unknown"),
        (GRACE_S + 40) * 1000,
        1000,
      );
      await createJob(c, pytorchJob("stale", { pod: { pool: "stale", gpus: 1, nodeName: "stale-1" } }));
    },
    reason: "stale-node",
    evidence: [/on node stale-1, which is stale: Ready is Unknown/, /drain node stale-1/],
    event: { reason: "QuartermasterBlocked", message: /^stale-node: / },
    remove: async (c) => void (await resumeNodeLease(c.cp, "stale-1")),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(stale-node/ },
  },
  {
    name: "1 of 2 pods placed, the other short of cpu → gang-partial; a second node → running",
    ns: "ex-gang",
    job: "gang",
    setup: (c) => createJob(c, pytorchJob("gang", { pod: { pool: "gang", gpus: 1, cpu: "6" }, workers: 1 })),
    reason: "gang-partial",
    // The gang is half placed from the moment its first pod runs.
    causeAt: async (c) => {
      const pods = (await c.cp.api("GET", `/api/v1/namespaces/${c.ns}/pods`)).body.items as Obj[];
      return Math.min(...pods.map((p) => Date.parse(p.status?.startTime ?? "")).filter((t) => Number.isFinite(t)));
    },
    evidence: [/2 pods expected, 1 running, 1 not running/, /the running pods hold 1 nvidia\.com\/gpu/],
    event: { reason: "QuartermasterBlocked", message: /^gang-partial: 1 of 2 pods running/ },
    remove: async (c) => void (await kwokNodes(c.cp, [node("gang-2", { pool: "gang", cpu: 8 })])),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(gang-partial/ },
  },
  {
    name: "two causes: 1 of 2 pods of 8 GPUs placed on the one 8-GPU node → no-gpu-shape first, gang-partial also; a node added → running",
    ns: "ex-dbl1",
    job: "dbl1",
    setup: (c) => createJob(c, pytorchJob("dbl1", { pod: { pool: "dbl1", gpus: 8 }, workers: 1 })),
    reason: "no-gpu-shape",
    also: "gang-partial",
    evidence: [/asks 8 nvidia\.com\/gpu per pod/, /Insufficient nvidia\.com\/gpu/],
    event: { reason: "QuartermasterBlocked", message: /^no-gpu-shape: / },
    remove: async (c) => void (await kwokNodes(c.cp, [node("dbl1-2", { pool: "dbl1" })])),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(no-gpu-shape/ },
  },
  {
    name: "two causes: Workers on a tainted node, Master's selector matching none → untolerated-taint first, no-matching-node also; untainted → no-matching-node",
    ns: "ex-dbl2",
    job: "dbl2",
    setup: (c) => createJob(c, pytorchJob("dbl2", { pod: { pool: "dbl2", gpus: 1 }, master: { pool: "dbl2-master", gpus: 1 }, workers: 1 })),
    reason: "untolerated-taint",
    also: "no-matching-node",
    evidence: [/taint dedicated=research:NoSchedule/],
    event: { reason: "QuartermasterBlocked", message: /^untolerated-taint: / },
    remove: (c) => patchNode(c, "dbl2-1", { spec: { taints: null } }),
    next: "no-matching-node",
    // At most one Event a job a minute: the next reason's Warning comes a minute after the first.
    nextEvent: { reason: "QuartermasterBlocked", message: /^no-matching-node: / },
  },
  {
    name: "waiting behind a job holding its ClusterQueue's 8 GPUs → queued; the other job deleted → running",
    ns: "ex-queued",
    job: "second",
    setup: async (c) => {
      await queueFor(c, "queued");
      await createJob(c, pytorchJob("first", { pod: { pool: "queued", gpus: 8 }, queue: "lq-queued" }));
      await c.cp.until("first admitted", async () => (await workloadFor(c.cp, c.ns, "PyTorchJob", "first"))?.status?.admission !== undefined, 60_000, 500);
      await createJob(c, pytorchJob("second", { pod: { pool: "queued", gpus: 8 }, queue: "lq-queued" }));
    },
    reason: "queued",
    evidence: [/waiting in LocalQueue lq-queued \(ClusterQueue cq-queued\)/, /flavor fl-queued: nvidia\.com\/gpu nominal 8, reserved 8/],
    event: { reason: "QuartermasterBlocked", message: /^queued: waiting in LocalQueue lq-queued \(ClusterQueue cq-queued\) for quota/ },
    remove: (c) => must("delete first", c.cp.api("DELETE", `/apis/kubeflow.org/v1/namespaces/${c.ns}/pytorchjobs/first`)),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(queued/ },
  },
  {
    name: "a LocalQueue that does not exist → inadmissible; created → running",
    ns: "ex-inadm",
    job: "inadm",
    setup: async (c) => {
      await createJob(c, pytorchJob("inadm", { pod: { pool: "inadm", gpus: 2 }, queue: "lq-inadm" }));
    },
    reason: "inadmissible",
    evidence: [/LocalQueue ex-inadm\/lq-inadm: not found/, /create LocalQueue lq-inadm in ex-inadm/],
    event: { reason: "QuartermasterBlocked", message: /^inadmissible: LocalQueue ex-inadm\/lq-inadm does not exist/ },
    remove: (c) => queueFor(c, "inadm"),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(inadmissible/ },
  },
  {
    name: "Kueue admits into an H100 flavor the namespace's policy does not allow → refused; the queue moved to A100 → running",
    ns: "ex-refused",
    job: "refused",
    setup: async (c) => {
      await must(
        "ResourceFlavor fl-a100r",
        c.cp.api("POST", `${KUEUE_API}/resourceflavors`, {
          apiVersion: "kueue.x-k8s.io/v1beta2",
          kind: "ResourceFlavor",
          metadata: { name: "fl-a100r" },
          spec: { nodeLabels: { [PRODUCT]: A100, [POOL]: "refused" } },
        }),
      );
      await queueFor(c, "refused", { name: "fl-h100r", nodeLabels: { [PRODUCT]: H100, [POOL]: "refused" } });
      await createJob(c, pytorchJob("refused", { pod: { pool: "refused", gpus: 1 }, queue: "lq-refused" }));
    },
    reason: "refused",
    evidence: [/KueueAdmissionRefused \(quartermaster-webhook/, /nvidia\.com\/gpu\.product=H100-SXM5-80GB/],
    event: { reason: "KueueAdmissionRefused", message: /Quartermaster refused Kueue's admission of the job/ },
    remove: async (c) => {
      // A JSON patch, not GET and PUT: Kueue's controller writes the ClusterQueue too (a PUT of what was read lost
      // that race once, 409 Conflict, in CI).
      const flavor = [{ op: "replace", path: "/spec/resourceGroups/0/flavors/0/name", value: "fl-a100r" }];
      await must("cq-refused to fl-a100r", c.cp.api("PATCH", `${KUEUE_API}/clusterqueues/cq-refused`, flavor, JSON_PATCH));
      // Kueue keeps an admitted Workload's flavor: deleted, it is made again and admitted into the flavor now given.
      const wl = await workloadFor(c.cp, c.ns, "PyTorchJob", "refused");
      if (wl) await must("delete the Workload", c.cp.api("DELETE", `${KUEUE_API}/namespaces/${c.ns}/workloads/${wl.metadata.name}`), [200, 202, 404]);
    },
    next: "running",
    // No QuartermasterRunning: the reconciler (which says `queued` of a suspended job) may not have spoken before the
    // cause is removed; the Event of this reason is the webhook's.
  },
  {
    name: "deactivated in Kueue while the operator's status writes are refused → phantom-reservation (evicted, quota still reserved, no pods); the writes allowed and the Workload active again → running",
    ns: "ex-phantom",
    job: "phantom",
    // Kueue v0.19.2 releases an evicted workload's quota once the job is no longer active, and for a Kubeflow job
    // that is the operator's word: KubeflowJob.IsActive reads status.replicaStatuses[].active. The operator deletes
    // the pods of the job Kueue suspends, but cannot write that none is active (a stand-in for an operator that
    // stops reporting, as in kubernetes-sigs/kueue#14811): the reservation stays, with no pods.
    setup: async (c) => {
      await queueFor(c, "phantom");
      await createJob(c, pytorchJob("phantom", { pod: { pool: "phantom", gpus: 2, grace: 5 }, queue: "lq-phantom" }));
      await c.cp.until(
        "the operator's status: Master active",
        async () => (await c.cp.api("GET", `/apis/kubeflow.org/v1/namespaces/${c.ns}/pytorchjobs/phantom`)).body.status?.replicaStatuses?.Master?.active === 1,
        60_000,
        500,
      );
      await refuseStatusWrites(c, "phantom");
      const wl = await workloadFor(c.cp, c.ns, "PyTorchJob", "phantom");
      assert.ok(wl, "phantom's Workload");
      await must(
        "deactivate the Workload",
        c.cp.api("PATCH", `${KUEUE_API}/namespaces/${c.ns}/workloads/${wl.metadata.name}`, { spec: { active: false } }, MERGE),
      );
    },
    reason: "phantom-reservation",
    evidence: [
      /2 nvidia\.com\/gpu in flavor fl-phantom.* reserved in ClusterQueue cq-phantom for (\d+m)?\d+s, and the job has no pods/,
      /^quota still reserved \d+s after Kueue evicted the workload \(Deactivated\), with no pods/,
      /Evicted=True \(Deactivated\)/,
      /spec\.suspend is true/,
    ],
    holdsMs: 15_000,
    event: { reason: "QuartermasterBlocked", message: /^phantom-reservation: quota still reserved/ },
    remove: async (c) => {
      await must("delete the binding", c.cp.api("DELETE", `${ADMISSION}/validatingadmissionpolicybindings/${STATUS_REFUSED}`));
      await must("delete the policy", c.cp.api("DELETE", `${ADMISSION}/validatingadmissionpolicies/${STATUS_REFUSED}`));
      const wl = await workloadFor(c.cp, c.ns, "PyTorchJob", "phantom");
      assert.ok(wl, "phantom's Workload");
      await must(
        "activate the Workload",
        c.cp.api("PATCH", `${KUEUE_API}/namespaces/${c.ns}/workloads/${wl.metadata.name}`, { spec: { active: true } }, MERGE),
      );
    },
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(phantom-reservation/ },
  },
  {
    name: "pods refused by a ResourceQuota → controller-error (FailedCreate); the quota deleted → running",
    ns: "ex-ctlerr",
    job: "ctlerr",
    setup: async (c) => {
      await must(
        "ResourceQuota",
        c.cp.api("POST", `/api/v1/namespaces/${c.ns}/resourcequotas`, {
          apiVersion: "v1",
          kind: "ResourceQuota",
          metadata: { name: "no-pods" },
          spec: { hard: { pods: "0" } },
        }),
      );
      await c.cp.until(
        "the ResourceQuota counted",
        async () => (await c.cp.api("GET", `/api/v1/namespaces/${c.ns}/resourcequotas/no-pods`)).body.status?.hard?.pods === "0",
        30_000,
        250,
      );
      await createJob(c, pytorchJob("ctlerr", { pod: { pool: "ctlerr", gpus: 1 } }));
    },
    reason: "controller-error",
    evidence: [/Event FailedCreate\w* \(/, /exceeded quota|forbidden/],
    // The operator writes no error condition for a pod it could not create: the reconciler reads the job's Events
    // (src/run/blocked-follow-up.ts).
    event: { reason: "QuartermasterBlocked", message: /^controller-error: PyTorchJob's controller reports an error: FailedCreate/ },
    remove: (c) => must("delete ResourceQuota", c.cp.api("DELETE", `/api/v1/namespaces/${c.ns}/resourcequotas/no-pods`)),
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(controller-error/ },
  },
  {
    name: "the training operator stopped → no-controller (its Deployment 0 of 1 ready); started again → running",
    ns: "ex-noctl",
    job: "noctl",
    last: true,
    setup: async (c) => {
      await operator?.stop();
      operator = undefined;
      await operatorDeployment(c.cp, 0);
      await createJob(c, pytorchJob("noctl", { pod: { pool: "noctl", gpus: 1 } }));
    },
    reason: "no-controller",
    evidence: [/controller training-operator: Deployment kubeflow\/training-operator: 0 of 1 ready/, /install or restart training-operator/],
    // The reconciler reads the controller's Deployment for a job with no pods (src/run/blocked-follow-up.ts).
    event: { reason: "QuartermasterBlocked", message: /^no-controller: / },
    remove: async (c) => {
      operator = await startOperator(c.cp, opBin);
      await operatorDeployment(c.cp, 1);
    },
    next: "running",
    nextEvent: { reason: "QuartermasterRunning", message: /blocked before \(no-controller/ },
  },
];

describe("explain on the live stack: every reason, its evidence, its Event, and the next reason once the cause is gone", { skip: SKIP }, () => {
  let cp: ControlPlane;
  const ctl: Controller[] = [];
  let wh: WebhookProcess | undefined;
  let reconciler: CliRun | undefined;
  let policyFile = "";
  const started = performance.now();
  const timings: string[] = [];

  before(async () => {
    if (SKIP || "skip" in kwok || "skip" in kueue) return;
    opBin = OPERATOR!;
    cp = await startControlPlane({
      scheduler: true,
      controllers: [JOB_CONTROLLER, "resourceclaim-controller", "node-lifecycle-controller", "resourcequota-controller"],
      controllerManagerArgs: [`--node-monitor-grace-period=${GRACE_S}s`, "--node-monitor-period=2s"],
    });
    ctl.push(await startKwok(cp, kwok.bin));
    await kwokNodes(cp, NODES);
    await must(
      "DeviceClass",
      cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
        apiVersion: "resource.k8s.io/v1",
        kind: "DeviceClass",
        metadata: { name: DRIVER },
        spec: { selectors: [{ cel: { expression: `device.driver == '${DRIVER}'` } }] },
      }),
    );
    await slice({ cp, ns: "" }, "dra-1", 4);
    await installOperatorCrds(cp);
    operator = await startOperator(cp, opBin);
    await operatorDeployment(cp, 1);
    await installKueueCrds(cp);
    ctl.push(await startKueue(cp, kueue.bin));
    for (const s of SCENARIOS) await createNamespace(cp, s.ns, { "quartermaster.dev/enabled": "true" });
    wh = await registerOwnWebhook(cp, POLICY);
    await waitForPodWebhook(cp, wh, SCENARIOS[0]!.ns);
    policyFile = join(cp.dir, "policy.yaml");
    writeFileSync(policyFile, POLICY);
    const sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    reconciler = spawnCli([
      "reconcile",
      "--watch",
      "--kubeconfig",
      sa.kubeconfig,
      "--policy",
      policyFile,
      "--namespace",
      "quartermaster",
      "--metrics-port",
      "0",
      // Each job's change of verdict is logged (src/run/blocked.ts): what a missing Event's failure quotes.
      "--log-level",
      "debug",
    ]);
    await cp.until("the reconciler to lead", () => /took the lease/.test(reconciler!.stdout + reconciler!.stderr), 60_000, 250);
    console.log(`explain-stack: stack up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });
  after(async () => {
    reconciler?.child.kill("SIGTERM");
    await reconciler?.done;
    await wh?.stop();
    await operator?.stop();
    for (const c of ctl.reverse()) await c.stop();
    await cp?.stop();
    for (const t of timings) console.log(`explain-stack: ${t}`);
    console.log(`explain-stack: suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  /** `quartermaster explain <job> -n <ns> -o json`, through the CLI's entry, against the apiserver. */
  const explain = async (ns: string, job: string): Promise<Verdict> => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(["explain", `pytorchjob/${job}`, "-n", ns, "-o", "json", "--kubeconfig", cp.kubeconfig, "--policy", policyFile], {
      stdout: (l) => out.push(l),
      stderr: (l) => err.push(l),
      cwd: process.cwd(),
      shutdown: new Promise<string>(() => undefined),
    });
    assert.ok(code === 0 || code === 1, `explain exit ${code}: ${err.join("\n")}`);
    return JSON.parse(out.join("\n")) as Verdict;
  };
  const text = (v: Verdict): string => [v.summary, ...v.evidence.map((e) => `${e.object}: ${e.text}`), v.next].join("\n");
  // Until the reason and, where given, every piece of evidence: Kueue writes a ClusterQueue's reservation into its
  // status a moment after the Workload's admission, so the numbers may lag the reason on a busy machine.
  const waitVerdict = async (ns: string, job: string, reason: Reason, ms: number, also?: Reason, evidence: RegExp[] = []): Promise<Verdict> => {
    let v: Verdict | undefined;
    try {
      await cp.until(
        `${ns}/${job}: explain says ${reason}${also ? `, ${also} also` : ""}${evidence.length > 0 ? `, with ${evidence.join(", ")}` : ""}`,
        async () =>
          (v = await explain(ns, job)).reason === reason && (!also || v.also.some((f) => f.reason === also)) && evidence.every((re) => re.test(text(v!))),
        ms,
        1500,
      );
    } catch (e) {
      throw new Error(`${(e as Error).message.split("\n")[0]}; last verdict: ${v ? `${v.reason}: ${text(v)}` : "none"}`);
    }
    return v!;
  };
  const events = async (ns: string, job: string): Promise<Obj[]> =>
    ((await cp.api("GET", `/api/v1/namespaces/${ns}/events?fieldSelector=${encodeURIComponent(`involvedObject.name=${job}`)}`)).body.items ?? []) as Obj[];
  const waitEvent = async (ns: string, job: string, e: { reason: string; message: RegExp }, ms: number, after = 0): Promise<Obj> => {
    let found: Obj | undefined;
    try {
      await cp.until(
        `${ns}/${job}: Event ${e.reason} ${e.message}`,
        async () =>
          !!(found = (await events(ns, job)).find(
            (x) =>
              x.reason === e.reason && e.message.test(x.message) && Date.parse(x.lastTimestamp ?? x.eventTime ?? x.metadata.creationTimestamp) >= after - 1000,
          )),
        ms,
        500,
      );
    } catch (err) {
      // What the reconciler said of the job by then (its verdict changes are logged at debug), and the Events there.
      const lines = (reconciler?.stdout ?? "").split("\n").filter((l) => l.includes(` ${ns}/`));
      const seen = (await events(ns, job)).map((x) => `${x.reason}: ${String(x.message).slice(0, 160)}`);
      throw new Error(`${(err as Error).message.split("\n")[0]}\nthe reconciler on it:\n${lines.slice(-12).join("\n")}\nits Events:\n${seen.join("\n")}`);
    }
    return found!;
  };

  const run = async (s: Scenario): Promise<void> => {
    const c: Ctx = { cp, ns: s.ns };
    await s.setup(c);
    let caused = Date.now();
    const v = await waitVerdict(s.ns, s.job, s.reason, 60_000, s.also, s.evidence);
    const named = Date.now();
    if (s.causeAt) caused = await s.causeAt(c);
    const all = text(v);
    for (const re of s.evidence) assert.match(all, re, `${s.ns}/${s.job} evidence`);
    if (s.also)
      assert.ok(
        v.also.some((f) => f.reason === s.also),
        `also ${s.also}: ${v.also.map((f) => f.reason).join(", ")}`,
      );
    if ("none" in s.event) timings.push(`${s.reason}: explain in ${named - caused} ms; no Event expected (${s.event.none})`);
    else {
      const e = await waitEvent(s.ns, s.job, s.event, EVENT_MS + 5_000);
      const ms = Date.parse(e.lastTimestamp ?? e.metadata.creationTimestamp) - caused;
      timings.push(`${s.reason}: explain in ${named - caused} ms; Event ${e.reason} ${ms} ms after the cause: ${String(e.message).slice(0, 100)}`);
      assert.ok(ms <= EVENT_MS, `${s.ns}/${s.job}: the Event came ${ms} ms after the cause`);
    }
    if (s.holdsMs) {
      await new Promise((r) => setTimeout(r, Math.max(0, named + s.holdsMs! - Date.now())));
      const still = await explain(s.ns, s.job);
      assert.equal(still.reason, s.reason, `${s.ns}/${s.job}: ${s.holdsMs} ms after, explain says ${still.reason}: ${text(still)}`);
      timings.push(`${s.reason}: still held ${Date.now() - named} ms after explain first named it: ${still.summary}`);
    }
    const removed = Date.now();
    await s.remove(c);
    const after = await waitVerdict(s.ns, s.job, s.next, 120_000);
    assert.ok(!after.also.some((f) => f.reason === s.reason) || s.reason === s.next, `${s.reason} no longer holds`);
    if (s.nextEvent) {
      const e = await waitEvent(s.ns, s.job, s.nextEvent, 90_000, removed);
      timings.push(`${s.reason} → ${s.next}: Event ${e.reason} ${Date.parse(e.lastTimestamp ?? e.metadata.creationTimestamp) - removed} ms after removal`);
    } else timings.push(`${s.reason} → ${s.next}: explain in ${Date.now() - removed} ms`);
  };

  describe("scenarios at once, each in its namespace", { concurrency: true }, () => {
    for (const s of SCENARIOS.filter((x) => !x.last)) it(s.name, { timeout: 360_000 }, () => run(s));
  });
  describe("last, alone", () => {
    for (const s of SCENARIOS.filter((x) => x.last)) it(s.name, { timeout: 360_000 }, () => run(s));
  });

  it("covers every reason with a cause the issue names, and two scenarios of two causes", () => {
    const covered = new Set(SCENARIOS.map((s) => s.reason));
    const notProduced = ["not-found", "finished", "pending", "warned", "running"];
    const causes = [
      "refused",
      "inadmissible",
      "queued",
      "no-controller",
      "controller-error",
      "phantom-reservation",
      "stale-node",
      "untolerated-taint",
      "no-matching-node",
      "no-gpu-shape",
      "dra-unsatisfiable",
      "gang-partial",
    ];
    assert.deepEqual(
      causes.filter((r) => !covered.has(r as Reason)),
      [],
    );
    assert.equal(SCENARIOS.filter((s) => s.also).length, 2);
    assert.ok(notProduced.every((r) => !covered.has(r as Reason)));
  });
});
