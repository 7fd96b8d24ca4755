/**
 * @module
 * One reconcile pass against the cluster: snapshot (paged LISTs) → plan (pure) → apply (uid-preconditioned
 * deletes). NotFound counts as done and a changed uid as skipped; one failure does not stop the others.
 * Ends with one summary log line.
 */
import type { Logger } from "pino";
import { errorMessage } from "../errors.js";
import { LABEL_JOB_NAME } from "../keys.js";
import type { Policy } from "../policy/types.js";
import type { Cluster } from "../kube/cluster.js";
import type { DeleteAction } from "./finished.js";
import { planPass, type Plan, type Snapshot } from "./plan.js";

export interface PassReport {
  plan: Plan;
  created: string[];
  applied: DeleteAction[];
  skipped: Array<{ action: DeleteAction; why: string }>;
  failed: Array<{ verb: "create" | "delete"; kind: string; namespace: string; name: string; error: string }>;
  apiCalls: number;
  durationMs: number;
}

export async function snapshot(cluster: Cluster, policy: Policy, log: Logger): Promise<Snapshot> {
  const jobs: Snapshot["jobs"] = [];
  for (const kind of policy.jobKinds) {
    const list = await cluster.listJobs(kind);
    if (list === undefined) {
      log.info({ kind: `${kind.group}/${kind.kind}` }, "job kind not installed (no CRD); skipped");
      continue;
    }
    for (const job of list) jobs.push({ kind, job });
  }
  const [pods, services] = await Promise.all([cluster.listPods(LABEL_JOB_NAME), cluster.listServices(LABEL_JOB_NAME)]);
  return { jobs, pods, services };
}

function countByKind(actions: ReadonlyArray<{ kind: string }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of actions) out[a.kind] = (out[a.kind] ?? 0) + 1;
  return out;
}

export async function runPass(opts: { cluster: Cluster; policy: Policy; log: Logger; now: () => Date; dryRun: boolean }): Promise<PassReport> {
  const { cluster, policy, log } = opts;
  const started = performance.now();
  const snap = await snapshot(cluster, policy, log);
  const plan = planPass(snap, opts.now(), policy);
  const report: PassReport = { plan, created: [], applied: [], skipped: [], failed: [], apiCalls: 0, durationMs: 0 };
  for (const p of plan.problems) log.warn({ problem: p }, "reconcile: cannot act");
  if (!opts.dryRun) {
    for (const c of plan.creates) {
      try {
        const r = await cluster.createService(c.namespace, c.body);
        report.created.push(`${c.namespace}/${c.name}`);
        log.info({ action: "create Service", namespace: c.namespace, name: c.name, job: c.job, result: r }, "reconcile: created");
      } catch (err) {
        report.failed.push({ verb: "create", kind: "Service", namespace: c.namespace, name: c.name, error: errorMessage(err) });
        log.error({ err, action: "create Service", namespace: c.namespace, name: c.name }, "reconcile: create failed");
      }
    }
    for (const action of plan.actions) {
      try {
        const r = await cluster.delete({ kind: action.kind, jobKind: action.jobKind, namespace: action.namespace, name: action.name, uid: action.uid });
        if (r === "changed") report.skipped.push({ action, why: "the object was replaced (uid changed)" });
        else {
          report.applied.push(action);
          log.info({ action: `delete ${action.kind}`, namespace: action.namespace, name: action.name, job: action.job, reason: action.reason, result: r }, "reconcile: deleted");
        }
      } catch (err) {
        report.failed.push({ verb: "delete", kind: action.kind, namespace: action.namespace, name: action.name, error: errorMessage(err) });
        log.error({ err, action: `delete ${action.kind}`, namespace: action.namespace, name: action.name }, "reconcile: delete failed");
      }
    }
  }
  report.apiCalls = cluster.calls;
  report.durationMs = Math.round(performance.now() - started);
  log.info(
    {
      dryRun: opts.dryRun,
      jobs: snap.jobs.length,
      pods: snap.pods.length,
      planned: countByKind(plan.actions),
      servicesPlanned: plan.creates.length,
      servicesCreated: report.created.length,
      applied: countByKind(report.applied),
      skipped: countByKind(report.skipped.map((s) => s.action)),
      failed: countByKind(report.failed),
      deferred: plan.deferred.length,
      apiCalls: report.apiCalls,
      durationMs: report.durationMs,
    },
    "reconcile pass",
  );
  return report;
}

/** The plan as a table, for `--dry-run`. */
export function planTable(plan: Plan): string {
  const rows = [
    ["ACTION", "KIND", "NAMESPACE", "NAME", "JOB", "REASON"],
    ...plan.creates.map((c) => ["create", c.kind, c.namespace, c.name, c.job, c.reason]),
    ...plan.actions.map((a) => ["delete", a.kind, a.namespace, a.name, a.job, a.reason]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "));
  if (plan.deferred.length > 0) lines.push(`(${plan.deferred.length} more deletions deferred to later passes by reconciler.maxDeletionsPerPass)`);
  if (plan.actions.length === 0 && plan.creates.length === 0) lines.push("(nothing to do)");
  return lines.join("\n");
}
