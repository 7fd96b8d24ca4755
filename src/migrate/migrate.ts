/**
 * @module
 * `quartermaster migrate`: a Kubeflow training-operator v1 job (TFJob, PyTorchJob, XGBoostJob, JAXJob) as a
 * Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`, kubeflow/trainer v2.3.0
 * `pkg/apis/trainer/v1alpha1/trainjob_types.go`), with a list of what the TrainJob does not carry. Pure.
 *
 * - PyTorchJob, XGBoostJob, JAXJob: a TrainJob on the upstream default runtime (`torch-distributed`,
 *   `xgboost-distributed`, `jax-distributed`: kubeflow/trainer `manifests/base/runtimes/*.yaml`), one node per v1
 *   replica. The node template is the Master's (else the Worker's): its framework container's image, command,
 *   args, env and resources go to `spec.trainer` (Trainer puts them on the runtime's container `node`:
 *   `pkg/runtime/framework/plugins/jobset/builder.go` Trainer), the pod fields a TrainJob can patch to
 *   `spec.runtimePatches` (kubeflow/trainer `trainjob_types.go` PodSpecPatch, ContainerPatch).
 *   PyTorch: the v1 operator's env that Trainer does not set (PYTHONUNBUFFERED, and with a Master MASTER_ADDR,
 *   MASTER_PORT, WORLD_SIZE, RANK: training-operator `pkg/controller.v1/pytorch/envvar.go`) is written into
 *   `spec.trainer.env`, on the Trainer's hostnames and port, so the pods see the same names and values.
 * - TFJob (Trainer has no TensorFlow runtime, kubeflow/trainer#2699): a namespaced TrainingRuntime
 *   `<job>-tensorflow` carrying each replica type's own template as a replicatedJob (`chief`, `worker`, `ps`,
 *   `evaluator`, `master`: lower case, as TF_CONFIG names them), labelled as examples/trainer/tensorflow-runtime.yaml
 *   is, so Quartermaster's webhook writes TF_CONFIG into the pods (src/mutate/jobset-tf-config.ts); and a
 *   TrainJob referring to it. Worker (else the first type) is the Trainer's replicatedJob (`numNodes`). The v1
 *   container `tensorflow` is named `node` in every replicatedJob (Trainer requires it of its trainer replicatedJob).
 */
import { isObject } from "../core/object.js";
import type { V1EnvVar, V1PodSpec, V1PodTemplateSpec } from "@kubernetes/client-node";
import { ANNOTATION_TTL_AFTER_FINISHED } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { MIGRATE_MANAGER, TRAINER_API, type Migration, type NotCarried } from "./types.js";

type Obj = Record<string, unknown>;

interface KindInfo {
  field: string;
  container: string;
  /** The replica types the TrainJob's nodes are made of (all others are not carried); TF: every type. */
  types: readonly string[];
  /** The upstream default ClusterTrainingRuntime. */
  runtime?: string;
  /** The env the v1 operator set that Trainer's plugin replaces with its own (for the table). */
  v1Env?: string;
  trainerEnv?: string;
}

/** training-operator v1.9 kinds (`pkg/apis/kubeflow.org/v1/*_types.go`). */
export const MIGRATABLE: Record<string, KindInfo> = {
  TFJob: { field: "tfReplicaSpecs", container: "tensorflow", types: ["Chief", "Master", "Worker", "PS", "Evaluator"] },
  PyTorchJob: { field: "pytorchReplicaSpecs", container: "pytorch", types: ["Master", "Worker"], runtime: "torch-distributed" },
  XGBoostJob: {
    field: "xgbReplicaSpecs",
    container: "xgboost",
    types: ["Master", "Worker"],
    runtime: "xgboost-distributed",
    v1Env: "MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, WORKER_PORT, WORKER_ADDRS",
    trainerEnv: "DMLC_TRACKER_URI, DMLC_TRACKER_PORT, DMLC_TASK_ID, DMLC_NUM_WORKER (kubeflow/trainer pkg/runtime/framework/plugins/xgboost)",
  },
  JAXJob: {
    field: "jaxReplicaSpecs",
    container: "jax",
    types: ["Worker"],
    runtime: "jax-distributed",
    v1Env: "COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES, PROCESS_ID",
    trainerEnv: "JAX_NUM_PROCESSES, JAX_PROCESS_ID, JAX_COORDINATOR_ADDRESS (kubeflow/trainer pkg/runtime/framework/plugins/jax)",
  },
};

/** Trainer's reserved torchrun env, refused in `spec.trainer.env` (kubeflow/trainer `pkg/constants` TorchRunReservedEnvNames). */
export const TORCH_RESERVED_ENV = ["PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"];
/** The trainer nodes' port (kubeflow/trainer `pkg/constants` ContainerTrainerPort). */
export const TRAINER_PORT = 29500;
/** The field path of the completion index (kubeflow/trainer `pkg/constants` JobCompletionIndexFieldPath). */
export const COMPLETION_INDEX_FIELD = "metadata.annotations['batch.kubernetes.io/job-completion-index']";
/** The Trainer label naming the trainer replicatedJob (kubeflow/trainer `pkg/constants` LabelTrainJobAncestor). */
const ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step";
/** The container of the trainer replicatedJob (kubeflow/trainer `pkg/constants` Node). */
const TRAINER_CONTAINER = "node";
const FRAMEWORK_LABEL = "trainer.kubeflow.org/framework";

/** PodSpecPatch fields (kubeflow/trainer v2.3.0 `trainjob_types.go`). */
const POD_PATCH_FIELDS = [
  "serviceAccountName",
  "volumes",
  "imagePullSecrets",
  "securityContext",
  "nodeSelector",
  "affinity",
  "tolerations",
  "schedulingGates",
  "terminationGracePeriodSeconds",
] as const;
/** ContainerPatch fields besides name and env (env goes to `spec.trainer.env`). */
const CONTAINER_PATCH_FIELDS = ["volumeMounts", "securityContext"] as const;
const TRAINER_CONTAINER_FIELDS = ["name", "image", "command", "args", "env", "resources", ...CONTAINER_PATCH_FIELDS];

const short = (v: unknown): string => {
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
};
const replicasOf = (spec: Obj): number => (typeof spec.replicas === "number" && Number.isInteger(spec.replicas) && spec.replicas >= 0 ? spec.replicas : 1);

/** Stable JSON (sorted keys), to tell two templates apart. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

class Table {
  readonly rows: NotCarried[] = [];
  add(field: string, reason: string, value?: unknown): void {
    this.rows.push({ field, reason, ...(value === undefined ? {} : { value: short(value) }) });
  }
}

function metadataOf(job: KubeObject, name: string): Obj {
  const m = (job.metadata ?? {}) as Obj;
  const out: Obj = { name };
  if (typeof m.namespace === "string") out.namespace = m.namespace;
  if (isObject(m.labels) && Object.keys(m.labels).length) out.labels = { ...m.labels };
  if (isObject(m.annotations)) {
    const a = Object.fromEntries(Object.entries(m.annotations).filter(([k]) => k !== "kubectl.kubernetes.io/last-applied-configuration"));
    if (Object.keys(a).length) out.annotations = a;
  }
  return out;
}

/**
 * `spec.runPolicy` (training-operator `pkg/apis/kubeflow.org/v1/common_types.go` RunPolicy) → TrainJob spec
 * fields, and the TTL → Quartermaster's annotation on `meta` (the TrainJob's metadata).
 */
function runPolicy(spec: Obj, out: Obj, t: Table, meta: Obj): void {
  const rp = spec.runPolicy;
  if (!isObject(rp)) return;
  for (const [k, v] of Object.entries(rp)) {
    const field = `spec.runPolicy.${k}`;
    switch (k) {
      case "suspend":
        if (v === true) out.suspend = true;
        break;
      case "activeDeadlineSeconds":
        out.activeDeadlineSeconds = v;
        break;
      case "managedBy":
        if (v === "kueue.x-k8s.io/multikueue") out.managedBy = v;
        else if (v !== "kubeflow.org/training-operator")
          t.add(field, "TrainJob managedBy is trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue", v);
        break;
      case "cleanPodPolicy":
        t.add(field, "no TrainJob meaning: the JobSet's Jobs own the pods (finished pods stay until the TrainJob is deleted)", v);
        break;
      case "ttlSecondsAfterFinished":
        // Trainer v2 has no TTL (kubeflow/trainer#2899); Quartermaster's reconciler keeps it from this annotation.
        if (typeof v === "number" && Number.isInteger(v) && v >= 0)
          meta.annotations = { ...(isObject(meta.annotations) ? meta.annotations : {}), [ANNOTATION_TTL_AFTER_FINISHED]: String(v) };
        else t.add(field, "not a number of seconds: Trainer v2 has no TTL (kubeflow/trainer#2899)", v);
        break;
      case "backoffLimit":
        t.add(field, "no TrainJob field: the runtime's JobSet failurePolicy.maxRestarts (or its Jobs' backoffLimit) decides", v);
        break;
      case "schedulingPolicy":
        t.add(field, "no TrainJob field: gang scheduling is the runtime's podGroupPolicy; a Kueue queue is the kueue.x-k8s.io/queue-name label", v);
        break;
      default:
        t.add(field, "no TrainJob meaning", v);
    }
  }
}

/** The replica specs of the job, as `[type, spec]`, with types outside the kind's set put in the table. */
function replicaSpecs(job: KubeObject, info: KindInfo, t: Table): Array<[string, Obj]> {
  const field = ((job.spec ?? {}) as Obj)[info.field];
  if (!isObject(field)) return [];
  const out: Array<[string, Obj]> = [];
  for (const [type, spec] of Object.entries(field)) {
    if (!isObject(spec)) continue;
    const known = info.types.find((k) => k.toLowerCase() === type.toLowerCase());
    if (!known) {
      t.add(
        `spec.${info.field}.${type}`,
        `a ${String(job.kind)} on Trainer v2 has no ${type} replicas (only ${info.types.join(", ")})`,
        `${replicasOf(spec)} replicas`,
      );
      continue;
    }
    out.push([known, spec]);
  }
  return out;
}

interface Carried {
  trainer: Obj;
  podPatch: Obj;
  containerPatch: Obj;
  templateMeta: Obj;
}

/** The node template of a non-TF job → `spec.trainer` and the runtime patch of the node replicatedJob. */
// eslint-disable-next-line complexity -- one pass over the template's fields, each to its place or the table
function carryTemplate(path: string, template: V1PodTemplateSpec | undefined, info: KindInfo, t: Table, reservedEnv: readonly string[]): Carried {
  const carried: Carried = { trainer: {}, podPatch: {}, containerPatch: {}, templateMeta: {} };
  const meta = (template?.metadata ?? {}) as Obj;
  for (const k of ["labels", "annotations"]) if (isObject(meta[k]) && Object.keys(meta[k]).length) carried.templateMeta[k] = meta[k];
  for (const k of Object.keys(meta)) if (k !== "labels" && k !== "annotations") t.add(`${path}.metadata.${k}`, "not a pod template patch field", meta[k]);
  const pod = (template?.spec ?? { containers: [] }) as V1PodSpec & Obj;
  const containers = pod.containers ?? [];
  const main = containers.find((c) => c.name === info.container) ?? containers[0];
  containers.forEach((c, i) => {
    if (c !== main) t.add(`${path}.spec.containers[${i}]`, "a TrainJob cannot add containers to the runtime's (a sidecar goes into a TrainingRuntime)", c.name);
  });
  if (main) {
    const cpath = `${path}.spec.containers[${containers.indexOf(main)}]`;
    if (main.image) carried.trainer.image = main.image;
    if (main.command?.length) carried.trainer.command = main.command;
    if (main.args?.length) carried.trainer.args = main.args;
    const env = (main.env ?? []).filter((e) => {
      if (!reservedEnv.includes(e.name)) return true;
      t.add(
        `${cpath}.env[${e.name}]`,
        "reserved by Trainer, which sets it itself (kubeflow/trainer pkg/constants TorchRunReservedEnvNames)",
        e.value ?? e.valueFrom,
      );
      return false;
    });
    if (env.length) carried.trainer.env = env;
    if (main.resources && Object.keys(main.resources).length) carried.trainer.resourcesPerNode = main.resources;
    for (const k of CONTAINER_PATCH_FIELDS) if (main[k] !== undefined) carried.containerPatch[k] = main[k];
    for (const [k, v] of Object.entries(main)) {
      if (TRAINER_CONTAINER_FIELDS.includes(k)) continue;
      const reason =
        k === "ports"
          ? `the runtime's container listens on Trainer's port ${TRAINER_PORT} (kubeflow/trainer pkg/constants ContainerTrainerPort)`
          : "not a TrainJob trainer or container patch field (set it in a TrainingRuntime)";
      t.add(`${cpath}.${k}`, reason, v);
    }
  }
  for (const [k, v] of Object.entries(pod)) {
    if (k === "containers" || v === undefined) continue;
    if ((POD_PATCH_FIELDS as readonly string[]).includes(k)) carried.podPatch[k] = v;
    else if (k === "restartPolicy")
      t.add(`${path}.spec.restartPolicy`, "the runtime's Jobs restart pods (its template's restartPolicy, the JobSet failurePolicy)", v);
    else t.add(`${path}.spec.${k}`, "not a TrainJob pod patch field (set it in a TrainingRuntime)", v);
  }
  return carried;
}

function runtimePatch(rjob: string, c: Carried): Obj[] {
  const podSpec: Obj = { ...c.podPatch };
  if (Object.keys(c.containerPatch).length) podSpec.containers = [{ name: "node", ...c.containerPatch }];
  const podTemplate: Obj = {};
  if (Object.keys(c.templateMeta).length) podTemplate.metadata = c.templateMeta;
  if (Object.keys(podSpec).length) podTemplate.spec = podSpec;
  if (!Object.keys(podTemplate).length) return [];
  return [
    {
      manager: MIGRATE_MANAGER,
      trainingRuntimeSpec: { template: { spec: { replicatedJobs: [{ name: rjob, template: { spec: { template: podTemplate } } }] } } },
    },
  ];
}

const setEnv = (env: V1EnvVar[], v: V1EnvVar): void => {
  if (!env.some((e) => e.name === v.name)) env.push(v);
};

/** `spec.nprocPerNode` → `trainer.numProcPerNode`; its integer value (1 for auto, as v1's WORLD_SIZE counts it). */
function nprocPerNode(nproc: unknown, trainer: Obj, t: Table): number {
  const n = typeof nproc === "number" ? nproc : typeof nproc === "string" && /^\d+$/.test(nproc) ? Number(nproc) : undefined;
  if (n !== undefined) {
    trainer.numProcPerNode = n;
    return n;
  }
  if (nproc !== undefined && nproc !== "auto") {
    t.add("spec.nprocPerNode", "TrainJob numProcPerNode is an integer; Trainer's default is auto", nproc);
    return 1;
  }
  const res = trainer.resourcesPerNode as { limits?: Obj; requests?: Obj } | undefined;
  const gpu = [...Object.keys(res?.limits ?? {}), ...Object.keys(res?.requests ?? {})].some((r) => r.includes("gpu"));
  if (!gpu) {
    t.add(
      "spec.nprocPerNode",
      "without a GPU in resourcesPerNode, Trainer turns auto into the CPU count (at least 1) for PET_NPROC_PER_NODE (kubeflow/trainer torch.go)",
      "auto",
    );
  }
  return 1;
}

/** The v1 PyTorch env Trainer does not set, on Trainer's hostnames (training-operator pytorch/envvar.go). */
function pytorchExtras(job: KubeObject, name: string, specs: Array<[string, Obj]>, trainer: Obj, t: Table): void {
  const spec = (job.spec ?? {}) as Obj;
  const env = [...((trainer.env as V1EnvVar[] | undefined) ?? [])];
  const nodes = specs.reduce((n, [, s]) => n + replicasOf(s), 0);
  const nprocInt = nprocPerNode(spec.nprocPerNode, trainer, t);
  if (isObject(spec.elasticPolicy))
    t.add("spec.elasticPolicy", "no elastic training on a TrainJob: PET_NNODES is numNodes, PET_RDZV_* are not set", spec.elasticPolicy);
  setEnv(env, { name: "PYTHONUNBUFFERED", value: "1" });
  const master = specs.find(([type]) => type === "Master");
  if (master) {
    const addr = `${name}-node-0-0.${name}`;
    setEnv(env, { name: "MASTER_ADDR", value: addr });
    setEnv(env, { name: "MASTER_PORT", value: String(TRAINER_PORT) });
    setEnv(env, { name: "WORLD_SIZE", value: String(nodes * nprocInt) });
    setEnv(env, { name: "RANK", valueFrom: { fieldRef: { fieldPath: COMPLETION_INDEX_FIELD } } });
    const port = (master[1].template as V1PodTemplateSpec | undefined)?.spec?.containers
      ?.find((c) => c.name === "pytorch")
      ?.ports?.find((p) => p.name === "pytorchjob-port")?.containerPort;
    t.add(
      "spec.pytorchReplicaSpecs.Master: master port",
      `MASTER_PORT and PET_MASTER_PORT become Trainer's ${TRAINER_PORT} (kubeflow/trainer pkg/constants ContainerTrainerPort)`,
      port ?? 23456,
    );
  }
  trainer.env = env;
}

/** The job's spec fields other than `known`, each in the table. */
function otherSpecFields(job: KubeObject, known: readonly string[], t: Table): void {
  for (const [k, v] of Object.entries((job.spec ?? {}) as Obj)) if (!known.includes(k)) t.add(`spec.${k}`, "no TrainJob meaning", v);
}

/** A non-TF job on its upstream default runtime. */
function migrateSingleTemplate(job: KubeObject, info: KindInfo, name: string, t: Table): Migration {
  const specs = replicaSpecs(job, info, t);
  const mainEntry = specs.find(([type]) => type === "Master") ?? specs[0];
  if (!mainEntry) throw new Error(`${String(job.kind)} ${name}: no ${info.types.join(" or ")} replicas`);
  const [mainType, main] = mainEntry;
  const base = `spec.${info.field}`;
  for (const [type, s] of specs) {
    if (type === mainType) continue;
    if (canonical(s.template) !== canonical(main.template)) {
      t.add(`${base}.${type}.template`, `differs from the ${mainType}'s: a TrainJob has one template for all its nodes (the ${mainType}'s is used)`);
    }
  }
  for (const [type, s] of specs)
    if (s.restartPolicy !== undefined)
      t.add(`${base}.${type}.restartPolicy`, "the runtime's Jobs restart pods (its template's restartPolicy, the JobSet failurePolicy)", s.restartPolicy);
  const carried = carryTemplate(
    `${base}.${mainType}.template`,
    main.template as V1PodTemplateSpec | undefined,
    info,
    t,
    info.runtime === "torch-distributed" ? TORCH_RESERVED_ENV : [],
  );
  const trainer: Obj = { numNodes: specs.reduce((n, [, s]) => n + replicasOf(s), 0), ...carried.trainer };
  if (job.kind === "PyTorchJob") pytorchExtras(job, name, specs, trainer, t);
  if (info.v1Env) t.add(`${String(job.kind)} env`, `${info.v1Env} are not set; Trainer's runtime sets ${info.trainerEnv}`);
  otherSpecFields(job, [info.field, "runPolicy", ...(job.kind === "PyTorchJob" ? ["nprocPerNode", "elasticPolicy"] : [])], t);
  const spec: Obj = { runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: "ClusterTrainingRuntime", name: info.runtime }, trainer };
  const patches = runtimePatch("node", carried);
  if (patches.length) spec.runtimePatches = patches;
  const metadata = metadataOf(job, name);
  runPolicy((job.spec ?? {}) as Obj, spec, t, metadata);
  return { objects: [{ apiVersion: TRAINER_API, kind: "TrainJob", metadata, spec }], notCarried: t.rows };
}

const TF_ORDER = ["chief", "master", "worker", "ps", "evaluator"];

/** One replica type of a TFJob as an Indexed Job of the runtime (its TF container named as Trainer's trainer). */
function tfReplicatedJob({ rt, s, type, info, t, trainerType }: { rt: string; s: Obj; type: string; info: KindInfo; t: Table; trainerType: string }) {
  let renamed = false;
  const n = replicasOf(s);
  const { metadata, spec: podSpec, ...rest } = structuredClone((s.template ?? {}) as V1PodTemplateSpec);
  // v1's TF container is named `node`, Trainer's trainer container: its TrainingRuntime webhook refuses a runtime
  // whose trainer replicatedJob has no container `node` (kubeflow/trainer pkg/webhooks/trainingruntime_webhook.go),
  // and TF_CONFIG goes to `node` (src/mutate/jobset-tf-config.ts). Renamed in every replicatedJob, for one name.
  const containers = podSpec?.containers ?? [];
  if (!containers.some((c) => c.name === TRAINER_CONTAINER)) {
    const tf = containers.find((c) => c.name === info.container);
    if (tf) {
      tf.name = TRAINER_CONTAINER;
      renamed = true;
    }
  }
  const template: V1PodTemplateSpec & { spec: V1PodSpec } = {
    metadata: { ...metadata, labels: { ...metadata?.labels, [FRAMEWORK_LABEL]: "tensorflow" } },
    spec: podSpec ?? { containers: [] },
    ...rest,
  };
  const rp = s.restartPolicy;
  if (template.spec.restartPolicy === undefined) {
    if (rp === "OnFailure" || rp === "Never") template.spec.restartPolicy = rp;
    else {
      if (rp !== undefined) t.add(`spec.${info.field}.${type}.restartPolicy`, "an Indexed Job's pods restart Never or OnFailure (Never is used)", rp);
      template.spec.restartPolicy = "Never";
    }
  }
  const replicatedJob = {
    name: rt,
    replicas: 1,
    template: {
      ...(rt === trainerType ? { metadata: { labels: { [ANCESTOR]: "trainer" } } } : {}),
      spec: { parallelism: n, completions: n, completionMode: "Indexed", template },
    },
  };
  return { replicatedJob, renamed };
}

/** A TFJob: its own TrainingRuntime (a replicatedJob per replica type) and a TrainJob on it. */
function migrateTensorflow(job: KubeObject, info: KindInfo, name: string, t: Table): Migration {
  const specs = replicaSpecs(job, info, t)
    .map(([type, s]) => [type.toLowerCase(), s, type] as const)
    .sort(([a], [b]) => TF_ORDER.indexOf(a) - TF_ORDER.indexOf(b));
  const live = specs.filter(([, s, type]) => {
    if (replicasOf(s) > 0) return true;
    t.add(`spec.${info.field}.${type}.replicas`, "0 replicas: no replicatedJob", 0);
    return false;
  });
  if (!live.length) throw new Error(`TFJob ${name}: no replicas`);
  const trainerType = (live.find(([rt]) => rt === "worker") ?? live[0]!)[0];
  const spec = (job.spec ?? {}) as Obj;
  const made = live.map(([rt, s, type]) => tfReplicatedJob({ rt, s, type, info, t, trainerType }));
  const rjobs = made.map((m) => m.replicatedJob);
  const renamed = made.some((m) => m.renamed);
  if (renamed) {
    t.add(
      `spec.${info.field}: container ${info.container}`,
      `named ${TRAINER_CONTAINER} in the runtime (Trainer requires a container ${TRAINER_CONTAINER} in its trainer replicatedJob; TF_CONFIG goes to it): kubectl logs -c ${TRAINER_CONTAINER}`,
      info.container,
    );
  }
  const top = live.find(([rt]) => rt === "chief" || rt === "master");
  const targets = top ? [top[0]] : ["worker"];
  if (spec.successPolicy === "AllWorkers" && top && live.some(([rt]) => rt === "worker")) targets.push("worker");
  if (!top && spec.successPolicy !== "AllWorkers") {
    t.add("spec.successPolicy", "v1 succeeds when worker 0 does; the JobSet succeeds when all workers do", spec.successPolicy ?? "(default)");
  }
  for (const k of Object.keys(spec)) {
    if (k === info.field || k === "runPolicy" || k === "successPolicy") continue;
    t.add(`spec.${k}`, k === "enableDynamicWorker" ? "no sparse TF_CONFIG on Trainer v2: every pod gets the full cluster" : "no TrainJob meaning", spec[k]);
  }
  const ns = (job.metadata as Obj | undefined)?.namespace;
  const runtimeName = `${name}-tensorflow`;
  const trainerCount = replicasOf(live.find(([rt]) => rt === trainerType)![1]);
  const runtime: KubeObject = {
    apiVersion: TRAINER_API,
    kind: "TrainingRuntime",
    metadata: { name: runtimeName, ...(typeof ns === "string" ? { namespace: ns } : {}), labels: { [FRAMEWORK_LABEL]: "tensorflow" } },
    spec: {
      mlPolicy: { numNodes: trainerCount },
      template: {
        metadata: { labels: { [FRAMEWORK_LABEL]: "tensorflow" } },
        spec: { successPolicy: { operator: "All", targetReplicatedJobs: targets }, replicatedJobs: rjobs },
      },
    },
  };
  const trainJobSpec: Obj = {
    runtimeRef: { apiGroup: "trainer.kubeflow.org", kind: "TrainingRuntime", name: runtimeName },
    trainer: { numNodes: trainerCount },
  };
  const metadata = metadataOf(job, name);
  runPolicy(spec, trainJobSpec, t, metadata);
  return { objects: [runtime, { apiVersion: TRAINER_API, kind: "TrainJob", metadata, spec: trainJobSpec }], notCarried: t.rows };
}

/** Whether `obj` is a v1 job `migrate` takes. */
export function isMigratable(obj: KubeObject): boolean {
  return typeof obj.kind === "string" && obj.kind in MIGRATABLE && String(obj.apiVersion).startsWith("kubeflow.org/");
}

/** The Trainer v2 objects for the v1 job `job`, and what they do not carry. Throws on a job it cannot take. */
export function migrate(job: KubeObject): Migration {
  if (!isMigratable(job)) throw new Error(`not a v1 TFJob, PyTorchJob, XGBoostJob or JAXJob (kubeflow.org/v1): ${String(job.apiVersion)} ${String(job.kind)}`);
  const info = MIGRATABLE[job.kind as string]!;
  const m = (job.metadata ?? {}) as Obj;
  const name = typeof m.name === "string" && m.name ? m.name : undefined;
  if (!name) throw new Error(`${String(job.kind)}: metadata.name is required (generateName cannot be migrated: the runtime and the hostnames need the name)`);
  const t = new Table();
  return job.kind === "TFJob" ? migrateTensorflow(job, info, name, t) : migrateSingleTemplate(job, info, name, t);
}
