/**
 * @module
 * `/scale` of the training-job kinds: `kubectl scale pytorchjob x --replicas=40` (or an autoscaler)
 * sends an `autoscaling/v1` Scale object, not the job, so the job rules never saw the new count (issue 16).
 * The decision here takes the job as stored, sets the scaled replica type to the Scale's
 * `spec.replicas`, and runs the job rules (replica caps, the per-job GPU limit, cluster capacity) on the
 * result; only what the scaling makes worse is refused, as for any job UPDATE. Violations are reported at
 * the Scale's `spec.replicas`, their message naming the job field.
 *
 * Which replica type a kind's scale subresource moves is the CRD's `specReplicasPath`; upstream
 * (kubeflow/training-operator v1.8, `manifests/base/crds/kubeflow.org_{pytorchjobs,paddlejobs,jaxjobs}.yaml`)
 * declares `.spec.<kind>ReplicaSpecs.Worker.replicas` for PyTorchJob, PaddleJob and JAXJob and no scale
 * subresource for the other kinds.
 */
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { replicaSpecsField } from "../kinds/index.js";
import { newOrWorse, validateCapacity, validateJob, type ClusterCapacity } from "./job.js";
import { merge, type Finding, type Findings, type ValidationContext } from "./types.js";
import { isObject } from "../core/object.js";

/** The replica type each kind's upstream scale subresource sets (`specReplicasPath`). */
export const SCALE_REPLICA_TYPE: Readonly<Partial<Record<string, string>>> = Object.freeze({ pytorch: "Worker", paddle: "Worker", jax: "Worker" });

/** The Scale's field the violations point at. */
export const SCALE_FIELD = "spec.replicas";

/** `spec.replicas` of a Scale object: a non-negative whole number, else undefined. */
export function scaleReplicas(scale: KubeObject): number | undefined {
  const n = isObject(scale.spec) ? scale.spec.replicas : undefined;
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** The path of the field a kind's scale subresource sets, e.g. `spec.pytorchReplicaSpecs.Worker.replicas`. */
export function scaledField(kind: JobKind): string | undefined {
  const type = SCALE_REPLICA_TYPE[kind.framework];
  return type === undefined ? undefined : `spec.${replicaSpecsField(kind)}.${type}.replicas`;
}

/** The job with its scaled replica type at `replicas` (copying only the path to it); undefined when the job has no such replica type. */
export function scaledJob(job: KubeObject, kind: JobKind, replicas: number): KubeObject | undefined {
  const type = SCALE_REPLICA_TYPE[kind.framework];
  const field = replicaSpecsField(kind);
  const spec = job.spec;
  if (type === undefined || !isObject(spec) || !isObject(spec[field])) return undefined;
  const specs = spec[field];
  const replica = specs[type];
  if (!isObject(replica)) return undefined;
  return { ...job, spec: { ...spec, [field]: { ...specs, [type]: { ...replica, replicas } } } };
}

export interface ScaleInput {
  /** The Scale object of the request. */
  scale: KubeObject;
  /** The job as stored. */
  job: KubeObject;
  kind: JobKind;
  ctx: ValidationContext;
  capacity?: ClusterCapacity;
}

function violation(rule: string, message: string): Finding {
  return { rule, field: SCALE_FIELD, message };
}

/** Every rule a scaled job breaks that the job as stored did not break as badly. */
export function validateScale({ scale, job, kind, ctx, capacity }: ScaleInput): Findings {
  const target = scaledField(kind);
  if (target === undefined) {
    return { violations: [violation("job-scale", `${kind.kind} has no scale subresource Quartermaster knows; scale it by updating the job`)], warnings: [] };
  }
  const replicas = scaleReplicas(scale);
  if (replicas === undefined) {
    return {
      violations: [violation("job-scale", `${JSON.stringify(isObject(scale.spec) ? scale.spec.replicas : undefined)} is not a whole number of replicas`)],
      warnings: [],
    };
  }
  const scaled = scaledJob(job, kind, replicas);
  if (!scaled) {
    return { violations: [violation("job-scale", `the job has no ${SCALE_REPLICA_TYPE[kind.framework]} replica type to scale (${target})`)], warnings: [] };
  }
  const check = (j: KubeObject): Findings => merge(validateJob(j, kind, ctx, undefined, true), validateCapacity(j, kind, ctx, capacity));
  const worse = newOrWorse(check(scaled), check(job));
  return {
    violations: worse.violations.map((v) => ({
      ...v,
      field: SCALE_FIELD,
      message: `${replicas} replicas at ${target}: ${v.field === target ? "" : `${v.field}: `}${v.message}`,
    })),
    warnings: worse.warnings,
  };
}
