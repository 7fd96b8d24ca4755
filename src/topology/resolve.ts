/**
 * @module
 * Pure topology decisions: which job a pod refers to, and which replica of it the pod is.
 *
 * The job is the pod's controller ownerReference when that is a configured job kind (what the training
 * operator sets). A pod without an owner names its job with the `training.kubeflow.org/job-name` label;
 * the `operator-name` label then tells the kind, else every configured kind is a candidate.
 * The replica comes from the replica type and index labels of the kind's label scheme (`label-scheme.ts`; a
 * Caffe2 pod may carry the Kubeflow index label instead), else from the upstream pod name `<job>-<type>-<index>`.
 */
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX } from "../core/keys.js";
import type { Pod } from "../core/kube.js";
import type { Framework, JobKind, Policy } from "../policy/types.js";
import { labelScheme, OPERATOR_NAMES } from "./label-scheme.js";
import type { JobRef } from "./types.js";

/** The field of the job spec holding the replica specs. Caffe2 has a single pool under `replicaSpecs`. */
export const REPLICA_SPECS_FIELD: Record<Framework, string> = {
  tensorflow: "tfReplicaSpecs",
  pytorch: "pytorchReplicaSpecs",
  mxnet: "mxReplicaSpecs",
  xgboost: "xgbReplicaSpecs",
  paddle: "paddleReplicaSpecs",
  jax: "jaxReplicaSpecs",
  caffe2: "replicaSpecs",
};

export function jobRef(pod: Pod, namespace: string, policy: Policy): JobRef | undefined {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  if (owner) {
    const group = owner.apiVersion.includes("/") ? owner.apiVersion.split("/")[0] : "";
    const kind = policy.jobKinds.find((k) => k.kind === owner.kind && k.group === group);
    return kind ? { candidates: [kind], namespace, name: owner.name, via: "ownerReference" } : undefined;
  }
  const labels = pod.metadata?.labels ?? {};
  const name = labels[LABEL_JOB_NAME];
  if (!name) return undefined;
  const operator = labels[LABEL_OPERATOR_NAME];
  const byOperator = operator ? policy.jobKinds.filter((k) => OPERATOR_NAMES[k.framework] === operator) : [];
  return { candidates: byOperator.length > 0 ? byOperator : [...policy.jobKinds], namespace, name, via: "label" };
}

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

type ReplicaSpecs = ReadonlyArray<readonly [string, ReplicaSpec]>;

// A job read through the cache is the same (never changed) object for every replica pod of it that
// is admitted meanwhile: its replica specs are listed once per job and kind, not once per pod.
const specsOfJob = new WeakMap<KubeObject, Map<JobKind, ReplicaSpecs>>();

function listReplicaSpecs(job: KubeObject, kind: JobKind): ReplicaSpecs {
  const spec = (job.spec ?? {}) as Record<string, unknown>;
  const field = spec[REPLICA_SPECS_FIELD[kind.framework]];
  if (!field || typeof field !== "object") return [];
  if (kind.framework === "caffe2") return [["Worker", field as ReplicaSpec]];
  return Object.entries(field as Record<string, ReplicaSpec>).filter(([, v]) => v && typeof v === "object");
}

/** The replica specs of a job as `[type, spec]` pairs; Caffe2's single pool is type `Worker`. */
export function replicaSpecs(job: KubeObject, kind: JobKind): ReplicaSpecs {
  let byKind = specsOfJob.get(job);
  if (!byKind) specsOfJob.set(job, (byKind = new Map<JobKind, ReplicaSpecs>()));
  let specs = byKind.get(kind);
  if (!specs) byKind.set(kind, (specs = Object.freeze(listReplicaSpecs(job, kind))));
  return specs;
}

/** `replicas` of a spec; upstream treats a missing value as 1. */
export function replicasOf(spec: ReplicaSpec | undefined): number {
  const n = spec?.replicas;
  return typeof n === "number" && Number.isInteger(n) && n >= 0 ? n : spec ? 1 : 0;
}

/** Which replica `pod` is, or a reason it cannot be told. */
export function replicaOf(pod: Pod, job: KubeObject, kind: JobKind): { replicaType: string; index: number } | { problem: string } {
  const specs = replicaSpecs(job, kind);
  const jobName = String((job.metadata as { name?: string } | undefined)?.name ?? "");
  const labels = pod.metadata?.labels ?? {};
  const scheme = labelScheme(kind);
  let type = kind.framework === "caffe2" ? "worker" : labels[scheme.replicaTypeLabel];
  let index = labels[scheme.replicaIndexLabel] ?? labels[LABEL_REPLICA_INDEX];
  if ((type === undefined || index === undefined) && pod.metadata?.name?.startsWith(`${jobName}-`)) {
    const m = /^(.+)-(\d+)$/.exec(pod.metadata.name.slice(jobName.length + 1));
    if (m) {
      type ??= m[1];
      index ??= m[2];
    }
  }
  if (type === undefined || index === undefined || !/^\d+$/.test(index)) {
    return { problem: "the pod has no replica-type/replica-index labels and its name is not <job>-<type>-<index>" };
  }
  const found = specs.find(([t]) => t.toLowerCase() === type.toLowerCase());
  if (!found) return { problem: `the job has no replica type ${type}` };
  const i = Number(index);
  if (i >= replicasOf(found[1])) return { problem: `replica index ${i} is beyond the ${replicasOf(found[1])} ${found[0]} replicas` };
  return { replicaType: found[0], index: i };
}
