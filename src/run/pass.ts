/**
 * @module
 * One reconcile pass against the cluster: snapshot (paged LISTs, namespaces included) → plan (pure,
 * `src/reconcile/plan.ts`, scoped by `namespaceScope` of Quartermaster's namespace: writes only in namespaces
 * the webhooks serve, every other job listed as skipped) → apply, `reconciler.concurrency` calls in flight. Claims first (a fresh GET of the job before its first adoption,
 * refusing a job that is being deleted or was replaced), then Services, then uid-preconditioned deletes (pods and
 * Services before jobs), then the Events that say so on each job,
 * then the ledger. The job controller's decisions (kinds Quartermaster runs, `src/run/job-controller.ts`) are
 * applied after the claims. NotFound counts as done, a failed precondition as skipped, and one failure does not stop the
 * others. Ends with one summary log line.
 */
import type { Logger } from "pino";
import type { KubeObject } from "../core/kube.js";
import { errorMessage } from "../core/errors.js";
import type { Policy } from "../policy/types.js";
import type { ClaimAction } from "../reconcile/claim.js";
import { jobEvents, type EventReason, type JobEventOutcome } from "../reconcile/events.js";
import type { DeleteAction } from "../reconcile/finished.js";
import { planPass, type Plan, type Snapshot } from "../reconcile/plan.js";
import type { CreateServiceAction } from "../reconcile/services.js";
import { namespaceScope, scopeIndex } from "../core/scope.js";
import { asKubeObject } from "../core/boundary.js";
import { flavorLabelKeys } from "../ledger/kueue-quota.js";
import type { Expectations } from "../reconcile/expectations.js";
import type { Cluster } from "../kube/cluster.js";
import { projectJob } from "../kube/projection.js";
import { applyJobControllers, describeControllerPlan } from "./job-controller.js";
import { applyLedgerWrites, readLedgerConfigMaps, type LedgerWriteReport } from "../kube/ledger.js";
import type { PolicyReportClient, ReportSyncResult } from "./policy-reports.js";
import type { AuditEntry } from "../reconcile/audit.js";

type Action = ClaimAction | DeleteAction | CreateServiceAction;

export interface PassReport {
  plan: Plan;
  /** `verb Kind namespace/name` of every change made. */
  applied: string[];
  skipped: Array<{ action: string; why: string }>;
  failed: Array<{ action: string; error: string }>;
  ledger?: LedgerWriteReport;
  /** The PolicyReports written, with `reconciler.policyReports` (src/run/policy-reports.ts). */
  policyReports?: ReportSyncResult;
  events: number;
  apiCalls: number;
  durationMs: number;
  /**
   * The process's CPU time while the pass ran (user + system), in ms: with `--once` the pass's own, the CLI's
   * start apart; resident (`--watch`), the informers' events handled meanwhile count too.
   */
  cpuMs: number;
}

export interface PassOptions {
  cluster: Cluster;
  policy: Policy;
  log: Logger;
  now: () => Date;
  dryRun: boolean;
  /** Quartermaster's namespace: where the ledger lives; never in scope for the pass's other writes. */
  namespace: string;
  /** Where PolicyReports are read and written, with `reconciler.policyReports` (not in a dry run). */
  policyReports?: PolicyReportClient;
  /** The job controller's expectations, kept across passes by a resident reconciler; none: each pass alone. */
  expectations?: Expectations;
  /** The deletion budget of this pass when not `reconciler.maxDeletionsPerPass` (a resident reconciler's left). */
  maxDeletions?: number;
}

/** A pass's snapshot, with the pods of the namespaces in scope whole when the PolicyReports audit them. */
export interface PassSnapshot extends Snapshot {
  /** The pods of the namespaces in scope, whole but for managedFields: with `wholePods` only. */
  wholePods?: KubeObject[];
}

export async function snapshot(cluster: Cluster, policy: Policy, namespace: string, log: Logger, opts: { wholePods?: boolean } = {}): Promise<PassSnapshot> {
  // The namespaces first: a job outside the scope is kept as its stub (../kube/projection.ts), page by page, so the
  // pass holds no tenant's job of a namespace that never opted in. The plan decides the scope from the same list.
  const namespaces = await cluster.listNamespaces();
  const scoped = scopeIndex(namespaceScope(namespace), namespaces);
  const inScope = (ns: string): boolean => scoped(ns).inScope;
  const jobs = await listProjectedJobs(cluster, policy, inScope, log);
  // Kueue first: its flavors name the node labels the listing keeps.
  const { kueue, kueueProblem } = await listKueue(cluster, log);
  // The PolicyReports' audit reads every field the webhooks validate: it keeps the pods in scope whole from the
  // same LIST (issue 50: one listing per pass).
  const wholePods: KubeObject[] | undefined = opts.wholePods ? [] : undefined;
  const keepWhole = wholePods && ((p: KubeObject): void => void (inScope(namespaceOf(p)) && wholePods.push(withoutManagedFields(p))));
  const [pods, services, nodes, nodeLeases, ledger, resourceSlices, resourceClaims] = await Promise.all([
    cluster.listPods(undefined, keepWhole),
    cluster.listServices(),
    cluster.listNodes(kueue ? flavorLabelKeys(kueue.resourceFlavors) : undefined),
    cluster.listNodeLeases(),
    readLedgerConfigMaps(cluster, namespace),
    cluster.listResourceSlices?.() ?? Promise.resolve([]),
    cluster.listResourceClaims?.() ?? Promise.resolve([]),
  ]);
  return {
    namespaces,
    jobs,
    pods,
    services,
    nodes,
    nodeLeases,
    ledger,
    resourceSlices,
    resourceClaims,
    ...(kueue ? { kueue } : {}),
    ...(kueueProblem ? { kueueProblem } : {}),
    ...(wholePods ? { wholePods } : {}),
  };
}

const namespaceOf = (o: KubeObject): string => String((o.metadata as { namespace?: string } | undefined)?.namespace ?? "");

function withoutManagedFields(o: KubeObject): KubeObject {
  const { managedFields: _managed, ...metadata } = (o.metadata ?? {}) as Record<string, unknown>;
  return { ...o, metadata };
}

/** Every job of every configured kind, a job out of scope as its stub; a kind without its CRD skipped, said. */
async function listProjectedJobs(cluster: Cluster, policy: Policy, inScope: (ns: string) => boolean, log: Logger): Promise<Snapshot["jobs"]> {
  const project = (o: object): KubeObject => asKubeObject(projectJob(o, inScope));
  const jobs: Snapshot["jobs"] = [];
  for (const kind of policy.jobKinds) {
    const list = await cluster.listJobs(kind, project);
    if (list === undefined) {
      log.info({ kind: `${kind.group}/${kind.kind}` }, "job kind not installed (no CRD); skipped");
      continue;
    }
    for (const job of list) jobs.push({ kind, job });
  }
  return jobs;
}

/**
 * Kueue's flavors and queues. Its absence (404) is no error; a failure (RBAC not yet granting the lists) costs
 * the ledger its Kueue section, never the pass.
 */
async function listKueue(cluster: Cluster, log: Logger): Promise<{ kueue?: Snapshot["kueue"]; kueueProblem?: string }> {
  try {
    return { kueue: await cluster.listKueue?.() };
  } catch (err) {
    log.warn({ err }, "reconcile: cannot list Kueue's flavors and queues");
    return {
      kueueProblem: `Kueue's ResourceFlavors and ClusterQueues could not be listed (${errorMessage(err)}): the ledger has no section per flavor this pass`,
    };
  }
}

/** What moved in the shards the plan rewrites: how many entries, and the first few (a steady ledger rewrites none). */
function ledgerChanges(plan: Plan): { changedEntries?: number; changedSample?: string[] } {
  const changed = plan.ledgerWrites.flatMap((w) => (w.verb === "replace" ? (w.changed ?? []) : []));
  return changed.length > 0 ? { changedEntries: changed.length, changedSample: changed.slice(0, 8) } : {};
}

const describeAction = (a: Action): string => `${a.verb} ${a.kind} ${a.namespace}/${a.name}`;

function tally(items: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) {
    const key = i.split(" ").slice(0, 2).join(" ");
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

const DELETE_REASON: Record<DeleteAction["kind"], EventReason> = { Pod: "SuccessfulDeletePod", Service: "SuccessfulDeleteService", Job: "DeletedAfterTTL" };

/** Runs `fn` over `items` with at most `width` in flight; `fn` never throws (failures are filed in the report). */
async function inParallel<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
}

/** What the appliers of one pass share: its options, the report they file into, the outcomes its Events tell. */
interface PassContext {
  opts: PassOptions;
  report: PassReport;
  outcomes: JobEventOutcome[];
}

export async function runPass(opts: PassOptions): Promise<PassReport> {
  const { cluster, policy, log } = opts;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const reportsOn = !opts.dryRun && policy.reconciler.policyReports && opts.policyReports !== undefined;
  const snap = await snapshot(cluster, policy, opts.namespace, log, { wholePods: reportsOn });
  const now = opts.now();
  const inFlight = opts.expectations?.observe(snap.pods, snap.services, now);
  const plan = planPass(snap, now, policy, namespaceScope(opts.namespace), {
    ...(inFlight ? { inFlight } : {}),
    ...(opts.maxDeletions !== undefined ? { maxDeletions: opts.maxDeletions } : {}),
  });
  const report: PassReport = { plan, applied: [], skipped: [], failed: [], events: 0, apiCalls: 0, durationMs: 0, cpuMs: 0 };
  for (const p of plan.problems) log.warn({ problem: p }, "reconcile: cannot act");
  if (!opts.dryRun) await applyPlan({ opts, report, outcomes: [] }, snap, now);
  report.apiCalls = cluster.calls;
  report.durationMs = Math.round(performance.now() - started);
  const cpu = process.cpuUsage(cpuBefore);
  report.cpuMs = Math.round((cpu.user + cpu.system) / 1000);
  logPassSummary(opts, snap, report);
  return report;
}

/**
 * The plan's writes, in order: claims, the job controller, Services, deletes (pods and Services before jobs),
 * the Events that say so, the ledger, then the PolicyReports (over the same snapshot).
 */
async function applyPlan(ctx: PassContext, snap: PassSnapshot, now: Date): Promise<void> {
  const { opts, report } = ctx;
  const { cluster, policy } = opts;
  const { plan } = report;
  const width = policy.reconciler.concurrency;
  await applyClaims(ctx, width);
  // The job controller (kinds Quartermaster runs): after the adoptions, before the other writes.
  await applyControllers(ctx, width);
  await inParallel(plan.creates, width, (c) =>
    attempt(
      ctx,
      c,
      () => cluster.createService(c.namespace, c.body),
      () => undefined,
    ),
  );
  await applyDeletes(ctx, width);
  if (policy.reconciler.events) await recordEvents(ctx, now);
  await applyLedger(ctx);
  if (policy.reconciler.policyReports && opts.policyReports) await applyPolicyReports(ctx, opts.policyReports, snap);
}

/** Runs one API call for an action and files its result; `judge` says why what it resolved with is a skip. */
async function attempt<R>(
  ctx: PassContext,
  a: Action,
  call: () => Promise<R>,
  judge: (r: R) => string | undefined,
  outcome?: Omit<JobEventOutcome, "why" | "object">,
): Promise<void> {
  const { report } = ctx;
  const { log } = ctx.opts;
  try {
    const r = await call();
    const skip = judge(r);
    if (skip) {
      report.skipped.push({ action: describeAction(a), why: skip });
      return;
    }
    report.applied.push(describeAction(a));
    if (outcome) ctx.outcomes.push({ ...outcome, object: a.name, why: a.reason });
    log.info({ action: `${a.verb} ${a.kind}`, namespace: a.namespace, name: a.name, result: r, job: a.job }, `reconcile: ${a.verb}`);
  } catch (err) {
    report.failed.push({ action: describeAction(a), error: errorMessage(err) });
    log.error({ err, action: `${a.verb} ${a.kind}`, namespace: a.namespace, name: a.name }, `reconcile: ${a.verb} failed`);
  }
}

/** CanAdopt: once per job and pass, a fresh read of the job; its answer (why not, or undefined) holds for all its adoptions. */
function adoptionCheck(cluster: Cluster): (c: ClaimAction) => Promise<string | undefined> {
  const canAdopt = new Map<string, Promise<string | undefined>>();
  return (c) => {
    let p = canAdopt.get(c.jobUid);
    if (!p) {
      const name = c.job.slice(c.job.indexOf("/") + 1);
      p = cluster.getJob(c.jobKind, c.namespace, name).then((fresh) => {
        const m = (fresh?.metadata ?? {}) as { uid?: string; deletionTimestamp?: string };
        if (!fresh) return `the job ${c.namespace}/${name} is gone`;
        if (m.uid !== c.jobUid) return `the job ${c.namespace}/${name} was replaced: uid ${m.uid}, wanted ${c.jobUid}`;
        if (m.deletionTimestamp) return `the job ${c.namespace}/${name} is being deleted (since ${m.deletionTimestamp})`;
        return undefined;
      });
      canAdopt.set(c.jobUid, p);
    }
    return p;
  };
}

async function applyClaims(ctx: PassContext, width: number): Promise<void> {
  const { report } = ctx;
  const { cluster } = ctx.opts;
  const recheck = adoptionCheck(cluster);
  await inParallel(report.plan.claims, width, async (c) => {
    const event = {
      namespace: c.namespace,
      job: c.job,
      jobKind: c.jobKind,
      jobUid: c.jobUid,
      reason: `${c.verb === "adopt" ? "Adopted" : "Released"}${c.kind}` as EventReason,
    };
    if (c.verb === "adopt") {
      let refused: string | undefined;
      try {
        refused = await recheck(c);
      } catch (err) {
        report.failed.push({ action: describeAction(c), error: `can't recheck the job: ${errorMessage(err)}` });
        return;
      }
      if (refused) {
        report.skipped.push({ action: describeAction(c), why: refused });
        return;
      }
    }
    await attempt(
      ctx,
      c,
      () => cluster.patch(c, c.patch),
      (r) => (r === "gone" ? "the object is gone" : r === "invalid" ? "the object was replaced or has another controller (422)" : undefined),
      event,
    );
  });
}

async function applyControllers(ctx: PassContext, width: number): Promise<void> {
  const { opts, report } = ctx;
  const controlled = await applyJobControllers({
    cluster: opts.cluster,
    plans: report.plan.controller,
    ...(opts.expectations ? { expectations: opts.expectations } : {}),
    now: opts.now,
    log: opts.log,
    width,
    events: opts.policy.reconciler.events,
  });
  report.applied.push(...controlled.applied);
  report.skipped.push(...controlled.skipped);
  report.failed.push(...controlled.failed);
  report.events += controlled.events;
}

/** Pods and Services before jobs (capDeletions ordered them so): a job goes only after its pods' deletes returned. */
async function applyDeletes(ctx: PassContext, width: number): Promise<void> {
  const { actions } = ctx.report.plan;
  const [objects, jobs] = [actions.filter((d) => d.kind !== "Job"), actions.filter((d) => d.kind === "Job")];
  for (const group of [objects, jobs]) {
    await inParallel(group, width, (d) => {
      const event = { namespace: d.namespace, job: d.job, jobKind: d.jobKind, jobUid: d.jobUid, reason: DELETE_REASON[d.kind] };
      return attempt(
        ctx,
        d,
        () => ctx.opts.cluster.delete(d),
        (r) => (r === "changed" ? "the object was replaced (uid changed)" : undefined),
        event,
      );
    });
  }
}

async function recordEvents(ctx: PassContext, now: Date): Promise<void> {
  const { cluster, log } = ctx.opts;
  for (const e of jobEvents(ctx.outcomes, now)) {
    try {
      await cluster.createEvent(String((e.metadata as { namespace: string }).namespace), e);
      ctx.report.events++;
    } catch (err) {
      // An Event is a courtesy: its failure is logged, never the pass's.
      log.warn({ err, reason: (e as KubeObject & { reason?: string }).reason }, "reconcile: could not record an Event");
    }
  }
}

async function applyLedger(ctx: PassContext): Promise<void> {
  const { opts, report } = ctx;
  report.ledger = await applyLedgerWrites(opts.cluster, opts.namespace, report.plan.ledgerWrites);
  for (const f of report.ledger.failed) {
    report.failed.push({ action: `write ConfigMap ${opts.namespace}/${f.name}`, error: f.error });
    opts.log.error({ configMap: f.name, error: f.error }, "reconcile: ledger write failed");
  }
}

/** The PolicyReports, audited over the pass's own snapshot: its namespaces' scope, its pods whole, its jobs. */
async function applyPolicyReports(ctx: PassContext, client: PolicyReportClient, snap: PassSnapshot): Promise<void> {
  const { opts, report } = ctx;
  const { policy, log } = opts;
  const { auditListed, writePolicyReports } = await import("./policy-reports.js");
  const audit = (): Promise<AuditEntry[]> =>
    Promise.resolve(auditListed(policy, opts.namespace, { namespaces: snap.namespaces, pods: snap.wholePods ?? [], jobs: snap.jobs }));
  try {
    report.policyReports = await writePolicyReports({ client, log, now: opts.now, audit });
    for (const f of report.policyReports.failed) report.failed.push({ action: `write PolicyReport ${f.report}`, error: f.error });
  } catch (err) {
    report.failed.push({ action: "write PolicyReports", error: errorMessage(err) });
    log.error({ err }, "reconcile: policy reports failed");
  }
}

/** The pass's one summary log line. */
function logPassSummary(opts: PassOptions, snap: Snapshot, report: PassReport): void {
  const { plan } = report;
  opts.log.info(
    {
      dryRun: opts.dryRun,
      jobs: snap.jobs.length,
      pods: snap.pods.length,
      nodes: snap.nodes.length,
      planned: tally([...[...plan.claims, ...plan.creates, ...plan.actions].map(describeAction), ...plan.controller.flatMap(describeControllerPlan)]),
      applied: tally(report.applied),
      skipped: tally(report.skipped.map((s) => s.action)),
      failed: tally(report.failed.map((f) => f.action)),
      deferred: plan.deferred.length,
      skippedJobs: plan.skipped.length,
      events: report.events,
      ledger: {
        shardsWritten: report.ledger?.written.length ?? 0,
        ...ledgerChanges(plan),
        corrupt: plan.ledgerCorrupt,
        devices: plan.ledger.totals,
      },
      apiCalls: report.apiCalls,
      durationMs: report.durationMs,
      cpuMs: report.cpuMs,
    },
    "reconcile pass",
  );
}
