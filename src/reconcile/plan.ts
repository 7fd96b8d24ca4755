/**
 * @module
 * One reconcile pass as a pure function: `(snapshot, now, policy, scope) → actions + ledger`. Level-based: it
 * looks only at the state in the snapshot, so a pass killed halfway is simply finished by the next one.
 *
 * Which jobs it acts for: those in namespaces of Quartermaster's scope (`src/core/scope.ts`, the same definition the
 * webhook configurations' `namespaceSelector` is rendered from; a namespace the listing did not show is out of
 * scope) and not managed by another controller (`spec.runPolicy.managedBy` set to anything but
 * `kubeflow.org/training-operator`, as upstream leaves those to e.g. MultiKueue). Every other job is listed in
 * `skipped` with the reason, and no write of the pass (claims, Services, deletes, Events) concerns it.
 *
 * Jobs of kinds Quartermaster controls (`jobKinds[].controller`, Caffe2Job by default) get the job
 * controller's decision (`job-controller.ts`: pods, Services, restarts, status) instead of the per-replica
 * Services below; their claims and finished-job cleanup are as for every other kind.
 *
 * Per job acted for: claim its pods and services by its kind's label scheme (adopt orphans that match, release
 * what stopped matching), create the per-replica Services it lacks (for the pods it owns and those it adopts
 * now: creating is not destructive; none for a job the training operator serves, see `./services.ts`), and clean it up when finished (only objects it already controlled before
 * this pass: an orphan it adopts now is cleaned up by the next pass, after the adoption has really happened).
 * Deletions are capped per pass, the job controller's and these together (`capControllerDeletes`, `capDeletions`:
 * GPU holders first, then round-robin across namespaces). Then
 * the device ledger over every node and pod of the cluster, whatever the scope (it only reads), and the
 * ConfigMap writes that store it in Quartermaster's own namespace.
 */
import type { KubeObject } from "../core/kube.js";
import { quartermasterControls, type JobKind, type Policy } from "../policy/types.js";
import { scopeIndex, type NamespaceInfo, type NamespaceScope } from "../core/scope.js";
import { jobShape, KEY_LABELS, labelScheme, TRAINING_OPERATOR_MANAGER } from "../kinds/index.js";
import { claim, controllerUid, type ClaimAction } from "./claim.js";
import { capDeletions, planFinishedJob, type DeleteAction } from "./finished.js";
import { buildLedger, type Ledger } from "../ledger/compute.js";
import type { KueueObjects } from "../ledger/kueue-quota.js";
import { planLedgerWrites, readStored, shardLedger, type LedgerWrite, type StoredConfigMap } from "../ledger/shards.js";
import { decideJob, type Decision, type InFlight } from "./job-controller.js";
import { planReplicaServices, serviceKeys, type CreateServiceAction } from "./services.js";

export { TRAINING_OPERATOR_MANAGER };

export interface Snapshot {
  /** Every namespace (name and labels): the scope is decided from them. */
  namespaces: NamespaceInfo[];
  jobs: Array<{ kind: JobKind; job: KubeObject }>;
  /** Every pod of the cluster (the ledger needs them all; claims look at those of each job's namespace). */
  pods: KubeObject[];
  services: KubeObject[];
  nodes: KubeObject[];
  /** Leases of `kube-node-lease`. */
  nodeLeases: KubeObject[];
  /** ResourceSlices and ResourceClaims (`resource.k8s.io/v1`) for the device ledger; absent or empty without DRA. */
  resourceSlices?: KubeObject[];
  resourceClaims?: KubeObject[];
  /** The ledger's ConfigMaps as read, by name. */
  ledger: ReadonlyMap<string, StoredConfigMap>;
  /** Kueue's ResourceFlavors and ClusterQueues, when its API is served (the nodes then carry the flavors' label keys). */
  kueue?: KueueObjects;
  /** Why Kueue's objects could not be listed (reported as a problem; the ledger goes without its Kueue section). */
  kueueProblem?: string;
}

/** A job the pass does nothing for, and why. */
export interface Skipped {
  kind: string;
  namespace: string;
  name: string;
  why: string;
}

/** Quartermaster's job controller's decision for one job of a kind it controls. */
export interface ControllerPlan {
  kind: JobKind;
  namespace: string;
  name: string;
  uid: string;
  /** The job's resourceVersion as listed: the precondition of its status and annotation patches. */
  resourceVersion?: string;
  decision: Decision;
}

export interface PlanOptions {
  /** What the job controller has in flight per job uid (`Expectations.observe`); none: nothing. */
  inFlight?: (jobUid: string) => InFlight;
  /** The pass's deletion budget when not `reconciler.maxDeletionsPerPass` (a resident reconciler's budget left). */
  maxDeletions?: number;
}

export interface Plan {
  /** The job controller's decisions, for jobs of kinds Quartermaster controls (`jobKinds[].controller`). */
  controller: ControllerPlan[];
  /** Adoptions and releases (never capped: they change only ownerReferences). */
  claims: ClaimAction[];
  /** Services to create (never capped: creating is not destructive). */
  creates: CreateServiceAction[];
  /** What this pass deletes for finished jobs, within the deletion cap (the controller's are in `controller`). */
  actions: DeleteAction[];
  /** What the cap leaves for later passes (the hygiene's and the job controller's). */
  deferred: DeleteAction[];
  /** Jobs left alone: out of scope, or managed by another controller. */
  skipped: Skipped[];
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

const orphanKey = (namespace: string | undefined, label: string, value: string): string => `${namespace}\0${label}\0${value}`;

/**
 * The candidates a job can claim, found without scanning every object per job: those whose controller is
 * the job (by uid), and the orphans of its namespace carrying its scheme's key label with its value (the
 * selector needs it).
 */
function candidateIndex(objects: readonly KubeObject[]): { byController: Index; orphans: Index } {
  const byController: Index = new Map();
  const orphans: Index = new Map();
  for (const o of objects) {
    const owner = controllerUid(o);
    if (owner) push(byController, owner, o);
    else {
      const m = o.metadata as { namespace?: string; labels?: Record<string, string> } | undefined;
      const labels = m?.labels;
      if (!labels) continue;
      for (const label of KEY_LABELS) {
        const value = labels[label];
        if (value !== undefined) push(orphans, orphanKey(m?.namespace, label, value), o);
      }
    }
  }
  return { byController, orphans };
}

/**
 * Why the job is left to another controller, or undefined when it is its operator's (and ours): v1
 * `spec.runPolicy.managedBy` other than `kubeflow.org/training-operator`, TrainJob `spec.managedBy` other than
 * `trainer.kubeflow.org/trainjob-controller` (the kind's shape, `src/kinds/`). Without `kind`, as a v1 kind.
 */
export function managedElsewhere(job: KubeObject, kind: Pick<JobKind, "framework"> = { framework: "pytorch" }): string | undefined {
  return jobShape(kind).managedElsewhere(job);
}

type CandidateIndex = ReturnType<typeof candidateIndex>;

/** What the pass's jobs are planned into (the accumulators), and what planning one reads. */
interface JobsPass {
  now: Date;
  policy: Policy;
  opts: PlanOptions;
  pods: CandidateIndex;
  services: CandidateIndex;
  existingServices: ReturnType<typeof serviceKeys>;
  controller: ControllerPlan[];
  claims: ClaimAction[];
  deletions: DeleteAction[];
  creates: CreateServiceAction[];
  problems: string[];
}

type JobMeta = { uid?: string; name?: string; namespace?: string };

/**
 * Quartermaster runs this kind's jobs (its Services included): the job controller's decision, with the pods
 * and Services it owns and those it adopts now (orphans adopted now count as its own).
 */
function controlJob(pass: JobsPass, entry: Snapshot["jobs"][number], owned: { pods: KubeObject[]; services: KubeObject[] }): void {
  const { job, kind } = entry;
  const m = (job.metadata ?? {}) as JobMeta & { resourceVersion?: string };
  const uid = String(m.uid ?? "");
  const decision = decideJob({
    job,
    kind,
    pods: owned.pods,
    services: owned.services,
    now: pass.now,
    clusterDomain: pass.policy.clusterSpec.clusterDomain,
    allowedTemplates: pass.policy.reconciler.allowedTemplates,
    ...(pass.opts.inFlight ? { inFlight: pass.opts.inFlight(uid) } : {}),
  });
  pass.problems.push(...decision.problems);
  const rv = m.resourceVersion;
  pass.controller.push({ kind, namespace: String(m.namespace ?? ""), name: String(m.name ?? ""), uid, ...(rv ? { resourceVersion: rv } : {}), decision });
}

/**
 * One job in scope: its pods and Services claimed (adopted or released), the hygiene of a finished job, then
 * the job controller's decision for a kind Quartermaster controls, else the per-replica Services (a Service of
 * the pod's name that someone else owns still blocks ours: never create over it).
 */
function planJob(pass: JobsPass, entry: Snapshot["jobs"][number]): void {
  const { job, kind } = entry;
  const m = (job.metadata ?? {}) as JobMeta;
  const uid = String(m.uid ?? "");
  const scheme = labelScheme(kind);
  const key = orphanKey(m.namespace, scheme.key.label, scheme.key.value(job));
  const candidates = (index: CandidateIndex) => [...(index.byController.get(uid) ?? []), ...(index.orphans.get(key) ?? [])];
  // A scheme whose pods belong to others (JobSet's Jobs, for a TrainJob) is never claimed: nothing adopted or released.
  const none = { actions: [], owned: [], adopted: [] };
  const p = scheme.claimed ? claim(job, kind, "Pod", candidates(pass.pods)) : none;
  const s = scheme.claimed ? claim(job, kind, "Service", candidates(pass.services)) : none;
  pass.claims.push(...p.actions, ...s.actions);
  const finished = planFinishedJob({ job, kind, pods: p.owned, services: s.owned, now: pass.now, policy: pass.policy });
  pass.deletions.push(...finished.actions);
  pass.problems.push(...finished.problems);
  if (quartermasterControls(kind)) return controlJob(pass, entry, { pods: [...p.owned, ...p.adopted], services: [...s.owned, ...s.adopted] });
  if (pass.policy.reconciler.perReplicaServices) pass.creates.push(...planReplicaServices(job, kind, [...p.owned, ...p.adopted], pass.existingServices));
}

/**
 * Per-job isolation: whatever one job's decision throws is that job's problem, never the pass's: what it
 * planned is taken back and the other jobs go on.
 */
function planJobIsolated(pass: JobsPass, entry: Snapshot["jobs"][number]): void {
  const before = { claims: pass.claims.length, deletions: pass.deletions.length, creates: pass.creates.length, controller: pass.controller.length };
  try {
    planJob(pass, entry);
  } catch (err) {
    pass.claims.length = before.claims;
    pass.deletions.length = before.deletions;
    pass.creates.length = before.creates;
    pass.controller.length = before.controller;
    const m = (entry.job.metadata ?? {}) as JobMeta;
    pass.problems.push(
      `${m.namespace}/${entry.kind.kind}/${m.name}: deciding this job failed (${err instanceof Error ? err.message : String(err)}); nothing done for it this pass, the other jobs go on`,
    );
  }
}

/** The ledger of the pass, the writes that store it, and the stored ledger's problems ("no ledger yet" is the first pass, not a problem). */
function planLedger(
  snapshot: Snapshot,
  now: Date,
  policy: Policy,
  jobKeys: ReadonlySet<string>,
  trainJobs: ReadonlySet<string>,
): Pick<Plan, "ledger" | "ledgerWrites" | "ledgerCorrupt" | "problems"> {
  const stored = readStored(snapshot.ledger);
  const ledger = buildLedger(
    {
      nodes: snapshot.nodes,
      nodeLeases: snapshot.nodeLeases,
      pods: snapshot.pods,
      jobs: jobKeys,
      trainJobs,
      previous: stored.ledger,
      ...(snapshot.resourceSlices ? { resourceSlices: snapshot.resourceSlices } : {}),
      ...(snapshot.resourceClaims ? { resourceClaims: snapshot.resourceClaims } : {}),
      ...(snapshot.kueue ? { kueue: snapshot.kueue } : {}),
    },
    now,
    policy,
  );
  const ledgerWrites = planLedgerWrites(shardLedger(ledger, policy.reconciler.ledgerShardBytes), snapshot.ledger);
  const problems = [...(stored.index || stored.corrupt.length > 0 ? stored.problems : []), ...(snapshot.kueueProblem ? [snapshot.kueueProblem] : [])];
  return { ledger, ledgerWrites, ledgerCorrupt: stored.corrupt, problems };
}

export function planPass(snapshot: Snapshot, now: Date, policy: Policy, scope: NamespaceScope, opts: PlanOptions = {}): Plan {
  const pass: JobsPass = {
    now,
    policy,
    opts,
    pods: candidateIndex(snapshot.pods),
    services: candidateIndex(snapshot.services),
    existingServices: serviceKeys(snapshot.services),
    controller: [],
    claims: [],
    deletions: [],
    creates: [],
    problems: [],
  };
  const verdict = scopeIndex(scope, snapshot.namespaces);
  const skipped: Skipped[] = [];
  const jobKeys = new Set<string>();
  const trainJobs = new Set<string>();
  for (const entry of snapshot.jobs) {
    const m = (entry.job.metadata ?? {}) as JobMeta;
    jobKeys.add(`${m.namespace}/${m.name}`);
    if (jobShape(entry.kind).layout === "runtime") trainJobs.add(`${m.namespace}/${m.name}`);
    const inScope = verdict(String(m.namespace ?? ""));
    const why = !inScope.inScope ? inScope.why : managedElsewhere(entry.job, entry.kind);
    if (why) skipped.push({ kind: entry.kind.kind, namespace: String(m.namespace ?? ""), name: String(m.name ?? ""), why });
    else planJobIsolated(pass, entry);
  }
  const capped = capControllerDeletes(pass.deletions, pass.controller, opts.maxDeletions ?? policy.reconciler.maxDeletionsPerPass);
  const ledger = planLedger(snapshot, now, policy, jobKeys, trainJobs);
  const problems = [...pass.problems, ...ledger.problems];
  return {
    controller: capped.controller,
    claims: pass.claims,
    creates: pass.creates,
    actions: capped.actions,
    deferred: capped.deferred,
    skipped,
    problems,
    ledger: ledger.ledger,
    ledgerWrites: ledger.ledgerWrites,
    ledgerCorrupt: ledger.ledgerCorrupt,
  };
}

/**
 * One deletion budget (`max`) for the hygiene deletes (finished jobs: CleanPodPolicy, TTL) and the job
 * controller's (restarts by recreation, scale-down, suspend, a failed job's cleanup) together, in
 * `capDeletions`' order (GPU holders first, round-robin across namespaces, jobs last). DECIDE: one budget
 * shared, not one each: `maxDeletionsPerPass` bounds what a pass can delete, whoever decided it. An object
 * both plan to delete (a failed job's pods under CleanPodPolicy All) counts once, as the controller's. Each
 * controller plan keeps only its deletes within the budget, and its restart counter counts only the restart
 * deletes kept (a deferred restart is decided again, and counted, when it is sent). What is deferred waits for
 * the next pass or event: the decisions are level-based, so they come back.
 */
export function capControllerDeletes(
  hygiene: readonly DeleteAction[],
  controller: readonly ControllerPlan[],
  max: number,
): { actions: DeleteAction[]; deferred: DeleteAction[]; controller: ControllerPlan[] } {
  const id = (d: DeleteAction): string => `${d.kind}/${d.namespace}/${d.name}`;
  const fromController = controller.flatMap((p) => p.decision.deletes);
  const planned = new Set(fromController.map(id));
  const ownHygiene = hygiene.filter((d) => !planned.has(id(d)));
  const { now, deferred } = capDeletions([...fromController, ...ownHygiene], Math.max(0, max));
  const kept = new Set<DeleteAction>(now);
  const plans = controller.map((p): ControllerPlan => {
    const d = p.decision;
    if (d.deletes.every((x) => kept.has(x))) return p;
    const deletes = d.deletes.filter((x) => kept.has(x));
    const decision: Decision = { ...d, deletes };
    delete decision.restarts;
    if (d.restarts !== undefined) {
      const planned = d.deletes.filter((x) => x.restart).length;
      const sent = deletes.filter((x) => x.restart).length;
      if (sent > 0) decision.restarts = d.restarts - planned + sent;
    }
    return { ...p, decision };
  });
  const mine = new Set<DeleteAction>(fromController);
  return { actions: now.filter((d) => !mine.has(d)), deferred, controller: plans };
}
