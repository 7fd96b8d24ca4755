/**
 * @module
 * The reconciler's plan for finished training jobs (training-operator `common/job.go` ReconcileJobs,
 * DeletePodsAndServices, CleanupJob), pure: job, its objects and the time in, delete actions out.
 *
 * - Finished = a `Succeeded` or `Failed` condition with status True (TrainJob: `Complete` or `Failed`, the
 *   time its lastTransitionTime). Nothing else is ever deleted.
 * - TrainJob (Trainer v2 has no TTL, kubeflow/trainer#2899): the TTL is Quartermaster's annotation
 *   `quartermaster.dev/ttl-seconds-after-finished`, written by the user or by `/mutate/jobs` from
 *   `jobDefaults.ttlSecondsAfterFinished`; unset, never deleted. No CleanPodPolicy (its pods are its JobSet's
 *   Jobs', deleted with it): its pods are never this plan's.
 * - Defaults as upstream (kubeflow/training-operator `pkg/apis/kubeflow.org/v1/common_types.go` RunPolicy):
 *   `cleanPodPolicy` unset means `None` and `ttlSecondsAfterFinished` unset means never. Platform defaults
 *   belong in the job itself, written at admission; the reconciler reads only what the job says.
 * - CleanPodPolicy: `All` deletes every pod the job controls, `Running` the Running and Pending ones (upstream's
 *   current rule; Succeeded and Failed pods stay for their logs), `None` nothing. Each deleted pod's Service of the
 *   same name goes with it, and a Service the job controls whose pod of that name is gone (deleted by an earlier
 *   pass whose deletion budget ran out between the two) is deleted by a later one. DECIDE: only objects whose
 *   controller is this job (by uid) are touched, where upstream deletes services by name.
 * - TTL: the job itself is deleted once `now > completionTime + ttl` (strictly after, as upstream); not for a
 *   suspended job (upstream CleanupJob). A TTL but no completionTime: nothing, and a problem noted.
 * - A runPolicy field of the wrong type (a string TTL, a negative one, an unknown cleanPodPolicy) is a problem
 *   reported for the job, which then gets no action at all.
 * Every action carries the object's uid for the delete precondition.
 */
import type { KubeObject } from "../core/kube.js";
import type { CleanPodPolicy, JobKind, Policy } from "../policy/types.js";
import type { V1PodSpec } from "@kubernetes/client-node";
import { effectivePodGpus } from "../core/gpu.js";
import { meta } from "./meta.js";
import { jobShape } from "../kinds/index.js";

/** Where a caller gives no kind: a Kubeflow v1 kind's shape. */
const V1: Pick<JobKind, "framework"> = { framework: "pytorch" };

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
  /** A pod bound to a node, not terminated, that requests GPUs: deleted first when the budget is short. */
  holdsGpus?: boolean;
  /** The job controller deletes this failed pod to restart it (counted in the job's restart annotation). */
  restart?: boolean;
}

export interface FinishedPlan {
  actions: DeleteAction[];
  problems: string[];
}

/**
 * When the job finished, or undefined while it has not: a finished condition of its kind's shape True (v1:
 * Succeeded or Failed, with `status.completionTime`; TrainJob: Complete or Failed, at that condition's
 * lastTransitionTime). Without `kind`, as a v1 kind.
 */
export function finishedAt(job: KubeObject, kind: Pick<JobKind, "framework"> = V1): { finished: boolean; completionTime?: Date } {
  const shape = jobShape(kind);
  const status = (job.status ?? {}) as { conditions?: Array<{ type?: string; status?: string }> };
  const finished = (Array.isArray(status.conditions) ? status.conditions : []).some(
    (c) => shape.finishedConditions.includes(String(c?.type)) && c.status === "True",
  );
  if (!finished) return { finished: false };
  const at = shape.completionTime(job);
  const t = at ? new Date(at) : undefined;
  return { finished: true, completionTime: t && !Number.isNaN(t.getTime()) ? t : undefined };
}

/** Objects whose controller ownerReference is the job (by uid) and that are not already being deleted. */
export function controlledBy(job: KubeObject, objects: readonly KubeObject[]): KubeObject[] {
  const uid = meta(job).uid;
  return objects.filter((o) => !meta(o).deletionTimestamp && (meta(o).ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid));
}

const CLEAN_POD_POLICIES: readonly string[] = ["All", "Running", "None"];

/**
 * The job's run policy as the reconciler reads it, where its kind's shape keeps it (v1: `spec.runPolicy`;
 * TrainJob: the TTL annotation and `spec.suspend`, `src/kinds/`), or the problems that keep it from
 * acting. Without `kind`, as a v1 kind.
 */
export function readRunPolicy(
  job: KubeObject,
  kind: Pick<JobKind, "framework"> = V1,
): { cleanPodPolicy: CleanPodPolicy; ttl?: number; suspended: boolean } | { problems: string[] } {
  const view = jobShape(kind).runPolicy(job);
  const raw = view.object?.value;
  if (view.object && (raw === null || typeof raw !== "object" || Array.isArray(raw))) return { problems: [`${view.object.field} is not an object`] };
  const problems: string[] = [];
  const cleanPodPolicy = view.fields.cleanPodPolicy;
  if (cleanPodPolicy && (typeof cleanPodPolicy.value !== "string" || !CLEAN_POD_POLICIES.includes(cleanPodPolicy.value))) {
    problems.push(`${cleanPodPolicy.field} ${JSON.stringify(cleanPodPolicy.value)} is not one of All, Running, None`);
  }
  const ttl = view.fields.ttlSecondsAfterFinished;
  if (ttl && (typeof ttl.value !== "number" || !Number.isInteger(ttl.value) || ttl.value < 0)) {
    problems.push(`${ttl.field} ${JSON.stringify(ttl.value)} is not a whole number of seconds ≥ 0`);
  }
  if (problems.length > 0) return { problems };
  return {
    cleanPodPolicy: (cleanPodPolicy?.value as CleanPodPolicy | undefined) ?? "None",
    ...(ttl ? { ttl: ttl.value as number } : {}),
    suspended: view.fields.suspend?.value === true,
  };
}

interface PodShape {
  spec?: V1PodSpec;
  status?: { phase?: string };
}

function holdsGpus(pod: KubeObject, policy: Policy): boolean {
  const p = pod as PodShape;
  const phase = p.status?.phase;
  if (!p.spec?.nodeName || phase === "Succeeded" || phase === "Failed") return false;
  for (const n of effectivePodGpus(p.spec, policy.gpu).values()) if (n > 0) return true;
  return false;
}

/** A job, the pods and Services it may own, and the time and policy {@link planFinishedJob} plans under. */
export interface FinishedJobInput {
  job: KubeObject;
  kind: JobKind;
  pods: readonly KubeObject[];
  services: readonly KubeObject[];
  now: Date;
  policy: Policy;
}

export function planFinishedJob(input: FinishedJobInput): FinishedPlan {
  const { job, kind, pods, services, now, policy } = input;
  const out: FinishedPlan = { actions: [], problems: [] };
  const { finished, completionTime } = finishedAt(job, kind);
  const jm = meta(job);
  if (!finished || jm.deletionTimestamp) return out;
  const jobId = `${kind.kind}/${jm.name}`;
  const jobOf = { job: jobId, jobKind: kind, jobUid: jm.uid! };
  const runPolicy = readRunPolicy(job, kind);
  if ("problems" in runPolicy) {
    out.problems.push(...runPolicy.problems.map((p) => `${jm.namespace}/${jobId}: ${p}; nothing done for this job`));
    return out;
  }
  const { cleanPodPolicy, ttl } = runPolicy;

  if (cleanPodPolicy !== "None") {
    const ownServices = new Map(controlledBy(job, services).map((s) => [meta(s).name, s]));
    const live = controlledBy(job, pods);
    const livePods = new Set(live.map((p) => meta(p).name));
    // First, Services whose pod is gone (or going): left behind when a pass's deletion budget parted them from
    // their pod, they lead the job's deletions so the budget never starves them.
    for (const [name, svc] of ownServices) {
      if (livePods.has(name)) continue;
      out.actions.push({
        verb: "delete",
        kind: "Service",
        namespace: meta(svc).namespace!,
        name: name!,
        uid: meta(svc).uid!,
        ...jobOf,
        reason: `CleanPodPolicy ${cleanPodPolicy}: service of pod ${name}, which is gone`,
      });
    }
    for (const pod of live) {
      const phase = ((pod.status ?? {}) as { phase?: string }).phase;
      const remove = cleanPodPolicy === "All" || phase === "Running" || phase === "Pending";
      if (!remove) continue;
      const pm = meta(pod);
      const reason = `CleanPodPolicy ${cleanPodPolicy}: pod ${phase ?? "without a phase"} of a finished job`;
      out.actions.push({
        verb: "delete",
        kind: "Pod",
        namespace: pm.namespace!,
        name: pm.name!,
        uid: pm.uid!,
        ...jobOf,
        reason,
        holdsGpus: holdsGpus(pod, policy),
      });
      const svc = ownServices.get(pm.name);
      if (svc) {
        out.actions.push({
          verb: "delete",
          kind: "Service",
          namespace: meta(svc).namespace!,
          name: meta(svc).name!,
          uid: meta(svc).uid!,
          ...jobOf,
          reason: `CleanPodPolicy ${cleanPodPolicy}: service of pod ${pm.name}`,
        });
      }
    }
  }

  if (ttl === undefined || runPolicy.suspended) return out;
  if (!completionTime) {
    out.problems.push(`${jm.namespace}/${jobId}: finished but has no status.completionTime; TTL cannot apply`);
  } else if (now.getTime() > completionTime.getTime() + ttl * 1000) {
    out.actions.push({
      verb: "delete",
      kind: "Job",
      namespace: jm.namespace!,
      name: jm.name!,
      uid: jm.uid!,
      ...jobOf,
      reason: `TTL: finished ${completionTime.toISOString()}, ttlSecondsAfterFinished ${ttl}`,
    });
  }
  return out;
}

/**
 * At most `max` deletions a pass (`reconciler.maxDeletionsPerPass`); the rest wait for later passes. The order:
 * pods holding GPUs first (with their Services), then the other pods and Services, then the jobs themselves
 * (a capped pass frees devices first), each tier round-robin across namespaces in name order, so one namespace's
 * thousand completed pods cannot use up the budget while another team's wait. A pod and its Service are kept
 * together where the budget allows; a Service parted from its pod is found again by the next pass (pod gone).
 */
export function capDeletions(actions: readonly DeleteAction[], max: number): { now: DeleteAction[]; deferred: DeleteAction[] } {
  // Units: a pod with the Service of the same job and name that follows it, or a lone Service, or a job.
  const units: DeleteAction[][] = [];
  for (let i = 0; i < actions.length; i++) {
    const a = actions[i]!;
    const next = actions[i + 1];
    if (a.kind === "Pod" && next?.kind === "Service" && next.name === a.name && next.jobUid === a.jobUid) {
      units.push([a, next]);
      i++;
    } else units.push([a]);
  }
  const tierOf = (u: DeleteAction[]): number => (u[0]!.kind === "Job" ? 2 : u[0]!.holdsGpus ? 0 : 1);
  const ordered: DeleteAction[] = [];
  for (const tier of [0, 1, 2]) {
    const byNamespace = new Map<string, DeleteAction[][]>();
    for (const u of units) {
      if (tierOf(u) !== tier) continue;
      const ns = u[0]!.namespace;
      const list = byNamespace.get(ns);
      if (list) list.push(u);
      else byNamespace.set(ns, [u]);
    }
    let queues = [...byNamespace.keys()].sort().map((ns) => byNamespace.get(ns)!);
    for (let round = 0; queues.length > 0; round++) {
      for (const q of queues) ordered.push(...q[round]!);
      queues = queues.filter((q) => round + 1 < q.length);
    }
  }
  return { now: ordered.slice(0, max), deferred: ordered.slice(max) };
}
