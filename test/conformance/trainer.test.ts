/**
 * Kubeflow Trainer v2 with the real controllers (issue 32): the Trainer v2 controller manager v2.3.0
 * (QM_TRAINER_BIN, `test/e2e/trainer/build.sh`), JobSet v0.12.0 (QM_JOBSET_BIN, `test/e2e/jobset/build.sh`)
 * and, for the v1 twins, the training operator v1.9.4 (QM_OPERATOR_BIN, `test/e2e/operator/build.sh`), their
 * webhooks served (the operator's not registered, as in conformance.test.ts), their CRDs and the upstream
 * default runtimes installed, on the e2e control plane with kube-controller-manager's job-controller (JobSet's
 * Jobs get their pods from it; no kubelet: the pods stay Pending unless a test writes their status).
 * Quartermaster's webhooks are registered from its manifests (served by a local process as its
 * ServiceAccount, as in coexistence.test.ts) and the namespaces are opted in.
 *
 * 1. Outfitting ({@link CASES}). Each entry is a TrainJob; the test shows its JobSet (named like it), Jobs and
 *    pods appear, every pod carries the JobSet labels Quartermaster finds them by (`jobset-name`,
 *    `replicatedjob-name`, `job-completion-index`), has been through Quartermaster's pod webhook, and has the
 *    PET_* env the runtime gave it. Each case also has a v1 twin: a PyTorchJob of as many pods (Master 1,
 *    Worker numNodes − 1) whose `pytorch` container has the same resources and whose pod template the same
 *    annotations, run by the real v1 operator in the same namespace. The TrainJob pod of completion index i
 *    and the twin pod of rank i (Master 0 is rank 0, Worker k rank k + 1) must be "outfitted alike":
 *    equal in what Quartermaster's pod webhook decides, {@link outfit}:
 *    - the `quartermaster.dev/mutations` annotation (which mutations changed the pod, in pipeline order: a
 *      `training-labels` on one side only would show Quartermaster adding Kubeflow labels to one kind only)
 *      and every other `quartermaster.dev/*` annotation;
 *    - `spec.tolerations` (as a set), `spec.affinity`, `spec.nodeSelector`;
 *    - the training container's `resources` (TrainJob: `node`; PyTorchJob: `pytorch`), i.e. the resource
 *      defaults and GPU request == limit.
 *    Left aside, being each controller's and not Quartermaster's: names, hostnames and subdomains; env (the
 *    distributed env is each controller's own: PET_* from Trainer, MASTER_ and PET_ from the operator, which
 *    conformance.test.ts holds Quartermaster's cluster-spec to); labels (the operator's
 *    `training.kubeflow.org/*`, JobSet's and the Job controller's; whether Quartermaster added Kubeflow labels
 *    is in the mutations annotation); annotations not `quartermaster.dev/*` (JobSet's and the Job
 *    controller's); ownerReferences, restartPolicy, container names, images, commands and ports; and init
 *    containers (the operator adds its own `init-pytorch` to PyTorch workers; the runtime has none).
 *    Found here: a TrainJob asking for a bare `gpu` (which `/mutate/pods` renames on the twin's pods) got no
 *    pod at all, its JobSet's Jobs refused by the apiserver; `/mutate/jobs` now renames it in the TrainJob
 *    (`src/mutate/trainjob-resources.ts`), and the `torch-bare-gpu` case holds it.
 * 2. Caps ({@link CAP_CASES}), in a namespace whose policy entry caps a job at 8 GPUs: a TrainJob over the cap
 *    is refused at CREATE by Quartermaster's job webhook (403, message naming the field path and the count),
 *    the same shape under it is admitted (dry-run: the job webhook's admission line says allowed); one runtime
 *    supplies the GPUs the TrainJob leaves out.
 * 3. TTL ({@link TTL_CASES}): TrainJobs driven to Complete for real (each pod's status written Succeeded, exit
 *    0, so the job-controller completes the Jobs, JobSet the JobSet and Trainer the TrainJob), then one
 *    `quartermaster reconcile --once` as the reconciler's ServiceAccount: a dry run plans exactly the TTL'd
 *    finished ones (with their uids, the delete precondition), the pass deletes them and keeps the others.
 *
 * Skips, saying why, when QM_TRAINER_BIN, QM_JOBSET_BIN or QM_OPERATOR_BIN is unset: a fresh clone's
 * `npm test` never needs them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { ControlPlane } from "../e2e/harness/controlplane.js";
import { operatorBin, type Operator } from "../e2e/harness/operator.js";
import { trainerBins, type Controller } from "../e2e/harness/trainer.js";
import { startTrainerStack, type TrainerStack } from "../e2e/harness/trainer-stack.js";
import { cli, type WebhookProcess } from "../e2e/harness/webhook.js";
import { list, sleep, type Obj } from "./operator-jobs.js";

const bins = trainerBins();
const operator = "skip" in bins ? undefined : operatorBin();
const SKIP =
  "skip" in bins
    ? bins.skip
    : operator
      ? false
      : "QM_OPERATOR_BIN not set: the TrainJob pods' v1 twins need the real training operator (export QM_OPERATOR_BIN=$(bash test/e2e/operator/build.sh)/training-operator)";
const NS = "trainer-conformance";
/** Its policy entry caps a job at 8 GPUs. */
const CAPPED = "trainer-capped";
/** Finished and running TrainJobs for the reconciler; its policy entry has no job defaults. */
const TTL_NS = "trainer-ttl";
/** Its policy entry's jobDefaults give every new job a TTL of 0. */
const TTL_DEFAULT_NS = "trainer-ttl-default";
const JOB_GPU_CAP = 8;
const SPOT = { key: "example.com/spot", operator: "In", values: ["true"] };
const POLICY = [
  "limits:",
  "  container:",
  "    gpus: {nvidia.com/gpu: 8}",
  "interruptible:",
  "  tolerations: [{key: example.com/spot, operator: Exists, effect: NoSchedule}]",
  `  nodeRequirement: ${JSON.stringify(SPOT)}`,
  "accelerator:",
  "  nodeLabel: nvidia.com/gpu.product",
  "namespaces:",
  `  - pattern: ${CAPPED}`,
  `    limits: {job: {gpus: ${JOB_GPU_CAP}}}`,
  `  - pattern: ${TTL_DEFAULT_NS}`,
  "    jobDefaults: {ttlSecondsAfterFinished: 0}",
  "",
].join("\n");
const JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name";
const COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index";
const MUTATIONS = "quartermaster.dev/mutations";
const TTL_ANNOTATION = "quartermaster.dev/ttl-seconds-after-finished";
const TRAINJOBS = (ns: string): string => `/apis/trainer.kubeflow.org/v1alpha1/namespaces/${ns}/trainjobs`;

/** What a case's pods are held to beyond what every TrainJob pod is. */
interface Expect {
  /** Pods in all (numNodes for a single-step runtime). */
  pods: number;
  /** The replicated job of the JobSet that runs the training nodes. */
  replicatedJob: string;
  /** The container the runtime puts the training in. */
  container: string;
  /** Env the runtime must have given that container (a string: the value; a function: checks the var on pod `index`). */
  env: Record<string, string | ((v: Obj, index: number, trainJob: string) => void)>;
  /** Quartermaster's mutations the pod must carry (names in `quartermaster.dev/mutations`). */
  mutations: string[];
  /** GPUs per pod the container asks for (0: none, and no GPU toleration). */
  gpus: number;
}

interface Case {
  title: string;
  name: string;
  /** The TrainJob's spec. */
  spec: Obj;
  expect: Expect;
  /** Annotations on the pods (TrainJob: through a runtime patch of the `node` Job; twin: its pod templates). */
  podAnnotations?: Record<string, string>;
}

/** PET_* as Trainer's torch plugin writes them; `nproc` "auto", or the cpu limit of a node without GPUs. */
const torchEnv = (nodes: number, nproc = "auto"): Expect["env"] => ({
  PET_NNODES: String(nodes),
  PET_NPROC_PER_NODE: nproc,
  PET_MASTER_PORT: "29500",
  PET_MASTER_ADDR: (v, _i, job) => assert.equal(v.value, `${job}-node-0-0.${job}`),
  PET_NODE_RANK: (v) => assert.equal(v.valueFrom?.fieldRef?.fieldPath, `metadata.annotations['${COMPLETION_INDEX}']`),
});

/** A torch-distributed TrainJob case of `nodes` × `resources`, pods annotated `podAnnotations`. */
function torchCase(
  title: string,
  name: string,
  nodes: number,
  resources: Obj | undefined,
  expect: Pick<Expect, "mutations" | "gpus">,
  podAnnotations?: Record<string, string>,
  nproc?: string,
): Case {
  const spec: Obj = { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: nodes, ...(resources ? { resourcesPerNode: resources } : {}) } };
  if (podAnnotations) {
    spec.runtimePatches = [
      {
        manager: "qm-conformance.example.com/user",
        trainingRuntimeSpec: {
          template: { spec: { replicatedJobs: [{ name: "node", template: { spec: { template: { metadata: { annotations: podAnnotations } } } } }] } },
        },
      },
    ];
  }
  return { title, name, spec, podAnnotations, expect: { pods: nodes, replicatedJob: "node", container: "node", env: torchEnv(nodes, nproc), ...expect } };
}

const gpus = (n: number): Obj => ({ limits: { "nvidia.com/gpu": String(n) } });

export const CASES: Case[] = [
  torchCase("torch-distributed, 1 node × 1 GPU", "torch-1x1", 1, gpus(1), { mutations: ["gpu-tolerations"], gpus: 1 }),
  torchCase("torch-distributed, 2 nodes × 2 GPUs", "torch-2x2", 2, gpus(2), { mutations: ["gpu-tolerations"], gpus: 2 }),
  torchCase("torch-distributed, 4 nodes × 8 GPUs", "torch-4x8", 4, gpus(8), { mutations: ["gpu-tolerations"], gpus: 8 }),
  torchCase(
    "torch-distributed, 2 nodes, CPU only (a cpu limit, no memory)",
    "torch-cpu",
    2,
    { limits: { cpu: "2" } },
    { mutations: ["resources"], gpus: 0 },
    undefined,
    "2",
  ),
  torchCase(
    "torch-distributed, 1 node × 1 GPU asked for as bare `gpu`",
    "torch-bare-gpu",
    1,
    { limits: { gpu: "1" } },
    { mutations: ["resources", "gpu-tolerations"], gpus: 1 },
  ),
  torchCase(
    "torch-distributed, 2 nodes × 1 GPU, interruptible on an A100",
    "torch-spot",
    2,
    gpus(1),
    { mutations: ["gpu-tolerations", "accelerator", "interruptible"], gpus: 1 },
    { "quartermaster.dev/interruptible": "true", "quartermaster.dev/accelerator": "A100" },
  ),
];

/** The v1 twin of a case: a PyTorchJob of as many pods (Master 1, Worker the rest), the same resources and pod annotations. */
function twinOf(c: Case): Obj {
  const resources = (c.spec.trainer as Obj).resourcesPerNode as Obj | undefined;
  const template = (): Obj => ({
    ...(c.podAnnotations ? { metadata: { annotations: c.podAnnotations } } : {}),
    spec: { containers: [{ name: "pytorch", image: "registry.invalid/train:1", ...(resources ? { resources } : {}) }] },
  });
  const specs: Obj = { Master: { replicas: 1, restartPolicy: "Never", template: template() } };
  if (c.expect.pods > 1) specs.Worker = { replicas: c.expect.pods - 1, restartPolicy: "Never", template: template() };
  return { apiVersion: "kubeflow.org/v1", kind: "PyTorchJob", metadata: { name: `${c.name}-v1`, namespace: NS }, spec: { pytorchReplicaSpecs: specs } };
}

/** A twin pod's rank: Master 0, Worker k: k + 1. */
function twinRank(pod: Obj): number {
  const labels = pod.metadata.labels as Record<string, string>;
  const index = Number(labels["training.kubeflow.org/replica-index"]);
  return labels["training.kubeflow.org/replica-type"] === "master" ? index : index + 1;
}

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Obj).sort(([a], [b]) => a.localeCompare(b))) : x,
  );

/** What Quartermaster's pod webhook decides about a pod (see the header: what "outfitted alike" compares). */
export function outfit(pod: Obj, container: string): Obj {
  const annotations = (pod.metadata.annotations ?? {}) as Record<string, string>;
  const c = ((pod.spec.containers ?? []) as Obj[]).find((x) => x.name === container);
  return {
    mutations: annotations[MUTATIONS] ?? "(none)",
    quartermasterAnnotations: Object.fromEntries(Object.entries(annotations).filter(([k]) => k.startsWith("quartermaster.dev/") && k !== MUTATIONS)),
    tolerations: ((pod.spec.tolerations ?? []) as Obj[]).map(canonical).sort(),
    affinity: pod.spec.affinity ?? null,
    nodeSelector: pod.spec.nodeSelector ?? {},
    resources: c?.resources ?? `(no container ${container})`,
  };
}

/** A GPU cap case: a TrainJob created in {@link CAPPED}. */
interface CapCase {
  title: string;
  name: string;
  spec: Obj;
  /** Refused: the field path and the GPU count the message must name; undefined: admitted. */
  refused?: { field: string; gpus: number };
}

/** A ClusterTrainingRuntime like torch-distributed whose `node` container asks for 4 GPUs itself. */
const RUNTIME_WITH_GPUS = "qm-torch-4-gpus";

export const CAP_CASES: CapCase[] = [
  {
    title: "4 nodes × 4 GPUs (16) over the cap of 8: refused",
    name: "cap-4x4",
    spec: { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: 4, resourcesPerNode: gpus(4) } },
    refused: { field: "spec.trainer.numNodes", gpus: 16 },
  },
  {
    title: "2 nodes × 4 GPUs (8) at the cap: admitted",
    name: "cap-2x4",
    spec: { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: 2, resourcesPerNode: gpus(4) } },
  },
  {
    title: "4 nodes, the runtime's 4 GPUs per node (16): refused",
    name: "cap-runtime-4",
    spec: { runtimeRef: { name: RUNTIME_WITH_GPUS }, trainer: { numNodes: 4 } },
    refused: { field: "spec.trainer.numNodes", gpus: 16 },
  },
  {
    title: "2 nodes, the runtime's 4 GPUs per node (8): admitted",
    name: "cap-runtime-2",
    spec: { runtimeRef: { name: RUNTIME_WITH_GPUS }, trainer: { numNodes: 2 } },
  },
];

/** A TTL case: a one-node CPU TrainJob; `finish` drives it to Complete; `deleted` what one reconcile pass must do. */
interface TtlCase {
  title: string;
  name: string;
  namespace: string;
  annotations?: Record<string, string>;
  finish: boolean;
  deleted: boolean;
}

export const TTL_CASES: TtlCase[] = [
  {
    title: "finished, TTL annotation 0 set by its user: deleted",
    name: "ttl-zero",
    namespace: TTL_NS,
    annotations: { [TTL_ANNOTATION]: "0" },
    finish: true,
    deleted: true,
  },
  {
    title: "finished, TTL 0 from the namespace's jobDefaults (/mutate/jobs): deleted",
    name: "ttl-default",
    namespace: TTL_DEFAULT_NS,
    finish: true,
    deleted: true,
  },
  { title: "finished, no TTL anywhere: kept", name: "ttl-none", namespace: TTL_NS, finish: true, deleted: false },
  { title: "finished, a TTL of a day: kept", name: "ttl-day", namespace: TTL_NS, annotations: { [TTL_ANNOTATION]: "86400" }, finish: true, deleted: false },
  { title: "running, TTL annotation 0: kept", name: "ttl-running", namespace: TTL_NS, annotations: { [TTL_ANNOTATION]: "0" }, finish: false, deleted: false },
];

/** The env entry `name` of a container, or undefined. */
const envOf = (container: Obj, name: string): Obj | undefined => ((container.env ?? []) as Obj[]).find((e) => e.name === name);

const podsOf = (cp: ControlPlane, ns: string, selector: string): Promise<Obj[]> =>
  list(cp, `/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(selector)}`);

/** Writes a pod's status as a kubelet would for a container that exited 0 (the status subresource). */
async function succeed(cp: ControlPlane, pod: Obj): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const containerStatuses = ((pod.spec.containers ?? []) as Obj[]).map((c) => ({
    name: c.name,
    image: c.image,
    imageID: "",
    ready: false,
    restartCount: 0,
    started: false,
    state: { terminated: { exitCode: 0, reason: "Completed", startedAt: now, finishedAt: now } },
  }));
  const r = await cp.api(
    "PATCH",
    `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}/status`,
    { status: { phase: "Succeeded", startTime: now, containerStatuses } },
    { "Content-Type": "application/merge-patch+json" },
  );
  assert.equal(r.status, 200, `pod ${pod.metadata.name} status: ${JSON.stringify(r.body)}`);
}

const conditionTrue = (o: Obj, type: string): boolean => ((o.status?.conditions ?? []) as Obj[]).some((c) => c.type === type && c.status === "True");

describe("Kubeflow Trainer v2.3.0 and JobSet v0.12.0: TrainJob pods through Quartermaster's webhooks, beside their v1 twins", { skip: SKIP }, () => {
  let cp: ControlPlane;
  let jobset: Controller | undefined;
  let trainer: Controller | undefined;
  let v1: Operator | undefined;
  let wh: WebhookProcess | undefined;
  let policyFile = "";
  let stack: TrainerStack | undefined;
  let started = 0;
  const uids = new Map<string, string>();

  const logs = (): string => [jobset, trainer, v1].map((c) => (c ? `--- ${c.name}\n${c.logs(30)}` : "")).join("\n");
  const createTrainJob = async (ns: string, name: string, spec: Obj, annotations?: Record<string, string>, dryRun = false) =>
    cp.api("POST", `${TRAINJOBS(ns)}${dryRun ? "?dryRun=All" : ""}`, {
      apiVersion: "trainer.kubeflow.org/v1alpha1",
      kind: "TrainJob",
      metadata: { name, namespace: ns, ...(annotations ? { annotations } : {}) },
      spec,
    });

  before(async () => {
    if ("skip" in bins || !operator) return;
    started = performance.now();
    stack = await startTrainerStack({
      bins: { ...bins, operator },
      policy: POLICY,
      namespaces: [NS, CAPPED, TTL_NS, TTL_DEFAULT_NS].map((name) => ({ name, optedIn: true })),
    });
    ({ cp, jobset, trainer, operator: v1, wh } = stack);
    policyFile = `${cp.dir}/policy.yaml`;
    // torch-distributed with GPUs in the runtime itself, for a TrainJob that leaves resourcesPerNode out.
    const torch = await cp.api("GET", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/torch-distributed");
    assert.equal(torch.status, 200, JSON.stringify(torch.body));
    const withGpus = structuredClone(torch.body.spec);
    withGpus.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources = gpus(4);
    const rt = await cp.api("POST", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", {
      apiVersion: "trainer.kubeflow.org/v1alpha1",
      kind: "ClusterTrainingRuntime",
      metadata: { name: RUNTIME_WITH_GPUS },
      spec: withGpus,
    });
    assert.equal(rt.status, 201, JSON.stringify(rt.body));

    for (const c of CASES) {
      const r = await createTrainJob(NS, c.name, c.spec);
      assert.equal(r.status, 201, `TrainJob ${c.name}: ${JSON.stringify(r.body)}`);
      uids.set(c.name, r.body.metadata.uid as string);
      const t = twinOf(c);
      const tr = await cp.api("POST", `/apis/kubeflow.org/v1/namespaces/${NS}/pytorchjobs`, t);
      assert.equal(tr.status, 201, `PyTorchJob ${t.metadata.name}: ${JSON.stringify(tr.body)}`);
    }
    for (const c of TTL_CASES) {
      const r = await createTrainJob(c.namespace, c.name, { runtimeRef: { name: "torch-distributed" }, trainer: { numNodes: 1 } }, c.annotations);
      assert.equal(r.status, 201, `TrainJob ${c.name}: ${JSON.stringify(r.body)}`);
      uids.set(`${c.namespace}/${c.name}`, r.body.metadata.uid as string);
    }
    console.log(`trainer: stack up and ${CASES.length * 2 + TTL_CASES.length} jobs created in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await stack?.stop();
    if (started) console.log(`trainer: suite took ${((performance.now() - started) / 1000).toFixed(1)} s`);
  });

  /** The case's TrainJob pods, once there are as many as expected (and no more follow). */
  const trainJobPods = async (c: Case): Promise<Obj[]> => {
    await cp.until(
      `${c.expect.pods} pods of TrainJob ${c.name}\n${logs()}`,
      async () => (await podsOf(cp, NS, `${JOBSET_NAME}=${c.name}`)).length >= c.expect.pods,
      120_000,
      500,
    );
    await sleep(500); // no more than expected may follow
    const got = await podsOf(cp, NS, `${JOBSET_NAME}=${c.name}`);
    assert.equal(got.length, c.expect.pods, got.map((p) => p.metadata.name).join(", "));
    return got;
  };

  for (const c of CASES) {
    it(`${c.title}: JobSet, Jobs and pods appear, labelled by JobSet and outfitted by Quartermaster`, async () => {
      const got = await trainJobPods(c);

      // The JobSet: named like the TrainJob, owned by it.
      const js = await cp.api("GET", `/apis/jobset.x-k8s.io/v1alpha2/namespaces/${NS}/jobsets/${c.name}`);
      assert.equal(js.status, 200, JSON.stringify(js.body));
      const jsOwner = (js.body.metadata.ownerReferences as Obj[]).find((o) => o.controller);
      assert.deepEqual([jsOwner?.kind, jsOwner?.name, jsOwner?.uid], ["TrainJob", c.name, uids.get(c.name)]);

      // Its Jobs: owned by the JobSet, each with the TrainJob ancestor label (on the Jobs, not the pods).
      const jobs = (await list(cp, `/apis/batch/v1/namespaces/${NS}/jobs`)).filter((j) => j.metadata.labels?.[JOBSET_NAME] === c.name);
      assert.ok(jobs.length >= 1, "no Job of the JobSet");
      for (const j of jobs) {
        assert.equal((j.metadata.ownerReferences as Obj[]).find((o) => o.controller)?.uid, js.body.metadata.uid, `Job ${j.metadata.name} owner`);
        assert.ok(j.metadata.labels["trainer.kubeflow.org/trainjob-ancestor-step"], `Job ${j.metadata.name} has no trainjob-ancestor-step label`);
      }
      const nodeJobs = jobs.filter((j) => j.metadata.labels[REPLICATED_JOB] === c.expect.replicatedJob);
      assert.ok(nodeJobs.length >= 1, `no Job of replicated job ${c.expect.replicatedJob}`);

      const record: string[] = [];
      const indexes = new Set<string>();
      for (const pod of got) {
        const where = `pod ${pod.metadata.name}`;
        const labels = pod.metadata.labels as Record<string, string>;
        // The JobSet labels Quartermaster finds TrainJob pods by.
        assert.equal(labels[JOBSET_NAME], c.name, where);
        assert.equal(labels[REPLICATED_JOB], c.expect.replicatedJob, where);
        assert.match(labels[COMPLETION_INDEX] ?? "", /^\d+$/, `${where}: ${COMPLETION_INDEX}`);
        indexes.add(labels[COMPLETION_INDEX]!);
        const owner = (pod.metadata.ownerReferences as Obj[]).find((o) => o.controller);
        assert.ok(
          nodeJobs.some((j) => j.metadata.uid === owner?.uid),
          `${where} is owned by ${owner?.kind}/${owner?.name}, not a Job of the JobSet`,
        );
        // Quartermaster's pod webhook outfitting.
        const mutations = String(pod.metadata.annotations?.[MUTATIONS] ?? "").split(",");
        for (const m of c.expect.mutations) assert.ok(mutations.includes(m), `${where}: mutations ${JSON.stringify(mutations)} lack ${m}`);
        const gpuToleration = ((pod.spec.tolerations ?? []) as Obj[]).some(
          (t) => t.key === "nvidia.com/gpu" && t.operator === "Exists" && t.effect === "NoSchedule",
        );
        assert.equal(
          gpuToleration,
          c.expect.gpus > 0,
          `${where}: GPU toleration ${c.expect.gpus > 0 ? "missing" : "on a CPU pod"}: ${JSON.stringify(pod.spec.tolerations)}`,
        );
        // The training container: its GPUs and the runtime's distributed env.
        const container = (pod.spec.containers as Obj[]).find((x) => x.name === c.expect.container);
        assert.ok(container, `${where}: no container ${c.expect.container}`);
        assert.equal(container.resources?.limits?.["nvidia.com/gpu"], c.expect.gpus > 0 ? String(c.expect.gpus) : undefined, `${where}: GPU limit`);
        const index = Number(labels[COMPLETION_INDEX]);
        for (const [name, want] of Object.entries(c.expect.env)) {
          const v = envOf(container, name);
          assert.ok(v, `${where}: no ${name} in ${JSON.stringify(container.env)}`);
          if (typeof want === "string") assert.equal(v.value, want, `${where}: ${name}`);
          else want(v, index, c.name);
        }
        const distributed = ((container.env ?? []) as Obj[]).filter((e) => /^(PET_|JOB_COMPLETION_INDEX$)/.test(String(e.name)));
        record.push(`${pod.metadata.name} [${labels[COMPLETION_INDEX]}] ${JSON.stringify(distributed)}`);
      }
      assert.equal(indexes.size, c.expect.pods, `completion indexes ${[...indexes].join(",")}`);
      console.log(`trainer: ${c.name} env as the runtime gave it:\n  ${record.sort().join("\n  ")}`);
    });

    it(`${c.title}: every pod outfitted like its v1 twin's pod of the same rank (PyTorchJob ${c.name}-v1)`, async () => {
      const mine = await trainJobPods(c);
      const twinName = `${c.name}-v1`;
      const selector = `training.kubeflow.org/job-name=${twinName}`;
      await cp.until(
        `${c.expect.pods} pods of PyTorchJob ${twinName}\n${logs()}`,
        async () => (await podsOf(cp, NS, selector)).length >= c.expect.pods,
        120_000,
        500,
      );
      const twins = await podsOf(cp, NS, selector);
      assert.equal(twins.length, c.expect.pods, twins.map((p) => p.metadata.name).join(", "));
      const byRank = new Map(twins.map((p) => [twinRank(p), p]));
      assert.equal(byRank.size, c.expect.pods, `twin ranks ${[...byRank.keys()].join(",")}`);
      const differ: string[] = [];
      for (const pod of mine) {
        const rank = Number(pod.metadata.labels[COMPLETION_INDEX]);
        const twin = byRank.get(rank);
        assert.ok(twin, `no twin pod of rank ${rank}`);
        const [a, b] = [outfit(pod, c.expect.container), outfit(twin, "pytorch")];
        // Both went through Quartermaster's pod webhook (the Job controller names its pods by generateName).
        for (const name of [`${pod.metadata.generateName}*`, twin.metadata.name])
          assert.ok(
            wh!.admissions(name).some((l) => l.webhook === "mutate-pods"),
            `no mutate-pods admission of ${name}`,
          );
        for (const k of Object.keys(a)) {
          if (canonical(a[k]) !== canonical(b[k]))
            differ.push(`rank ${rank} ${k}:\n    TrainJob ${pod.metadata.name}: ${canonical(a[k])}\n    PyTorchJob ${twin.metadata.name}: ${canonical(b[k])}`);
        }
      }
      assert.deepEqual(differ, [], `outfitted differently:\n  ${differ.join("\n  ")}`);
      console.log(
        `trainer: ${c.name} outfitted like ${twinName} (rank 0: ${canonical(
          outfit(
            mine.find((p) => p.metadata.labels[COMPLETION_INDEX] === "0")!,
            c.expect.container,
          ),
        )})`,
      );
    });
  }

  for (const c of CAP_CASES) {
    it(`GPU cap of ${JOB_GPU_CAP} per job: ${c.title}`, async () => {
      // Admitted ones as a dry run (no pods): the job webhook still judges them, and logs its answer.
      const r = await createTrainJob(CAPPED, c.name, c.spec, undefined, !c.refused);
      const lines = (await wh!.awaitAdmissions(c.name, 2)).filter((l) => l.webhook === "validate-jobs");
      if (c.refused) {
        assert.equal(r.status, 403, JSON.stringify(r.body));
        const message = String(r.body.message);
        assert.match(message, /admission webhook "jobs\.validate\.quartermaster\.dev" denied the request/, message);
        assert.ok(message.includes(`${c.refused.field}: the job requests ${c.refused.gpus} GPUs in all, over the per-job limit of ${JOB_GPU_CAP}`), message);
        assert.ok((await cp.api("GET", `${TRAINJOBS(CAPPED)}/${c.name}`)).status === 404, "a refused TrainJob exists");
        console.log(`trainer: ${c.name} refused: ${message}`);
      } else {
        assert.equal(r.status, 201, JSON.stringify(r.body));
        assert.equal(lines.length, 1, `the job webhook's admission lines for ${c.name}: ${JSON.stringify(lines)}`);
        assert.equal(lines[0]!.outcome, "allowed", JSON.stringify(lines[0]));
      }
    });
  }

  it("finished TrainJobs are deleted by a reconcile pass only with a TTL someone set", async () => {
    // The jobDefaults TTL was written on the TrainJob by /mutate/jobs.
    for (const c of TTL_CASES) {
      const got = (await cp.api("GET", `${TRAINJOBS(c.namespace)}/${c.name}`)).body;
      const want = c.annotations?.[TTL_ANNOTATION] ?? (c.namespace === TTL_DEFAULT_NS ? "0" : undefined);
      assert.equal(got.metadata.annotations?.[TTL_ANNOTATION], want, `${c.name}: TTL annotation`);
    }
    // Finish them for real: every pod Succeeded, exit 0; the job-controller, JobSet and Trainer do the rest.
    for (const c of TTL_CASES.filter((x) => x.finish)) {
      await cp.until(
        `the pod of TrainJob ${c.name}\n${logs()}`,
        async () => (await podsOf(cp, c.namespace, `${JOBSET_NAME}=${c.name}`)).length >= 1,
        120_000,
        500,
      );
      for (const pod of await podsOf(cp, c.namespace, `${JOBSET_NAME}=${c.name}`)) await succeed(cp, pod);
    }
    for (const c of TTL_CASES.filter((x) => x.finish)) {
      await cp.until(
        `TrainJob ${c.name} Complete\n${logs()}`,
        async () => conditionTrue((await cp.api("GET", `${TRAINJOBS(c.namespace)}/${c.name}`)).body, "Complete"),
        120_000,
        500,
      );
    }
    const running = (await cp.api("GET", `${TRAINJOBS(TTL_NS)}/ttl-running`)).body;
    assert.ok(!conditionTrue(running, "Complete") && !conditionTrue(running, "Failed"), `ttl-running finished: ${JSON.stringify(running.status)}`);

    const sa = await cp.serviceAccount("quartermaster", "quartermaster-reconciler");
    const trainJobDeletes = (actions: Obj[]): string[] =>
      actions
        .filter((a) => a.kind === "Job" && a.jobKind?.kind === "TrainJob" && [TTL_NS, TTL_DEFAULT_NS].includes(a.namespace))
        .map((a) => `${a.namespace}/${a.name} ${a.uid}`)
        .sort();
    const expected = TTL_CASES.filter((c) => c.deleted)
      .map((c) => `${c.namespace}/${c.name} ${uids.get(`${c.namespace}/${c.name}`)}`)
      .sort();
    const dry = await cli(["reconcile", "--once", "--dry-run", "-o", "json", "--policy", policyFile, "--kubeconfig", sa.kubeconfig]);
    assert.equal(dry.code, 0, dry.stderr);
    const plan = JSON.parse(dry.stdout) as { actions: Obj[] };
    assert.deepEqual(trainJobDeletes(plan.actions), expected, `planned: ${JSON.stringify(plan.actions)}`);

    const r = await cli(["reconcile", "--once", "--policy", policyFile, "--kubeconfig", sa.kubeconfig]);
    assert.equal(r.code, 0, r.stderr);
    for (const c of TTL_CASES) {
      const path = `${TRAINJOBS(c.namespace)}/${c.name}`;
      if (c.deleted) await cp.until(`TrainJob ${c.name} deleted`, async () => (await cp.api("GET", path)).status === 404, 60_000, 250);
      else {
        const got = await cp.api("GET", path);
        assert.equal(got.status, 200, `${c.title}: ${JSON.stringify(got.body)}`);
        assert.equal(got.body.metadata.uid, uids.get(`${c.namespace}/${c.name}`), `${c.name} was replaced`);
        assert.equal(got.body.metadata.deletionTimestamp, undefined, `${c.name} is being deleted`);
      }
    }
    console.log(
      `trainer: reconcile deleted ${expected.join(", ")}; kept ${TTL_CASES.filter((c) => !c.deleted)
        .map((c) => c.name)
        .join(", ")}`,
    );
  });
});
