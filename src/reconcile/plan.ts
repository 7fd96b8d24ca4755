/**
 * @module
 * One reconcile pass as a pure function: `(snapshot, now, policy) → actions + ledger`. Level-based: it looks
 * only at the state in the snapshot, so a pass killed halfway is simply finished by the next one.
 *
 * Per job: claim its pods and services (adopt orphans that match, release what stopped matching), create the
 * per-replica Services it lacks (for the pods it owns and those it adopts now: creating is not destructive),
 * and clean it up when finished (only objects it already controlled before this pass: an orphan it adopts now
 * is cleaned up by the next pass, after the adoption has really happened). Then the device ledger over every
 * node and pod, and the ConfigMap writes that store it.
 */
import type { KubeObject } from "../admission/types.js";
import type { JobKind, Policy } from "../policy/types.js";
import { claim, controllerUid, type ClaimAction } from "./claim.js";
import { capDeletions, planFinishedJob, type DeleteAction } from "./finished.js";
import { buildLedger, type Ledger } from "./ledger.js";
import { planLedgerWrites, readStored, shardLedger, type LedgerWrite, type StoredConfigMap } from "./ledger-shards.js";
import { planReplicaServices, serviceKeys, type CreateServiceAction } from "./services.js";
import { LABEL_JOB_NAME } from "../keys.js";

export interface Snapshot {
  jobs: Array<{ kind: JobKind; job: KubeObject }>;
  /** Every pod of the cluster (the ledger needs them all; claims look at those of each job's namespace). */
  pods: KubeObject[];
  services: KubeObject[];
  nodes: KubeObject[];
  /** Leases of `kube-node-lease`. */
  nodeLeases: KubeObject[];
  /** The ledger's ConfigMaps as read, by name. */
  ledger: ReadonlyMap<string, StoredConfigMap>;
}

export interface Plan {
  /** Adoptions and releases (never capped: they change only ownerReferences). */
  claims: ClaimAction[];
  /** Services to create (never capped: creating is not destructive). */
  creates: CreateServiceAction[];
  /** What this pass deletes, within the deletion cap. */
  actions: DeleteAction[];
  /** What the cap leaves for later passes. */
  deferred: DeleteAction[];
  problems: string[];
  ledger: Ledger;
  /** The ConfigMap writes that store the ledger: changed shards, the index, surplus shards deleted. */
  ledgerWrites: LedgerWrite[];
  /** Ledger shards found missing or corrupt (rebuilt by this pass). */
  ledgerCorrupt: string[];
}

type Index = Map<string, KubeObject[]>;

function push(index: Index, key: string, o: KubeObject): void {
  const list = index.get(key);
  if (list) list.push(o);
  else index.set(key, [o]);
}

/**
 * The candidates a job can claim, found without scanning every object per job: those whose controller is
 * the job (by uid), and the orphans of its namespace carrying its job-name label (the selector needs it).
 */
function candidateIndex(objects: readonly KubeObject[]): { byController: Index; orphans: Index } {
  const byController: Index = new Map();
  const orphans: Index = new Map();
  for (const o of objects) {
    const owner = controllerUid(o);
    if (owner) push(byController, owner, o);
    else {
      const m = o.metadata as { namespace?: string; labels?: Record<string, string> } | undefined;
      const name = m?.labels?.[LABEL_JOB_NAME];
      if (name !== undefined) push(orphans, `${m?.namespace}/${name}`, o);
    }
  }
  return { byController, orphans };
}

export function planPass(snapshot: Snapshot, now: Date, policy: Policy): Plan {
  const pods = candidateIndex(snapshot.pods);
  const services = candidateIndex(snapshot.services);
  const claims: ClaimAction[] = [];
  const deletions: DeleteAction[] = [];
  const creates: CreateServiceAction[] = [];
  const problems: string[] = [];
  const jobKeys = new Set<string>();
  const existingServices = serviceKeys(snapshot.services);
  for (const { kind, job } of snapshot.jobs) {
    const m = (job.metadata ?? {}) as { uid?: string; name?: string; namespace?: string };
    const uid = String(m.uid ?? "");
    jobKeys.add(`${m.namespace}/${m.name}`);
    const selectorKey = `${m.namespace}/${String(m.name ?? "").replaceAll("/", "-")}`;
    const candidates = (index: ReturnType<typeof candidateIndex>) => [...(index.byController.get(uid) ?? []), ...(index.orphans.get(selectorKey) ?? [])];
    const p = claim(job, kind, "Pod", candidates(pods));
    const s = claim(job, kind, "Service", candidates(services));
    claims.push(...p.actions, ...s.actions);
    const finished = planFinishedJob(job, kind, p.owned, s.owned, now, policy);
    deletions.push(...finished.actions);
    problems.push(...finished.problems);
    // A Service of the pod's name that someone else owns still blocks ours: never create over it.
    if (policy.reconciler.perReplicaServices) creates.push(...planReplicaServices(job, kind, [...p.owned, ...p.adopted], existingServices));
  }
  const { now: actions, deferred } = capDeletions(deletions, policy.reconciler.maxDeletionsPerPass);

  const stored = readStored(snapshot.ledger);
  const ledger = buildLedger({ nodes: snapshot.nodes, nodeLeases: snapshot.nodeLeases, pods: snapshot.pods, jobs: jobKeys, previous: stored.ledger }, now, policy);
  const ledgerWrites = planLedgerWrites(shardLedger(ledger, policy.reconciler.ledgerShardBytes), snapshot.ledger);
  // "No ledger yet" is the first pass, not a problem.
  if (stored.index || stored.corrupt.length > 0) problems.push(...stored.problems);
  return { claims, creates, actions, deferred, problems, ledger, ledgerWrites, ledgerCorrupt: stored.corrupt };
}
