/**
 * @module
 * What the two shapes of training-operator v1's API share (`replica-map.ts`, `pool.ts`): replica specs under one
 * field of the spec, `spec.runPolicy`, finished on `Succeeded`/`Failed` with `status.completionTime`, and
 * `spec.runPolicy.managedBy`.
 */
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import type { JobReplica, ReplicaSpec, RunPolicyView } from "./types.js";

/** The controller `spec.runPolicy.managedBy` names when the training operator (and so Quartermaster) may act. */
export const TRAINING_OPERATOR_MANAGER = "kubeflow.org/training-operator";

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

/** The replica specs under `spec.<field>`: a map of replica types, or (`single`) one spec of type `Worker`. */
export function v1Replicas(job: KubeObject, field: string | undefined, single: boolean): JobReplica[] {
  const specs = field === undefined ? undefined : objectOr(job.spec)[field];
  if (!specs || typeof specs !== "object") return [];
  const entries: Array<[string, ReplicaSpec]> = single
    ? [["Worker", specs as ReplicaSpec]]
    : Object.entries(specs as Record<string, ReplicaSpec>).filter(([, v]) => v && typeof v === "object");
  return entries.map(([type, spec]) => {
    const path = single ? `spec.${field}` : `spec.${field}.${type}`;
    return { type, spec, path, replicasField: `${path}.replicas`, templateField: `${path}.template` };
  });
}

export const v1Common = {
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
