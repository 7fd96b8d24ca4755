/**
 * @module
 * One reconcile pass as a pure function: `(snapshot, now, policy) → actions`. Level-based: it looks only at
 * the state in the snapshot, so a pass killed halfway is simply finished by the next one.
 */
import type { KubeObject } from "../admission/types.js";
import type { JobKind, Policy } from "../policy/types.js";
import { capDeletions, controlledBy, planFinishedJob, type DeleteAction } from "./finished.js";
import { planReplicaServices, type CreateServiceAction } from "./services.js";

export interface Snapshot {
  jobs: Array<{ kind: JobKind; job: KubeObject }>;
  pods: KubeObject[];
  services: KubeObject[];
}

export interface Plan {
  /** Services to create (never capped: creating is not destructive). */
  creates: CreateServiceAction[];
  /** What this pass deletes, within the deletion cap. */
  actions: DeleteAction[];
  /** What the cap leaves for later passes. */
  deferred: DeleteAction[];
  problems: string[];
}

/** Objects grouped by the uid of their controller ownerReference. */
function byController(objects: readonly KubeObject[]): Map<string, KubeObject[]> {
  const out = new Map<string, KubeObject[]>();
  for (const o of objects) {
    const uid = ((o.metadata as { ownerReferences?: Array<{ uid?: string; controller?: boolean }> } | undefined)?.ownerReferences ?? []).find((r) => r.controller)?.uid;
    if (!uid) continue;
    const list = out.get(uid);
    if (list) list.push(o);
    else out.set(uid, [o]);
  }
  return out;
}

export function planPass(snapshot: Snapshot, now: Date, policy: Policy): Plan {
  const pods = byController(snapshot.pods);
  const services = byController(snapshot.services);
  const all: DeleteAction[] = [];
  const creates: CreateServiceAction[] = [];
  const problems: string[] = [];
  for (const { kind, job } of snapshot.jobs) {
    const uid = String((job.metadata as { uid?: string } | undefined)?.uid ?? "");
    const own = pods.get(uid) ?? [];
    const plan = planFinishedJob(job, kind, own, services.get(uid) ?? [], now, policy);
    all.push(...plan.actions);
    problems.push(...plan.problems);
    // A Service of the pod's name that someone else owns still blocks ours: never create over it.
    if (policy.reconciler.perReplicaServices) creates.push(...planReplicaServices(job, kind, controlledBy(job, own), snapshot.services));
  }
  const { now: actions, deferred } = capDeletions(all, policy.reconciler.maxDeletionsPerPass);
  return { creates, actions, deferred, problems };
}
