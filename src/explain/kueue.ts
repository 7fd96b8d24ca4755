/**
 * @module
 * The queue layer of a verdict: a job Kueue holds (kubernetes-sigs/kueue, `apis/kueue/v1beta1` Workload,
 * ClusterQueue, LocalQueue). Kueue's own words come first (the Workload's QuotaReserved/Admitted/Evicted
 * conditions, `status.requeueState`, the visibility API's position); the numbers that block (the flavor's nominal
 * quota, what is reserved in it, how much may be borrowed) are read from the ClusterQueue, so the verdict holds
 * whether or not Kueue's `UnadmittedWorkloadsObservability` gate is on.
 *
 * Never admissible: the LocalQueue or ClusterQueue does not exist or is inactive, the Workload is deactivated
 * (`spec.active: false`, by hand or by Kueue when the requeuing backoff limit is reached: Kueue admits it no more
 * until it is reactivated), Kueue says the request exceeds the maximum capacity or no flavor matches, or the job
 * asks more of a GPU resource than the ClusterQueue could ever give (nominal quota plus its borrowing limit, in the
 * flavor that has most).
 */
import { effectivePodGpus } from "../core/gpu.js";
import { asV1PodSpec } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import { queueNameOf } from "../kueue/admission.js";
import { conditionOf, conditionText, countOf, duration, nameOf, objectRef, objectsIn, secondsSince } from "./read.js";
import type { ExplainEvidence, EvidenceItem, Finding } from "./types.js";

/** Kueue's messages and reasons for a workload no capacity will ever admit (kueue `pkg/scheduler`, `pkg/workload`). */
/** "resource memory unavailable in ClusterQueue": the ClusterQueue covers no quota of a resource the pods ask (kueue `pkg/scheduler/flavorassigner`). */
const NEVER =
  /maximum capacity|doesn't exist|does not exist|not found|is inactive|ExceedsMaxQuota|NoMatchingFlavor|Inadmissible|couldn't find|untolerated|doesn't match|unavailable in ClusterQueue/i;

/** GPUs the workload asks in all, per resource: each pod set's count times its pod's GPUs. */
export function workloadAsk(workload: KubeObject, ev: ExplainEvidence): Map<string, number> {
  const out = new Map<string, number>();
  const sets = objectOr(workload.spec).podSets;
  for (const ps of Array.isArray(sets) ? (sets as unknown[]) : []) {
    if (!isObject(ps)) continue;
    const count = typeof ps.count === "number" ? ps.count : 1;
    const spec = asV1PodSpec(objectOr(objectOr(ps.template).spec));
    for (const [r, n] of effectivePodGpus(spec, ev.settings.gpu)) out.set(r, (out.get(r) ?? 0) + n * count);
  }
  return out;
}

interface FlavorQuota {
  flavor: string;
  nominal: number;
  /** Undefined: no limit (in a cohort), 0 outside one. */
  borrowingLimit?: number;
  reserved: number;
  borrowed: number;
}

/** What the ClusterQueue has reserved of `resource`, per flavor (`status.flavorsReservation`, else `flavorsUsage`). */
function reservedByFlavor(cq: KubeObject, resource: string): Map<string, { total: number; borrowed: number }> {
  const status = objectOr(cq.status);
  const out = new Map<string, { total: number; borrowed: number }>();
  for (const f of objectsIn(status.flavorsReservation ?? status.flavorsUsage))
    for (const r of objectsIn(f.resources))
      if (r.name === resource) out.set(String(f.name), { total: countOf(r.total) ?? 0, borrowed: countOf(r.borrowed) ?? 0 });
  return out;
}

/** The ClusterQueue's quota of `resource` per flavor, with what is reserved in each. */
export function flavorQuotas(cq: KubeObject, resource: string): FlavorQuota[] {
  const spec = objectOr(cq.spec);
  const inCohort = typeof spec.cohort === "string" || typeof spec.cohortName === "string";
  const reservedBy = reservedByFlavor(cq, resource);
  const out: FlavorQuota[] = [];
  for (const f of objectsIn(spec.resourceGroups).flatMap((g) => objectsIn(g.flavors))) {
    for (const r of objectsIn(f.resources).filter((x) => x.name === resource)) {
      const limit = countOf(r.borrowingLimit);
      const used = reservedBy.get(String(f.name)) ?? { total: 0, borrowed: 0 };
      out.push({
        flavor: String(f.name),
        nominal: countOf(r.nominalQuota) ?? 0,
        ...(limit !== undefined ? { borrowingLimit: limit } : inCohort ? {} : { borrowingLimit: 0 }),
        reserved: used.total,
        borrowed: used.borrowed,
      });
    }
  }
  return out;
}

const quotaText = (q: FlavorQuota, resource: string): string =>
  `flavor ${q.flavor}: ${resource} nominal ${q.nominal}, reserved ${q.reserved}${q.borrowed ? ` (borrowed ${q.borrowed})` : ""}, ` +
  `free ${Math.max(0, q.nominal - q.reserved)}; borrowing ${q.borrowingLimit === undefined ? "unlimited within the cohort" : q.borrowingLimit === 0 ? "none" : `up to ${q.borrowingLimit}`}`;

const queueNameOfJob = (job: KubeObject | undefined): string | undefined => (job ? queueNameOf(job) : undefined);

/** Why the queue will never admit the job, or undefined. */
function never(ev: ExplainEvidence, queue: string, now: Date): Finding | undefined {
  const ns = ev.ref.namespace;
  const next = (what: string): string => `${what}; Kueue then reconsiders the workload by itself`;
  if (!ev.kueueServed)
    return {
      reason: "inadmissible",
      summary: `the job names LocalQueue ${queue}, but Kueue's API is not served in this cluster`,
      evidence: [{ object: objectRef(ev.job, ev.kind.kind), text: `label kueue.x-k8s.io/queue-name=${queue}; kueue.x-k8s.io/v1beta1 is not served` }],
      next: "install Kueue, or remove the kueue.x-k8s.io/queue-name label and set suspend: false",
    };
  if (!ev.localQueue)
    return {
      reason: "inadmissible",
      summary: `LocalQueue ${ns}/${queue} does not exist`,
      evidence: [{ object: `LocalQueue ${ns}/${queue}`, text: "not found" }],
      next: next(`create LocalQueue ${queue} in ${ns}, or set the job's kueue.x-k8s.io/queue-name to an existing one (kubectl get localqueues -n ${ns})`),
    };
  const cqName = String(objectOr(ev.localQueue.spec).clusterQueue ?? "");
  if (!ev.clusterQueue)
    return {
      reason: "inadmissible",
      summary: `ClusterQueue ${cqName} of LocalQueue ${queue} does not exist`,
      evidence: [{ object: `LocalQueue ${ns}/${queue}`, text: `spec.clusterQueue: ${cqName}; ClusterQueue ${cqName} not found` }],
      next: next(`create ClusterQueue ${cqName}, or point LocalQueue ${queue} at an existing one`),
    };
  const active = conditionOf(ev.clusterQueue, "Active");
  if (active && active.status !== "True")
    return {
      reason: "inadmissible",
      summary: `ClusterQueue ${cqName} is inactive`,
      evidence: [{ object: `ClusterQueue ${cqName}`, text: conditionText(active, now) }],
      next: next(`fix ClusterQueue ${cqName} (${active.message ?? active.reason ?? "see its Active condition"}), e.g. create the ResourceFlavors it names`),
    };
  if (!ev.workload) return undefined;
  const deactivated = deactivatedFinding(ev.workload, now);
  if (deactivated) return deactivated;
  const reserved = conditionOf(ev.workload, "QuotaReserved");
  if (reserved && reserved.status !== "True" && NEVER.test(`${reserved.reason ?? ""} ${reserved.message ?? ""}`))
    return {
      reason: "inadmissible",
      summary: `Kueue cannot ever admit it in ClusterQueue ${cqName}: ${reserved.message ?? reserved.reason}`,
      evidence: [{ object: objectRef(ev.workload, "Workload"), text: conditionText(reserved, now) }, ...quotaEvidence(ev, cqName)],
      next: next(`ask for less than ClusterQueue ${cqName} can ever give (or raise its nominalQuota/borrowingLimit), or use a queue whose flavors match`),
    };
  for (const [r, ask] of workloadAsk(ev.workload, ev)) {
    const quotas = flavorQuotas(ev.clusterQueue, r);
    const most = Math.max(0, ...quotas.map((q) => (q.borrowingLimit === undefined ? Infinity : q.nominal + q.borrowingLimit)));
    if (ask > most)
      return {
        reason: "inadmissible",
        summary: `it asks ${ask} ${r} in all; ClusterQueue ${cqName} can give at most ${most}`,
        evidence: [
          { object: objectRef(ev.workload, "Workload"), text: `asks ${ask} ${r} (pod sets × GPUs per pod)` },
          ...(quotas.length === 0
            ? [{ object: `ClusterQueue ${cqName}`, text: `no flavor covers ${r}` }]
            : quotas.map((q) => ({ object: `ClusterQueue ${cqName}`, text: quotaText(q, r) }))),
        ],
        next: next(`make the job ask at most ${most} ${r} (fewer replicas or GPUs per pod), or raise ClusterQueue ${cqName}'s quota for ${r}`),
      };
  }
  return undefined;
}

/**
 * A Workload with `spec.active: false`: Kueue evicts it (Evicted, reason `InactiveWorkload` in v1beta1,
 * `Deactivated` in v1beta2) and never admits it again until `spec.active` is true (kueue
 * `pkg/controller/core/workload_controller.go`; the requeuing backoff limit of `waitForPodsReady` sets it false).
 * Judged once its quota is released; before that it is a phantom reservation.
 */
function deactivatedFinding(wl: KubeObject, now: Date): Finding | undefined {
  // Still holding its quota: the phantom reservation (verdict.ts) is what blocks others first.
  if (objectOr(wl.spec).active !== false || conditionOf(wl, "QuotaReserved")?.status === "True") return undefined;
  const ref = objectRef(wl, "Workload");
  const evidence: EvidenceItem[] = [{ object: ref, text: "spec.active: false" }];
  for (const type of ["Evicted", "Requeued"]) {
    const c = conditionOf(wl, type);
    if (c) evidence.push({ object: ref, text: conditionText(c, now) });
  }
  const count = objectOr(objectOr(wl.status).requeueState).count;
  if (typeof count === "number") evidence.push({ object: ref, text: `requeued ${count} time(s) before it was deactivated` });
  return {
    reason: "inadmissible",
    summary: `its Workload ${nameOf(wl)} is deactivated (spec.active: false); Kueue admits it no more until it is reactivated`,
    evidence,
    next:
      `fix what made it fail (pods not ready in time under waitForPodsReady, a rejected admission check), then reactivate it: ` +
      `kubectl patch workload -n ${String(objectOr(wl.metadata).namespace ?? "")} ${nameOf(wl)} --type=merge -p '{"spec":{"active":true}}'`,
  };
}

function quotaEvidence(ev: ExplainEvidence, cqName: string): EvidenceItem[] {
  if (!ev.workload || !ev.clusterQueue) return [];
  const out: EvidenceItem[] = [];
  for (const [r, ask] of workloadAsk(ev.workload, ev)) {
    out.push({ object: objectRef(ev.workload, "Workload"), text: `asks ${ask} ${r} in all` });
    for (const q of flavorQuotas(ev.clusterQueue, r)) out.push({ object: `ClusterQueue ${cqName}`, text: quotaText(q, r) });
  }
  return out;
}

/** Kueue's own account of a waiting workload: its conditions, its position and its requeue state. */
function waitEvidence(ev: ExplainEvidence, wl: KubeObject, queue: string, cqName: string, now: Date): EvidenceItem[] {
  const evidence: EvidenceItem[] = [];
  for (const type of ["QuotaReserved", "Admitted", "Evicted"]) {
    const c = conditionOf(wl, type);
    if (c && (type !== "Evicted" || c.status === "True")) evidence.push({ object: objectRef(wl, "Workload"), text: conditionText(c, now) });
  }
  if (ev.position)
    evidence.push({
      object: objectRef(wl, "Workload"),
      text: `position ${ev.position.inClusterQueue ?? "?"} in ClusterQueue ${cqName}, ${ev.position.inLocalQueue ?? "?"} in LocalQueue ${queue}`,
    });
  const requeue = objectOr(objectOr(wl.status).requeueState);
  if (requeue.count !== undefined || requeue.requeueAt !== undefined) {
    const wait = secondsSince(requeue.requeueAt, now);
    evidence.push({
      object: objectRef(wl, "Workload"),
      text: `requeued ${String(requeue.count ?? 0)} time(s)${typeof requeue.requeueAt === "string" ? `, next at ${requeue.requeueAt}${wait === undefined ? "" : ` (${duration(wait)} ago)`}` : ""}`,
    });
  }
  return evidence;
}

function noWorkloadYet(ev: ExplainEvidence, queue: string): Finding {
  return {
    reason: "queued",
    summary: `suspended for LocalQueue ${queue}; Kueue has made no Workload for it yet`,
    evidence: [{ object: objectRef(ev.job, ev.kind.kind), text: `suspended with kueue.x-k8s.io/queue-name=${queue}, and no Workload for it yet` }],
    next: `check that Kueue manages ${ev.kind.kind} (its integrations in the kueue-manager-config) and that kueue-controller-manager is running`,
  };
}

/** A job suspended for a queue, judged without Kueue's objects (not read): queued, never inadmissible. */
function unreadQueue(ev: ExplainEvidence, queue: string): Finding {
  return {
    reason: "queued",
    summary: `suspended for LocalQueue ${queue}`,
    evidence: [{ object: objectRef(ev.job, ev.kind.kind), text: `suspended with kueue.x-k8s.io/queue-name=${queue} (Kueue's Workload and queues not read)` }],
    next: `quartermaster explain ${ev.kind.kind.toLowerCase()}/${ev.ref.name} -n ${ev.ref.namespace} reads its Workload, position and quota; wait, or free quota in its ClusterQueue`,
  };
}

/**
 * The queue findings of the job: `inadmissible` or `queued`, or nothing when Kueue does not hold it (no queue
 * name, or quota reserved and admitted).
 */
export function queueFinding(ev: ExplainEvidence, suspended: boolean, now: Date): Finding | undefined {
  if (!ev.unread?.includes("kueue")) return queueFindingRead(ev, suspended, now);
  const queue = queueNameOfJob(ev.job);
  return queue && suspended ? unreadQueue(ev, queue) : undefined;
}

/** {@link queueFinding} with Kueue's objects read. */
function queueFindingRead(ev: ExplainEvidence, suspended: boolean, now: Date): Finding | undefined {
  const queue = queueNameOfJob(ev.job);
  if (!queue && !ev.workload) return undefined;
  const inadmissible = never(ev, queue ?? "", now);
  if (inadmissible) return inadmissible;
  const wl = ev.workload;
  const admitted = wl !== undefined && conditionOf(wl, "Admitted")?.status === "True";
  if (admitted || (!wl && !suspended)) return undefined;
  const cqName = String(objectOr(ev.localQueue?.spec).clusterQueue ?? "");
  if (!wl) return noWorkloadYet(ev, queue ?? "");
  const reserved = conditionOf(wl, "QuotaReserved");
  const holding = reserved?.status === "True";
  // Evicted with its quota still reserved: a phantom reservation (verdict.ts), not a wait in the queue.
  if (holding && conditionOf(wl, "Evicted")?.status === "True") return undefined;
  const evidence = [...waitEvidence(ev, wl, queue ?? "", cqName, now), ...quotaEvidence(ev, cqName)];
  return { reason: "queued", ...waitWords(ev, wl, queue ?? "", holding, now), evidence };
}

function waitWords(ev: ExplainEvidence, wl: KubeObject, queue: string, holding: boolean, now: Date): { summary: string; next: string } {
  const cqName = String(objectOr(ev.localQueue?.spec).clusterQueue ?? "");
  if (holding)
    return {
      summary: `quota reserved in ClusterQueue ${cqName}, waiting for admission checks`,
      next: `see the Workload's admissionChecks (kubectl get workload -n ${ev.ref.namespace} ${nameOf(wl)} -o yaml)`,
    };
  const since = secondsSince(conditionOf(wl, "QuotaReserved")?.lastTransitionTime ?? objectOr(wl.metadata).creationTimestamp, now);
  const position = ev.position?.inClusterQueue;
  return {
    summary: `waiting in LocalQueue ${queue} (ClusterQueue ${cqName}) for quota${since !== undefined ? ` for ${duration(since)}` : ""}${position !== undefined ? `, position ${position}` : ""}`,
    next: `wait for the workloads ahead to finish, or free quota in ClusterQueue ${cqName}: raise its nominalQuota or borrowingLimit, lower the job's GPUs, or give it a higher WorkloadPriorityClass`,
  };
}

/** The quota a workload reserves, per flavor and resource, as evidence. */
export function reservationText(wl: KubeObject): string {
  const assignments = objectOr(objectOr(wl.status).admission).podSetAssignments;
  const parts: string[] = [];
  for (const a of Array.isArray(assignments) ? (assignments as unknown[]) : []) {
    if (!isObject(a)) continue;
    const flavors = objectOr(a.flavors);
    for (const [r, q] of Object.entries(objectOr(a.resourceUsage))) parts.push(`${String(q)} ${r} in flavor ${String(flavors[r] ?? "?")}`);
  }
  const cq = String(objectOr(objectOr(wl.status).admission).clusterQueue ?? "");
  return `${parts.join(", ") || "quota"} reserved${cq ? ` in ClusterQueue ${cq}` : ""}`;
}
