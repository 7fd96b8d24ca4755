/**
 * @module
 * The job controller's reading and writing of a job's status (`src/reconcile/job-controller.ts`): conditions as
 * kubeflow/common sets them (`pkg/util/status.go`), replica statuses in the kind's shape, the run policy, and the
 * restarts counted in an annotation. Pure.
 */
import { isDeepStrictEqual } from "node:util";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";

/** Where Quartermaster counts the pods it deleted to restart them (the backoff limit's restarts). */
export const ANNOTATION_RESTARTS = "quartermaster.dev/restarts";

export interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
}

export interface ReplicaStatus {
  active: number;
  succeeded: number;
  failed: number;
}

export interface Status {
  conditions?: Condition[];
  replicaStatuses?: Record<string, ReplicaStatus> | ReplicaStatus;
  startTime?: string;
  completionTime?: string;
  lastReconcileTime?: string;
  [k: string]: unknown;
}

export interface RunPolicy {
  suspend: boolean;
  backoffLimit?: number;
  activeDeadlineSeconds?: number;
}

/** metav1.Time as the apiserver stores it: RFC 3339, whole seconds, UTC. */
export const metaTime = (d: Date): string => d.toISOString().replace(/\.\d+Z$/, "Z");

/** Upstream `IsRetryableExitCode`: 128 and above (signals: 137 SIGKILL, 143 SIGTERM) are retryable. */
export function isRetryableExitCode(code: number): boolean {
  return code >= 128;
}

/** Whether the job has condition `type` with status True. */
export function hasCondition(status: { conditions?: Condition[] } | undefined, type: string): boolean {
  return (status?.conditions ?? []).some((c) => c.type === type && c.status === "True");
}

/**
 * Upstream `setCondition` (training-operator `pkg/util/status.go`); true when the conditions changed.
 */
export function setCondition(status: Status, c: Condition): boolean {
  const conditions = status.conditions ?? [];
  if (hasCondition(status, "Failed")) return false;
  const current = conditions.find((x) => x.type === c.type);
  if (current && current.status === c.status && current.reason === c.reason) return false;
  const next: Condition = { ...c };
  if (current && current.status === c.status) next.lastTransitionTime = current.lastTransitionTime;
  const kept: Condition[] = [];
  for (const x of conditions) {
    if (x.type === c.type) continue;
    if ((c.type === "Restarting" && x.type === "Running") || (c.type === "Running" && x.type === "Restarting")) continue;
    kept.push((c.type === "Failed" || c.type === "Succeeded") && x.type === "Running" ? { ...x, status: "False" } : x);
  }
  status.conditions = [...kept, next];
  return true;
}

/** What a step says of a condition; {@link condition} stamps it with the time. */
export type ConditionChange = Pick<Condition, "type" | "status"> & { reason: string; message: string };

export function condition(c: ConditionChange, now: Date): Condition {
  const t = metaTime(now);
  return { ...c, lastUpdateTime: t, lastTransitionTime: t };
}

export function readRunPolicy(job: KubeObject): RunPolicy | { problems: string[] } {
  const raw = (job.spec as { runPolicy?: unknown } | undefined)?.runPolicy;
  if (raw !== undefined && (raw === null || typeof raw !== "object" || Array.isArray(raw))) return { problems: ["spec.runPolicy is not an object"] };
  const rp = (raw ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  const count = (field: string, min: number): number | undefined => {
    const v = rp[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) problems.push(`spec.runPolicy.${field} ${JSON.stringify(v)} is not a whole number ≥ ${min}`);
    return v as number;
  };
  const backoffLimit = count("backoffLimit", 0);
  const activeDeadlineSeconds = count("activeDeadlineSeconds", 1);
  if (rp.suspend !== undefined && typeof rp.suspend !== "boolean") problems.push(`spec.runPolicy.suspend ${JSON.stringify(rp.suspend)} is not a boolean`);
  if (problems.length > 0) return { problems };
  return {
    suspend: rp.suspend === true,
    ...(backoffLimit !== undefined ? { backoffLimit } : {}),
    ...(activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds } : {}),
  };
}

export function readStatus(job: KubeObject): Status {
  return structuredClone((job.status ?? {}) as Status);
}

/** Replica statuses in the common map shape, whatever the kind stores. */
export function replicaStatusMap(status: Status, kind: JobKind): Record<string, ReplicaStatus> {
  const rs = status.replicaStatuses;
  if (!rs || typeof rs !== "object") return {};
  if (jobShape(kind).singleReplicaStatus) return "active" in rs || "succeeded" in rs || "failed" in rs ? { Worker: rs as ReplicaStatus } : rs;
  return rs as Record<string, ReplicaStatus>;
}

export function totalFailed(map: Record<string, ReplicaStatus>): number {
  return Object.values(map).reduce((n, r) => n + (typeof r?.failed === "number" ? r.failed : 0), 0);
}

/** The restarts counted so far (the annotation; anything but a whole number reads as 0). */
export function restartsOf(job: KubeObject): number {
  const raw = (job.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[ANNOTATION_RESTARTS];
  const n = Number(raw);
  return raw !== undefined && raw !== "" && Number.isInteger(n) && n >= 0 ? n : 0;
}

/** Deep equality regardless of key order (the apiserver returns a custom resource's keys sorted). */
export function isEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(a, b);
}
