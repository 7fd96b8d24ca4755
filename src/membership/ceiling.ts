/**
 * @module
 * The hard ceiling on a training job's replicas, independent of the policy. Upstream (the Kubeflow
 * training operator) has no cap: replicas are int32, so one job may ask for 2^31−1 pods, and every
 * cluster spec (TF_CONFIG, MX_CONFIG, CAFFE2_CONFIG) lists each of them. Quartermaster refuses such a job
 * (rule `job-replica-ceiling`, always denies) and admits a pod of one that exists anyway (created before
 * the webhook, or beside it) without a cluster spec, with a warning. DECIDE: deliberate strictness.
 */
import type { KubeObject } from "../core/kube.js";
import type { KindShape } from "../kinds/index.js";
import type { JobKind } from "../policy/types.js";
import { replicaSpecs, replicasOf } from "./resolve.js";

/** Replicas per job, summed over its replica types. */
export const MAX_JOB_REPLICAS = 10_000;

/** The job's replicas summed over its replica types (a missing count is 1, as upstream defaults it). */
export function jobReplicaTotal(job: KubeObject, kind: JobKind, shapes?: readonly KindShape[]): number {
  let n = 0;
  for (const [, spec] of replicaSpecs(job, kind, undefined, shapes)) n += replicasOf(spec);
  return n;
}

/** Why a job is over the ceiling, or undefined when it is not. */
export function overCeiling(job: KubeObject, kind: JobKind, shapes?: readonly KindShape[]): string | undefined {
  const n = jobReplicaTotal(job, kind, shapes);
  return n > MAX_JOB_REPLICAS ? `the job has ${n} replicas in all, over Quartermaster's ceiling of ${MAX_JOB_REPLICAS} per job` : undefined;
}
