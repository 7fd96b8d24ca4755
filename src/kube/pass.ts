/**
 * @module
 * One reconcile pass against the cluster: snapshot (paged LISTs, namespaces included) → plan (pure,
 * `src/reconcile/plan.ts`, scoped by `namespaceScope` of Quartermaster's namespace: writes only in namespaces
 * the webhooks serve, every other job listed as skipped) → apply, `reconciler.concurrency` calls in flight. Claims first (a fresh GET of the job before its first adoption,
 * refusing a job that is being deleted or was replaced), then Services, then uid-preconditioned deletes (pods and
 * Services before jobs), then the Events that say so on each job,
 * then the ledger. The job controller's decisions (kinds Quartermaster runs, `src/kube/job-controller.ts`) are
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
import type { Cluster } from "./cluster.js";
import { projectJob } from "./projection.js";
import { applyJobControllers, describeControllerPlan } from "./job-controller.js";
import { applyLedgerWrites, readLedgerConfigMaps, type LedgerWriteReport } from "./ledger.js";
import type { PolicyReportClient, ReportSyncResult } from "./policy-reports.js";

type Action = ClaimAction | DeleteAction | CreateServiceAction;

export interface PassReport {
  plan: Plan;
  /** `verb Kind namespace/name` of every change made. */
  applied: string[];
  skipped: Array<{ action: string; why: string }>;
  failed: Array<{ action: string; error: string }>;
  ledger?: LedgerWriteReport;
  /** The PolicyReports written, with `reconciler.policyReports` (src/kube/policy-reports.ts). */
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

export async function snapshot(cluster: Cluster, policy: Policy, namespace: string, log: Logger): Promise<Snapshot> {
  // The namespaces first: a job outside the scope is kept as its stub (./projection.ts), page by page, so the
  // pass holds no tenant's job of a namespace that never opted in. The plan decides the scope from the same list.
  const namespaces = await cluster.listNamespaces();
  const scoped = scopeIndex(namespaceScope(namespace), namespaces);
  const project = (o: object): KubeObject => asKubeObject(projectJob(o, (ns) => scoped(ns).inScope));
  const jobs: Snapshot["jobs"] = [];
  for (const kind of policy.jobKinds) {
    const list = await cluster.listJobs(kind, project);
    if (list === undefined) {
      log.info({ kind: `${kind.group}/${kind.kind}` }, "job kind not installed (no CRD); skipped");
      continue;
    }
    for (const job of list) jobs.push({ kind, job });
  }
  // Kueue first: its flavors name the node labels the listing keeps. Its absence (404) is no error; a failure
  // (RBAC not yet granting the lists) costs the ledger its Kueue section, never the pass.
  let kueue: Snapshot["kueue"];
  let kueueProblem: string | undefined;
  try {
    kueue = await cluster.listKueue?.();
  } catch (err) {
    kueueProblem = `Kueue's ResourceFlavors and ClusterQueues could not be listed (${errorMessage(err)}): the ledger has no section per flavor this pass`;
    log.warn({ err }, "reconcile: cannot list Kueue's flavors and queues");
  }
  const [pods, services, nodes, nodeLeases, ledger, resourceSlices, resourceClaims] = await Promise.all([
    cluster.listPods(),
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
  };
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

export async function runPass(opts: PassOptions): Promise<PassReport> {
  const { cluster, policy, log } = opts;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  const snap = await snapshot(cluster, policy, opts.namespace, log);
  const now = opts.now();
  const inFlight = opts.expectations?.observe(snap.pods, snap.services, now);
  const plan = planPass(snap, now, policy, namespaceScope(opts.namespace), {
    ...(inFlight ? { inFlight } : {}),
    ...(opts.maxDeletions !== undefined ? { maxDeletions: opts.maxDeletions } : {}),
  });
  const report: PassReport = { plan, applied: [], skipped: [], failed: [], events: 0, apiCalls: 0, durationMs: 0, cpuMs: 0 };
  for (const p of plan.problems) log.warn({ problem: p }, "reconcile: cannot act");
  const outcomes: JobEventOutcome[] = [];

  /** Runs one API call for an action and files its result; `done` is what the call resolved with. */
  const attempt = async <R>(
    a: Action,
    call: () => Promise<R>,
    judge: (r: R) => string | undefined,
    outcome?: Omit<JobEventOutcome, "why" | "object">,
  ): Promise<void> => {
    try {
      const r = await call();
      const skip = judge(r);
      if (skip) {
        report.skipped.push({ action: describeAction(a), why: skip });
        return;
      }
      report.applied.push(describeAction(a));
      if (outcome) outcomes.push({ ...outcome, object: a.name, why: a.reason });
      log.info({ action: `${a.verb} ${a.kind}`, namespace: a.namespace, name: a.name, result: r, job: a.job }, `reconcile: ${a.verb}`);
    } catch (err) {
      report.failed.push({ action: describeAction(a), error: errorMessage(err) });
      log.error({ err, action: `${a.verb} ${a.kind}`, namespace: a.namespace, name: a.name }, `reconcile: ${a.verb} failed`);
    }
  };

  if (!opts.dryRun) {
    // CanAdopt: once per job and pass, a fresh read of the job; its answer holds for all its adoptions.
    const canAdopt = new Map<string, Promise<string | undefined>>();
    const recheck = (c: ClaimAction): Promise<string | undefined> => {
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
    const width = policy.reconciler.concurrency;
    await inParallel(plan.claims, width, async (c) => {
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
        c,
        () => cluster.patch(c, c.patch),
        (r) => (r === "gone" ? "the object is gone" : r === "invalid" ? "the object was replaced or has another controller (422)" : undefined),
        event,
      );
    });
    // The job controller (kinds Quartermaster runs): after the adoptions, before the other writes.
    const controlled = await applyJobControllers({
      cluster,
      plans: plan.controller,
      ...(opts.expectations ? { expectations: opts.expectations } : {}),
      now: opts.now,
      log,
      width,
      events: policy.reconciler.events,
    });
    report.applied.push(...controlled.applied);
    report.skipped.push(...controlled.skipped);
    report.failed.push(...controlled.failed);
    report.events += controlled.events;
    await inParallel(plan.creates, width, (c) =>
      attempt(
        c,
        () => cluster.createService(c.namespace, c.body),
        () => undefined,
      ),
    );
    // Pods and Services before jobs (capDeletions ordered them so): a job goes only after its pods' deletes returned.
    const [objects, jobs] = [plan.actions.filter((d) => d.kind !== "Job"), plan.actions.filter((d) => d.kind === "Job")];
    for (const group of [objects, jobs]) {
      await inParallel(group, width, (d) => {
        const event = { namespace: d.namespace, job: d.job, jobKind: d.jobKind, jobUid: d.jobUid, reason: DELETE_REASON[d.kind] };
        return attempt(
          d,
          () => cluster.delete(d),
          (r) => (r === "changed" ? "the object was replaced (uid changed)" : undefined),
          event,
        );
      });
    }
    if (policy.reconciler.events) {
      for (const e of jobEvents(outcomes, now)) {
        try {
          await cluster.createEvent(String((e.metadata as { namespace: string }).namespace), e);
          report.events++;
        } catch (err) {
          // An Event is a courtesy: its failure is logged, never the pass's.
          log.warn({ err, reason: (e as KubeObject & { reason?: string }).reason }, "reconcile: could not record an Event");
        }
      }
    }
    report.ledger = await applyLedgerWrites(cluster, opts.namespace, plan.ledgerWrites);
    for (const f of report.ledger.failed) {
      report.failed.push({ action: `write ConfigMap ${opts.namespace}/${f.name}`, error: f.error });
      log.error({ configMap: f.name, error: f.error }, "reconcile: ledger write failed");
    }
    if (policy.reconciler.policyReports && opts.policyReports) {
      const { syncPolicyReports } = await import("./policy-reports.js");
      try {
        report.policyReports = await syncPolicyReports({ client: opts.policyReports, policy, ownNamespace: opts.namespace, log, now: opts.now });
        for (const f of report.policyReports.failed) report.failed.push({ action: `write PolicyReport ${f.report}`, error: f.error });
      } catch (err) {
        report.failed.push({ action: "write PolicyReports", error: errorMessage(err) });
        log.error({ err }, "reconcile: policy reports failed");
      }
    }
  }
  report.apiCalls = cluster.calls;
  report.durationMs = Math.round(performance.now() - started);
  const cpu = process.cpuUsage(cpuBefore);
  report.cpuMs = Math.round((cpu.user + cpu.system) / 1000);
  log.info(
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
  return report;
}
