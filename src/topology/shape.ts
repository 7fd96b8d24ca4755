/**
 * @module
 * One descriptor per job-kind shape (`src/core/job-shapes.ts` names them): everything the webhooks and the
 * reconciler ask of a job that depends on how its kind lays out its replicas, so a kind of a new shape is one
 * entry here and its label scheme (`label-scheme.ts`), not a branch in each rule.
 *
 * - `replica-map` (Kubeflow v1: TFJob, PyTorchJob, ...): `spec.<framework>ReplicaSpecs.<Type>`, a replica spec
 *   each (`replicas`, `restartPolicy`, `template`); `spec.runPolicy`; finished on `Succeeded`/`Failed`;
 *   `spec.runPolicy.managedBy` other than `kubeflow.org/training-operator` is another controller's.
 * - `pool` (caffe2-operator's Caffe2Job): one replica spec under `spec.replicaSpecs`, type `Worker`; replica
 *   names on the `<namespace>/<job>` key; no container name required; the template's restartPolicy counts.
 * - `trainjob` (Kubeflow Trainer v2): replicas from the runtime's JobSet template (`trainjob.ts`); no runPolicy:
 *   `spec.activeDeadlineSeconds`, `spec.suspend`, and Quartermaster's TTL annotation; finished on
 *   `Complete`/`Failed` (time: the condition's lastTransitionTime, TrainJob status has no completionTime);
 *   `spec.managedBy` other than `trainer.kubeflow.org/trainjob-controller` is another controller's (MultiKueue).
 */
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import { ANNOTATION_TTL_AFTER_FINISHED, shapeNameOf, TRAINER, type JobShapeName } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import type { Framework, JobKind } from "../policy/types.js";
import { runtimeRefOf, trainJobReplicas } from "./trainjob.js";
import { isObject, objectOr } from "../core/object.js";

/** The field of the job spec holding the replica specs (replica-map and pool shapes). */
export const REPLICA_SPECS_FIELD: Record<Framework, string> = {
  tensorflow: "tfReplicaSpecs",
  pytorch: "pytorchReplicaSpecs",
  mxnet: "mxReplicaSpecs",
  xgboost: "xgbReplicaSpecs",
  paddle: "paddleReplicaSpecs",
  jax: "jaxReplicaSpecs",
  caffe2: "replicaSpecs",
  trainer: "trainer",
};

/** The controller `spec.runPolicy.managedBy` names when the training operator (and so Quartermaster) may act. */
export const TRAINING_OPERATOR_MANAGER = "kubeflow.org/training-operator";

/**
 * A replica spec (Kubeflow's `ReplicaSpec`) as it arrived, not validated: the pod template read with
 * client-node's types, every other field untyped (readers check what they rely on).
 */
export interface ReplicaSpec {
  replicas?: unknown;
  restartPolicy?: unknown;
  template?: V1PodTemplateSpec;
  [field: string]: unknown;
}

/** One replica type of a job, with the field paths its rules report at. */
export interface JobReplica {
  type: string;
  spec: ReplicaSpec;
  /** The replica spec's own path (e.g. `spec.pytorchReplicaSpecs.Worker`). */
  path: string;
  /** Where the replica count is. */
  replicasField: string;
  /** Where the pod template is. */
  templateField: string;
  /** A finding's field under `templateField`, moved to where the value was written (TrainJob's resourcesPerNode). */
  mapField?: (field: string) => string;
}

export type RunPolicyField = "ttlSecondsAfterFinished" | "activeDeadlineSeconds" | "backoffLimit" | "cleanPodPolicy" | "suspend";

/** A job's run policy as its shape stores it: each field's value and path. */
export interface RunPolicyView {
  /** The run-policy object as it arrived (checked to be an object), absent for a shape without one. */
  object?: { value: unknown; field: string };
  fields: Partial<Record<RunPolicyField, { value: unknown; field: string }>>;
  /** Where a field is (set or not), or undefined when the shape has no such field. */
  at(field: RunPolicyField): string | undefined;
}

export interface JobShape {
  name: JobShapeName;
  /** Where the replicas are, for "none at all" messages. */
  specsField(kind: JobKind): string;
  /** The same for any kind of the shape (the job controller's problem lines). */
  specsHint: string;
  /** The job's replicas; `runtime` is a TrainJob's (Cluster)TrainingRuntime (ignored by other shapes). */
  replicas(job: KubeObject, kind: JobKind, runtime?: KubeObject): JobReplica[];
  /**
   * Where the replicas live: a map of replica specs (`replica-map`), one spec (`pool`), or the runtime's
   * replicated Jobs (`runtime`: the job alone gives its own part, `replicas` without a runtime).
   */
  layout: "map" | "single" | "runtime";
  /** The job's runtime reference (TrainJob `spec.runtimeRef`), for shapes whose replicas are a runtime's. */
  runtimeRef?(job: KubeObject): { kind: string; name: string; apiGroup: string } | undefined;
  /**
   * Whether its pods get the Kubeflow v1 labels (`training-labels` mutation: job-name, replica-type, index,
   * job-role). Not a TrainJob's: JobSet labels them itself, and v1 labels would name replica types and indexes
   * no training operator made (DECIDE).
   */
  kubeflowPodLabels: boolean;
  /** Whether the kind's CRD has a `scale` subresource (`/validate/jobs` then checks scalings). */
  scaleSubresource: boolean;
  /** The replica type every pod of the job has, whatever its labels (pool: `worker`). */
  fixedReplicaType?: string;
  /** The name of replica `index` of type `type`: its pod's (hostname's) and its Service's. */
  objectName(namespace: string, job: string, type: string, index: number): string;
  /** How to fix a replica name over 63 characters; why a Service name is no DNS-1035 label (appended). */
  nameHints: { shorten: string; service(namespace: string): string };
  /** Whether a replica template must have a container named as the framework's default (`FRAMEWORKS`). */
  namedContainer: boolean;
  /** Whether the template's restartPolicy is the pods' when the replica spec sets none. */
  restartPolicyFromTemplate: boolean;
  /** Whether the v1 operators' webhook rules on replica types and the framework container apply (`job-shape`). */
  v1Shape: boolean;
  runPolicy(job: KubeObject): RunPolicyView;
  /** Condition types that, with status True, mean the job has finished. */
  finishedConditions: readonly string[];
  /** When the job finished, from its status (given it has). */
  completionTime(job: KubeObject): string | undefined;
  /** Why another controller manages the job, or undefined when it is the operator's (and so Quartermaster's). */
  managedElsewhere(job: KubeObject): string | undefined;
  /** Where a job-gpus finding points (v1: `spec`; TrainJob: the numNodes or resourcesPerNode it sets). */
  jobGpusField(job: KubeObject): string;
  /** The replica status map as the kind stores it (pool: a single object). */
  singleReplicaStatus: boolean;
}

/** Upstream `GenGeneralName`: `<job>-<lower type>-<index>` with `/` replaced by `-`. */
export function replicaName(job: string, type: string, index: number): string {
  return `${job}-${type.toLowerCase()}-${index}`.replace(/\//g, "-");
}

function runPolicyOfSpec(job: KubeObject): RunPolicyView {
  const raw = objectOr(job.spec).runPolicy;
  const rp = isObject(raw) ? raw : {};
  const fields: RunPolicyView["fields"] = {};
  for (const f of ["ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit", "cleanPodPolicy", "suspend"] as const)
    if (rp[f] !== undefined) fields[f] = { value: rp[f], field: `spec.runPolicy.${f}` };
  return { ...(raw !== undefined ? { object: { value: raw, field: "spec.runPolicy" } } : {}), fields, at: (f) => `spec.runPolicy.${f}` };
}

function v1Replicas(job: KubeObject, kind: JobKind, single: boolean): JobReplica[] {
  const field = REPLICA_SPECS_FIELD[kind.framework];
  const specs = objectOr(job.spec)[field];
  if (!specs || typeof specs !== "object") return [];
  const entries: Array<[string, ReplicaSpec]> = single
    ? [["Worker", specs as ReplicaSpec]]
    : Object.entries(specs as Record<string, ReplicaSpec>).filter(([, v]) => v && typeof v === "object");
  return entries.map(([type, spec]) => {
    const path = single ? `spec.${field}` : `spec.${field}.${type}`;
    return { type, spec, path, replicasField: `${path}.replicas`, templateField: `${path}.template` };
  });
}

const v1Common = {
  restartPolicyFromTemplate: false,
  runPolicy: runPolicyOfSpec,
  finishedConditions: ["Succeeded", "Failed"],
  completionTime: (job: KubeObject): string | undefined => {
    const t = objectOr(job.status).completionTime;
    return typeof t === "string" ? t : undefined;
  },
  jobGpusField: (): string => "spec",
  managedElsewhere(job: KubeObject): string | undefined {
    const by = objectOr(objectOr(job.spec).runPolicy).managedBy;
    if (by === undefined || by === null || by === "" || by === TRAINING_OPERATOR_MANAGER) return undefined;
    return `spec.runPolicy.managedBy is ${JSON.stringify(by)}: another controller manages this job`;
  },
} as const;

const REPLICA_MAP: JobShape = {
  ...v1Common,
  name: "replica-map",
  layout: "map",
  kubeflowPodLabels: true,
  scaleSubresource: true,
  specsField: (kind) => `spec.${REPLICA_SPECS_FIELD[kind.framework]}`,
  specsHint: "spec.<framework>ReplicaSpecs",
  replicas: (job, kind) => v1Replicas(job, kind, false),
  objectName: (_ns, job, type, index) => replicaName(job, type, index),
  nameHints: { shorten: "shorten the job name", service: () => "" },
  namedContainer: true,
  v1Shape: true,
  singleReplicaStatus: false,
};

const POOL: JobShape = {
  ...v1Common,
  name: "pool",
  layout: "single",
  kubeflowPodLabels: true,
  scaleSubresource: true,
  specsField: (kind) => `spec.${REPLICA_SPECS_FIELD[kind.framework]}`,
  specsHint: "spec.replicaSpecs",
  replicas: (job, kind) => v1Replicas(job, kind, true),
  fixedReplicaType: "worker",
  objectName: (ns, job, type, index) => replicaName(`${ns}/${job}`, type, index),
  nameHints: {
    shorten: "shorten the job name (the Caffe2 controller prefixes it with the namespace)",
    service: (ns) =>
      `: the Caffe2 controller names replicas <namespace>-<job>-worker-<index>, and namespace ${JSON.stringify(ns)} does not start with a letter`,
  },
  namedContainer: false,
  restartPolicyFromTemplate: true,
  v1Shape: true,
  singleReplicaStatus: true,
};

/** A whole number of seconds as an annotation spells it (`"86400"`), else the value as it is (for the rules to refuse). */
function annotationCount(v: string): unknown {
  return /^(0|[1-9][0-9]{0,15})$/.test(v) ? Number(v) : v;
}

/**
 * Where a TrainJob keeps its run policy: its own `activeDeadlineSeconds` and `suspend`, Quartermaster's TTL
 * annotation; no backoffLimit (its runtime's Jobs have theirs) and no cleanPodPolicy (JobSet deletes the pods
 * with the TrainJob).
 */
const TRAINJOB_FIELDS: Partial<Record<RunPolicyField, string>> = {
  ttlSecondsAfterFinished: `metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]`,
  activeDeadlineSeconds: "spec.activeDeadlineSeconds",
  suspend: "spec.suspend",
};

const TRAINJOB: JobShape = {
  name: "trainjob",
  layout: "runtime",
  kubeflowPodLabels: false,
  scaleSubresource: false,
  runtimeRef: runtimeRefOf,
  specsField: () => "spec.runtimeRef",
  specsHint: "spec.runtimeRef",
  replicas: (job, _kind, runtime) =>
    trainJobReplicas(job, runtime).map((r) => ({
      type: r.type,
      spec: { replicas: r.replicas, template: r.template },
      path: r.replicasField,
      replicasField: r.replicasField,
      templateField: r.templateField,
      mapField: r.mapField,
    })),
  // JobSet pod hostnames: `<jobset>-<replicatedJob>-<job index>-<completion index>`; the Trainer runs one Job per replicated Job.
  objectName: (_ns, job, type, index) => `${job}-${type}-0-${index}`,
  nameHints: { shorten: "shorten the TrainJob name (JobSet names pods <jobset>-<replicatedJob>-<job>-<index>)", service: () => "" },
  namedContainer: false,
  restartPolicyFromTemplate: false,
  v1Shape: false,
  runPolicy(job) {
    const spec = objectOr(job.spec);
    const fields: RunPolicyView["fields"] = {};
    const ttl = objectOr(objectOr(job.metadata).annotations)[ANNOTATION_TTL_AFTER_FINISHED];
    if (ttl !== undefined)
      fields.ttlSecondsAfterFinished = { value: typeof ttl === "string" ? annotationCount(ttl) : ttl, field: TRAINJOB_FIELDS.ttlSecondsAfterFinished! };
    for (const f of ["activeDeadlineSeconds", "suspend"] as const) if (spec[f] !== undefined) fields[f] = { value: spec[f], field: TRAINJOB_FIELDS[f]! };
    return { fields, at: (f) => TRAINJOB_FIELDS[f] };
  },
  jobGpusField(job) {
    const trainer = objectOr(objectOr(job.spec).trainer);
    return trainer.numNodes !== undefined
      ? "spec.trainer.numNodes"
      : trainer.resourcesPerNode !== undefined
        ? "spec.trainer.resourcesPerNode"
        : "spec.runtimeRef";
  },
  finishedConditions: TRAINER.finishedConditions,
  completionTime(job) {
    const conditions = objectOr(job.status).conditions;
    if (!Array.isArray(conditions)) return undefined;
    const done = (conditions as unknown[]).find((c) => isObject(c) && TRAINER.finishedConditions.includes(String(c.type)) && c.status === "True");
    const t = isObject(done) ? done.lastTransitionTime : undefined;
    return typeof t === "string" ? t : undefined;
  },
  managedElsewhere(job) {
    const by = objectOr(job.spec).managedBy;
    if (by === undefined || by === null || by === "" || by === TRAINER.controllerName) return undefined;
    return `spec.managedBy is ${JSON.stringify(by)}: another controller manages this TrainJob`;
  },
  singleReplicaStatus: false,
};

const SHAPES: Readonly<Record<JobShapeName, JobShape>> = Object.freeze({ "replica-map": REPLICA_MAP, pool: POOL, trainjob: TRAINJOB });

/** The shape descriptor of `kind`. */
export function jobShape(kind: Pick<JobKind, "framework">): JobShape {
  return SHAPES[shapeNameOf(kind.framework)];
}
