/**
 * @module
 * The reconciler's plan for finished training jobs (training-operator `common/job.go` ReconcileJobs,
 * DeletePodsAndServices, CleanupJob), pure: job, its objects and the time in, delete actions out.
 *
 * - Finished = a `Succeeded` or `Failed` condition with status True. Nothing else is ever deleted.
 * - CleanPodPolicy: `All` deletes every pod the job controls, `Running` the Running and Pending ones (upstream's
 *   current rule; Succeeded and Failed pods stay for their logs), `None` nothing. Each deleted pod's Service of the
 *   same name goes with it. DECIDE (training-semantics §2.7): a job without a policy gets the platform default
 *   (`reconciler.defaultCleanPodPolicy`, Running), not upstream's None that leaves PS pods holding GPUs forever;
 *   and only objects whose controller is this job (by uid) are touched, where upstream deletes services by name.
 * - TTL: the job itself is deleted once `now > completionTime + ttl` (strictly after, as upstream), with the
 *   job's `ttlSecondsAfterFinished`, else the platform default. No completionTime: nothing, and a problem noted.
 * Every action carries the object's uid for the delete precondition.
 */
import type { KubeObject } from "../admission/types.js";
import type { JobKind, Policy } from "../policy/types.js";
import { meta, type Meta } from "./meta.js";

export type CleanPodPolicy = "All" | "Running" | "None";

export interface DeleteAction {
  verb: "delete";
  kind: "Pod" | "Service" | "Job";
  namespace: string;
  name: string;
  /** Precondition: the object deleted must still be this one. */
  uid: string;
  /** `<Kind>/<name>` of the job that this action is for. */
  job: string;
  /** The job's kind (to address its API when the job itself is deleted, and for its Events) and uid. */
  jobKind: JobKind;
  jobUid: string;
  reason: string;
}

export interface FinishedPlan {
  actions: DeleteAction[];
  problems: string[];
}



/** When the job finished, or undefined while it has not (Succeeded or Failed condition True). */
export function finishedAt(job: KubeObject): { finished: boolean; completionTime?: Date } {
  const status = (job.status ?? {}) as { conditions?: Array<{ type?: string; status?: string }>; completionTime?: string };
  const finished = (status.conditions ?? []).some((c) => (c.type === "Succeeded" || c.type === "Failed") && c.status === "True");
  if (!finished) return { finished: false };
  const t = status.completionTime ? new Date(status.completionTime) : undefined;
  return { finished: true, completionTime: t && !Number.isNaN(t.getTime()) ? t : undefined };
}

/** Objects whose controller ownerReference is the job (by uid) and that are not already being deleted. */
export function controlledBy(job: KubeObject, objects: readonly KubeObject[]): KubeObject[] {
  const uid = meta(job).uid;
  return objects.filter((o) => !meta(o).deletionTimestamp && (meta(o).ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid));
}

export function planFinishedJob(
  job: KubeObject,
  kind: JobKind,
  pods: readonly KubeObject[],
  services: readonly KubeObject[],
  now: Date,
  policy: Policy,
): FinishedPlan {
  const out: FinishedPlan = { actions: [], problems: [] };
  const { finished, completionTime } = finishedAt(job);
  const jm = meta(job);
  if (!finished || jm.deletionTimestamp) return out;
  const jobId = `${kind.kind}/${jm.name}`;
  const jobOf = { job: jobId, jobKind: kind, jobUid: jm.uid! };
  const runPolicy = ((job.spec ?? {}) as { runPolicy?: { cleanPodPolicy?: CleanPodPolicy; ttlSecondsAfterFinished?: number } }).runPolicy ?? {};
  const cleanPodPolicy = runPolicy.cleanPodPolicy ?? "None"; // upstream's default; platform defaults come at admission (/mutate/jobs)

  const ownServices = new Map(controlledBy(job, services).map((s) => [meta(s).name, s]));
  for (const pod of controlledBy(job, pods)) {
    const phase = ((pod.status ?? {}) as { phase?: string }).phase;
    const remove = cleanPodPolicy === "All" || (cleanPodPolicy === "Running" && (phase === "Running" || phase === "Pending"));
    if (!remove) continue;
    const pm = meta(pod);
    const reason = `CleanPodPolicy ${cleanPodPolicy}: pod ${phase ?? "without a phase"} of a finished job`;
    out.actions.push({ verb: "delete", kind: "Pod", namespace: pm.namespace!, name: pm.name!, uid: pm.uid!, ...jobOf, reason });
    const svc = ownServices.get(pm.name);
    if (svc) out.actions.push({ verb: "delete", kind: "Service", namespace: meta(svc).namespace!, name: meta(svc).name!, uid: meta(svc).uid!, ...jobOf, reason: `CleanPodPolicy ${cleanPodPolicy}: service of pod ${pm.name}` });
  }

  const ttl = runPolicy.ttlSecondsAfterFinished ?? Number.POSITIVE_INFINITY; // no TTL: never deleted, as upstream
  if (!completionTime) {
    out.problems.push(`${jobId}: finished but has no status.completionTime; TTL cannot apply`);
  } else if (now.getTime() > completionTime.getTime() + ttl * 1000) {
    out.actions.push({ verb: "delete", kind: "Job", namespace: jm.namespace!, name: jm.name!, uid: jm.uid!, ...jobOf, reason: `TTL: finished ${completionTime.toISOString()}, ttlSecondsAfterFinished ${ttl}` });
  }
  return out;
}

/**
 * At most `max` deletions a pass (`reconciler.maxDeletionsPerPass`); the rest wait for later passes.
 * Jobs' own deletions come last, so a capped pass still frees GPUs first.
 */
export function capDeletions(actions: readonly DeleteAction[], max: number): { now: DeleteAction[]; deferred: DeleteAction[] } {
  const ordered = [...actions.filter((a) => a.kind !== "Job"), ...actions.filter((a) => a.kind === "Job")];
  return { now: ordered.slice(0, max), deferred: ordered.slice(max) };
}
