/**
 * @module
 * `quartermaster doctor`: every check over one snapshot of the cluster, the exit code (0 healthy,
 * 1 warnings, 2 critical) and the two output forms (a table like `reconcile --dry-run`, or JSON).
 */
import type { Policy } from "../policy/types.js";
import { checkMutatingPolicy } from "./admission-policy.js";
import { checkConfinement } from "./confinement.js";
import { checkDeviceClasses } from "./device-classes.js";
import { checkRuntimes } from "./runtimes.js";
import { checkKueue } from "./kueue.js";
import { checkLedger } from "./ledger.js";
import { checkAccess } from "./rbac.js";
import { checkReconciler, schedulePeriodSeconds } from "./reconciler.js";
import { isUnreadable, worst, type DoctorSnapshot, type DoctorFinding } from "./types.js";
import { checkWebhooks } from "./webhooks.js";

export interface DoctorReport {
  /** "healthy" when nothing is worse than info. */
  status: "healthy" | "warning" | "critical";
  exitCode: 0 | 1 | 2;
  findings: DoctorFinding[];
}

export function exitCode(findings: readonly DoctorFinding[]): 0 | 1 | 2 {
  const w = worst(findings.map((f) => f.severity));
  return w === "critical" ? 2 : w === "warning" ? 1 : 0;
}

/** Every finding for `snapshot`, in a fixed order (webhooks, certificates, selectors, reconciler, ledger, RBAC, confinement, Kueue, the exported MutatingAdmissionPolicy, DeviceClasses). */
export function diagnose(snapshot: DoctorSnapshot, policy: Policy): DoctorReport {
  const cronJob = isUnreadable(snapshot.reconciler) ? undefined : snapshot.reconciler.cronJob;
  const findings = [
    ...checkWebhooks(snapshot, policy),
    ...checkReconciler(snapshot),
    ...checkLedger(snapshot.ledger, {
      now: snapshot.now,
      namespace: snapshot.namespace,
      periodSeconds: cronJob ? schedulePeriodSeconds(cronJob.spec, snapshot.now) : undefined,
      reconcilerHasSucceeded: Boolean(cronJob?.status?.lastSuccessfulTime),
    }),
    ...checkAccess(snapshot.access),
    ...checkConfinement(snapshot.confinement, policy, snapshot.namespace),
    ...checkKueue(snapshot.kueue, snapshot.webhookConfigurations, policy, snapshot.namespace),
    ...checkMutatingPolicy(snapshot.mutatingPolicy, policy, snapshot.namespace),
    ...checkDeviceClasses(snapshot.deviceClasses, policy),
    ...checkRuntimes(snapshot.runtimes, policy),
  ];
  return report(findings);
}

export function report(findings: DoctorFinding[]): DoctorReport {
  const code = exitCode(findings);
  return { status: code === 2 ? "critical" : code === 1 ? "warning" : "healthy", exitCode: code, findings };
}

/** The report when the cluster could not be read at all. */
export function unreachable(error: string): DoctorReport {
  return report([
    {
      check: "cluster",
      severity: "critical",
      subject: "apiserver",
      message: `cannot read the cluster: ${error}`,
      fix: "check --kubeconfig, the current context and that the apiserver is reachable",
    },
  ]);
}

/**
 * An aligned table (SEVERITY CHECK SUBJECT FINDING), each fix on its own line under its finding, and a
 * summary line.
 */
export function findingsTable(r: DoctorReport): string {
  const rows = [["SEVERITY", "CHECK", "SUBJECT", "FINDING"], ...r.findings.map((f) => [f.severity, f.check, f.subject, f.message])];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const indent = " ".repeat(widths.slice(0, 3).reduce((a, w) => a + w + 2, 0));
  const lines: string[] = [];
  rows.forEach((row, i) => {
    lines.push(row.map((c, j) => (j === row.length - 1 ? c : c.padEnd(widths[j]!))).join("  "));
    const fix = i > 0 ? r.findings[i - 1]!.fix : "";
    if (fix) lines.push(`${indent}fix: ${fix}`);
  });
  const counts = (["critical", "warning", "info", "ok"] as const).map((s) => `${s} ${r.findings.filter((f) => f.severity === s).length}`);
  lines.push("", `${r.status} (exit ${r.exitCode}): ${counts.join(", ")}`);
  return lines.join("\n");
}
