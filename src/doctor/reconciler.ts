/**
 * @module
 * Checks of the reconciler's CronJob: present and not suspended, its last successful pass no older than
 * its schedule allows, and its last finished pass not a failure. A stalled reconciler is never an
 * outage (finished jobs keep their GPUs longer), so nothing here is worse than a warning.
 */
import { CronExpressionParser } from "cron-parser";
import type { CronJob, DoctorSnapshot, DoctorFinding, Job } from "./types.js";
import { isUnreadable } from "./types.js";

export const RECONCILER_NAME = "quartermaster-reconciler";

/** Passes that may be missed before it is a warning: one tick can be skipped by concurrencyPolicy Forbid. */
export const MISSED_PASSES_WARNING = 2;

/** Scheduled times in (from, to], oldest first, at most `limit`; undefined if the schedule does not parse. */
export function scheduledBetween(cron: Pick<CronJob["spec"], "schedule" | "timeZone">, from: Date, to: Date, limit = 1000): Date[] | undefined {
  if (to <= from) return [];
  try {
    const it = CronExpressionParser.parse(cron.schedule, { currentDate: from, endDate: to, tz: cron.timeZone ?? "UTC" });
    const out: Date[] = [];
    while (out.length < limit && it.hasNext()) out.push(it.next().toDate());
    return out.filter((d) => d > from && d <= to);
  } catch {
    return undefined;
  }
}

/** The gap between the two scheduled runs before `now`, in seconds (the schedule's period there). */
export function schedulePeriodSeconds(cron: Pick<CronJob["spec"], "schedule" | "timeZone">, now: Date): number | undefined {
  try {
    const it = CronExpressionParser.parse(cron.schedule, { currentDate: now, tz: cron.timeZone ?? "UTC" });
    const a = it.prev().toDate();
    const b = it.prev().toDate();
    return (a.getTime() - b.getTime()) / 1000;
  } catch {
    return undefined;
  }
}

export function humanAge(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

function finishedCondition(job: Job): { type: "Complete" | "Failed"; reason?: string; message?: string } | undefined {
  const c = (job.status?.conditions ?? []).find((c) => (c.type === "Complete" || c.type === "Failed") && c.status === "True");
  return c ? { type: c.type as "Complete" | "Failed", reason: c.reason, message: c.message } : undefined;
}

export function checkReconciler(s: DoctorSnapshot): DoctorFinding[] {
  const subject = `CronJob ${s.namespace}/${RECONCILER_NAME}`;
  if (isUnreadable(s.reconciler)) {
    return [
      {
        check: "reconciler",
        severity: "warning",
        subject,
        message: `not checked: ${s.reconciler.error}`,
        fix: "run doctor with read access to cronjobs and jobs in Quartermaster's namespace",
      },
    ];
  }
  const { cronJob, jobs, resident } = s.reconciler;
  if (!cronJob && resident) return checkResident(s.namespace, resident);
  if (!cronJob) {
    return [
      {
        check: "reconciler",
        severity: "warning",
        subject,
        message: "not found: finished jobs keep their pods and GPUs, and the device ledger is not written",
        fix: "kubectl apply -k manifests/base (or your overlay)",
      },
    ];
  }
  const out: DoctorFinding[] = [];
  if (cronJob.spec.suspend) {
    out.push({
      check: "reconciler",
      severity: "warning",
      subject,
      message: "suspended: no passes run",
      fix: `kubectl -n ${s.namespace} patch cronjob ${RECONCILER_NAME} -p '{"spec":{"suspend":false}}'`,
    });
  }
  out.push(...checkSchedule(s, cronJob, subject), ...checkLatestPass(s.namespace, cronJob, jobs));
  return out;
}

/** The resident-reconciler overlay: one process scheduling its own passes, which only its logs show. */
function checkResident(namespace: string, resident: { replicas: number; readyReplicas: number }): DoctorFinding[] {
  const dep = `Deployment ${namespace}/${RECONCILER_NAME}`;
  return resident.readyReplicas > 0
    ? [
        {
          check: "reconciler",
          severity: "ok",
          subject: dep,
          message: `resident reconciler running (${resident.readyReplicas}/${resident.replicas} ready); its passes are in its logs`,
          fix: "",
        },
      ]
    : [
        {
          check: "reconciler",
          severity: "warning",
          subject: dep,
          message: `resident reconciler has no ready replica (${resident.replicas} wanted): no passes run`,
          fix: `kubectl -n ${namespace} describe deployment ${RECONCILER_NAME}; kubectl -n ${namespace} logs deployment/${RECONCILER_NAME}`,
        },
      ];
}

/** Passes the schedule owed since the last success (or the CronJob's creation): none missed, a few, or many. */
function checkSchedule(s: DoctorSnapshot, cronJob: CronJob, subject: string): DoctorFinding[] {
  const spec = cronJob.spec;
  // A pass may legitimately still be starting or running this long after its scheduled time.
  const graceSeconds = (spec.startingDeadlineSeconds ?? 0) + (spec.jobTemplate?.spec?.activeDeadlineSeconds ?? 0);
  const lastSuccess = cronJob.status?.lastSuccessfulTime ? new Date(cronJob.status.lastSuccessfulTime) : undefined;
  const created = cronJob.metadata.creationTimestamp ? new Date(cronJob.metadata.creationTimestamp) : undefined;
  const since = lastSuccess ?? created;
  const missed = since ? scheduledBetween(spec, since, new Date(s.now.getTime() - graceSeconds * 1000)) : [];
  if (missed === undefined)
    return [
      {
        check: "reconciler",
        severity: "warning",
        subject,
        message: `schedule ${JSON.stringify(spec.schedule)} does not parse`,
        fix: "give the CronJob a standard five-field cron schedule",
      },
    ];
  if (spec.suspend) return [];
  const age = since ? humanAge((s.now.getTime() - since.getTime()) / 1000) : "?";
  if (missed.length >= MISSED_PASSES_WARNING) {
    const count = missed.length >= 1000 ? "1000+" : String(missed.length);
    return [
      {
        check: "reconciler",
        severity: "warning",
        subject,
        message: lastSuccess
          ? `last successful pass ${age} ago; ${count} scheduled passes since (schedule ${spec.schedule})`
          : `no successful pass since it was created ${age} ago; ${count} scheduled passes since (schedule ${spec.schedule})`,
        fix: `kubectl -n ${s.namespace} get jobs; kubectl -n ${s.namespace} logs job/<the latest> (or run one now: kubectl -n ${s.namespace} create job --from=cronjob/${RECONCILER_NAME} ${RECONCILER_NAME}-manual)`,
      },
    ];
  }
  return lastSuccess
    ? [{ check: "reconciler", severity: "ok", subject, message: `last successful pass ${age} ago (schedule ${spec.schedule})`, fix: "" }]
    : [{ check: "reconciler", severity: "info", subject, message: `no pass has succeeded yet (created ${age} ago, schedule ${spec.schedule})`, fix: "" }];
}

/** A warning when the CronJob's latest finished Job failed. */
function checkLatestPass(namespace: string, cronJob: CronJob, jobs: readonly Job[]): DoctorFinding[] {
  const owned = jobs.filter((j) => !cronJob.metadata.uid || (j.metadata.ownerReferences ?? []).some((o) => o.uid === cronJob.metadata.uid));
  const latestFinished = owned
    .map((job) => ({ job, done: finishedCondition(job) }))
    .filter((x) => x.done !== undefined)
    .sort((a, b) => Date.parse(b.job.metadata.creationTimestamp ?? "") - Date.parse(a.job.metadata.creationTimestamp ?? ""))[0];
  if (latestFinished?.done?.type !== "Failed") return [];
  const why = [latestFinished.done.reason, latestFinished.done.message].filter(Boolean).join(": ");
  return [
    {
      check: "reconciler",
      severity: "warning",
      subject: `Job ${namespace}/${latestFinished.job.metadata.name}`,
      message: `the latest finished pass failed${why ? ` (${why})` : ""}`,
      fix: `kubectl -n ${namespace} logs job/${latestFinished.job.metadata.name}`,
    },
  ];
}
