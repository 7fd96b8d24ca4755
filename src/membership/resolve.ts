/**
 * @module
 * Pure topology decisions: which job a pod refers to, and which replica of it the pod is.
 *
 * The job is the pod's controller ownerReference when that is a configured job kind (what the training
 * operator sets). A pod without an owner names its job with the `training.kubeflow.org/job-name` label;
 * the `operator-name` label then tells the kind, else every configured kind is a candidate.
 * The replica comes from the replica type and index labels of the kind's label scheme (`src/kinds/`; a
 * Caffe2 pod may carry the Kubeflow index label instead), else from the upstream pod name `<job>-<type>-<index>`.
 */
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX } from "../core/keys.js";
import type { Pod } from "../core/kube.js";
import { JOBSET_LABELS } from "../core/job-shapes.js";
import type { JobKind, Policy } from "../policy/types.js";
import { jobShape, labelScheme, operatorName, type KindShape, type ReplicaSpec } from "../kinds/index.js";
import type { JobRef } from "./types.js";

export type { ReplicaSpec } from "../kinds/index.js";

/**
 * A JobSet pod's job (no job kind owns it: a batch Job does): the TrainJob named by its
 * `jobset.sigs.k8s.io/jobset-name`, which the Trainer gives the JobSet it creates for the TrainJob (and owns).
 * DECIDE: the JobSet's owner is not read; a JobSet of that name in the namespace is the TrainJob's when the
 * TrainJob exists (the Trainer could not have created its own otherwise), and a JobSet without one is no
 * training job's (`lookup.ts`: not found is no job, not a failure).
 */
function jobsetRef(pod: Pod, namespace: string, policy: Policy): JobRef | undefined {
  const name = pod.metadata?.labels?.[JOBSET_LABELS.jobsetName];
  if (!name) return undefined;
  const kinds = policy.jobKinds.filter((k) => jobShape(k, policy.kindShapes).layout === "runtime");
  return kinds.length > 0 ? { candidates: kinds, namespace, name, via: "jobset", ...shapesOf(policy) } : undefined;
}

/** The policy's registry for a {@link JobRef}, when it has one of its own. */
const shapesOf = (policy: Policy): Pick<JobRef, "shapes"> => (policy.kindShapes ? { shapes: policy.kindShapes } : {});

export function jobRef(pod: Pod, namespace: string, policy: Policy): JobRef | undefined {
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  if (owner) {
    const group = owner.apiVersion.includes("/") ? owner.apiVersion.split("/")[0] : "";
    const kind = policy.jobKinds.find((k) => k.kind === owner.kind && k.group === group);
    if (kind) {
      const uid = typeof owner.uid === "string" && owner.uid !== "" ? { uid: owner.uid } : {};
      return { candidates: [kind], namespace, name: owner.name, via: "ownerReference", ...uid, ...shapesOf(policy) };
    }
    return owner.kind === "Job" && group === "batch" ? jobsetRef(pod, namespace, policy) : undefined;
  }
  const labels = pod.metadata?.labels ?? {};
  const name = labels[LABEL_JOB_NAME];
  if (!name) return undefined;
  const operator = labels[LABEL_OPERATOR_NAME];
  const byOperator = operator ? policy.jobKinds.filter((k) => operatorName(k, policy.kindShapes) === operator) : [];
  // Every kind whose pods carry Kubeflow's labels (not TrainJob's: JobSet's pods never do).
  const candidates = byOperator.length > 0 ? byOperator : policy.jobKinds.filter((k) => jobShape(k, policy.kindShapes).kubeflowPodLabels);
  return { candidates, namespace, name, via: "label", ...shapesOf(policy) };
}

type ReplicaSpecs = ReadonlyArray<readonly [string, ReplicaSpec]>;

// A job read through the cache is the same (never changed) object for every replica pod of it that
// is admitted meanwhile: its replica specs are listed once per job and kind, not once per pod.
const specsOfJob = new WeakMap<KubeObject, Map<JobKind, ReplicaSpecs>>();

function listReplicaSpecs(job: KubeObject, kind: JobKind, runtime: KubeObject | undefined, shapes: readonly KindShape[] | undefined): ReplicaSpecs {
  return jobShape(kind, shapes)
    .replicas(job, kind, runtime)
    .map((r) => [r.type, r.spec] as const);
}

/**
 * The replica specs of a job as `[type, spec]` pairs (its shape's replicas, `shape.ts`); Caffe2's single pool
 * is type `Worker`; a TrainJob's are its runtime's replicated Jobs (given `runtime`, else its `node` Job alone).
 */
export function replicaSpecs(job: KubeObject, kind: JobKind, runtime?: KubeObject, shapes?: readonly KindShape[]): ReplicaSpecs {
  if (runtime) return Object.freeze(listReplicaSpecs(job, kind, runtime, shapes));
  let byKind = specsOfJob.get(job);
  if (!byKind) specsOfJob.set(job, (byKind = new Map<JobKind, ReplicaSpecs>()));
  let specs = byKind.get(kind);
  if (!specs) byKind.set(kind, (specs = Object.freeze(listReplicaSpecs(job, kind, undefined, shapes))));
  return specs;
}

/** `replicas` of a spec; upstream treats a missing value as 1. */
export function replicasOf(spec: ReplicaSpec | undefined): number {
  const n = spec?.replicas;
  return typeof n === "number" && Number.isInteger(n) && n >= 0 ? n : spec ? 1 : 0;
}

/** Which replica `pod` is, or a reason it cannot be told. */
export function replicaOf(
  pod: Pod,
  job: KubeObject,
  kind: JobKind,
  shapes?: readonly KindShape[],
): { replicaType: string; index: number } | { problem: string } {
  const specs = replicaSpecs(job, kind, undefined, shapes);
  const jobName = String((job.metadata as { name?: string } | undefined)?.name ?? "");
  const labels = pod.metadata?.labels ?? {};
  const scheme = labelScheme(kind, shapes);
  let type = jobShape(kind, shapes).fixedReplicaType ?? labels[scheme.replicaTypeLabel];
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
