/**
 * @module
 * PolicyReports (`wgpolicyk8s.io/v1alpha2`, the format of kubernetes-sigs/wg-policy-prototypes that
 * policy-reporter reads for Kyverno and Gatekeeper): one per opted-in namespace, built from an audit
 * (src/reconcile/audit.ts), and the plan that brings the cluster's reports to it. Pure; src/run/policy-reports.ts
 * reads and writes.
 *
 * - One result per violation: `policy` the webhook, `rule` the rule, `result` `fail` (mode deny or audit; the
 *   object would be refused, or is recorded) or `warn` (mode warn), the object in `resources`, and
 *   `properties` {field, mode}; one `pass` result per object without a violation.
 * - A report is rewritten whole from the current audit, so a fixed object's entries are gone at the next pass.
 * - Quartermaster's reports are named `quartermaster`, labelled `app.kubernetes.io/managed-by: quartermaster` and
 *   written with the field manager `quartermaster-reconciler`. A report is Quartermaster's when it carries that
 *   label OR its managedFields name that manager (`reportOwned`): a tenant who removes the label neither orphans
 *   the report nor blocks the next write, and that write (the whole report) puts the label back. Only a report
 *   that is Quartermaster's is ever replaced or deleted. A namespace with nothing left to report (no live
 *   object, or no longer in scope) loses its report.
 */
import type { KubeObject } from "../core/kube.js";
import { POLICY_REPORT_API_VERSION, POLICY_REPORT_NAME, RECONCILER_FIELD_MANAGER } from "../core/keys.js";
import type { AuditEntry } from "./audit.js";

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "quartermaster";
/** The label selector of Quartermaster's reports. */
export const OWNED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
/** The field manager of the reports' creates and replaces (recorded by the apiserver in their managedFields). */
export const REPORT_FIELD_MANAGER = RECONCILER_FIELD_MANAGER;
/**
 * Most results in one report: a PolicyReport is one etcd object (1.5 MiB at most) and a result is some 400
 * bytes. Violations come first; past the cap `pass` results are dropped first. The summary counts them all.
 */
export const MAX_RESULTS = 2000;

export type ReportResult = "pass" | "fail" | "warn";

export interface PolicyReportResult {
  policy: string;
  rule: string;
  result: ReportResult;
  message: string;
  source: string;
  scored: boolean;
  timestamp: { seconds: number; nanos: number };
  resources: Array<{ apiVersion: string; kind: string; namespace: string; name: string; uid: string }>;
  properties?: Record<string, string>;
}

export interface PolicyReport extends KubeObject {
  apiVersion: typeof POLICY_REPORT_API_VERSION;
  kind: "PolicyReport";
  metadata: { name: string; namespace: string; labels: Record<string, string>; resourceVersion?: string };
  summary: { pass: number; fail: number; warn: number; error: number; skip: number };
  results: PolicyReportResult[];
}

/** The report of one namespace's audited objects. */
export function buildPolicyReport(namespace: string, entries: readonly AuditEntry[], now: Date): PolicyReport {
  const timestamp = { seconds: Math.floor(now.getTime() / 1000), nanos: 0 };
  const failing: PolicyReportResult[] = [];
  const passing: PolicyReportResult[] = [];
  const summary = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
  for (const e of entries) {
    const resources = [{ apiVersion: e.apiVersion, kind: e.kind, namespace: e.namespace, name: e.name, uid: e.uid }];
    const base = { policy: e.policy, source: "quartermaster", scored: true, timestamp, resources };
    if (e.violations.length === 0) {
      summary.pass++;
      passing.push({ ...base, rule: "all", result: "pass", message: "no violations" });
      continue;
    }
    for (const v of e.violations) {
      const result: ReportResult = v.mode === "warn" ? "warn" : "fail";
      summary[result]++;
      failing.push({ ...base, rule: v.rule, result, message: v.message, properties: { field: v.field, mode: v.mode } });
    }
  }
  return {
    apiVersion: POLICY_REPORT_API_VERSION,
    kind: "PolicyReport",
    metadata: { name: POLICY_REPORT_NAME, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
    summary,
    results: [...failing, ...passing].slice(0, MAX_RESULTS),
  };
}

/** A report as listed in the cluster: where it is, whose it is, its version for a precondition. */
export interface ExistingReport {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  /** The field managers of its managedFields (`fieldManagers`). */
  managers?: readonly string[];
  resourceVersion?: string;
}

/** The distinct `manager` names of an object's `metadata.managedFields` (anything malformed is ignored). */
export function fieldManagers(managedFields: unknown): string[] {
  if (!Array.isArray(managedFields)) return [];
  const out = new Set<string>();
  for (const f of managedFields) {
    const m = f && typeof f === "object" ? (f as { manager?: unknown }).manager : undefined;
    if (typeof m === "string" && m !== "") out.add(m);
  }
  return [...out].sort();
}

/**
 * Whether a listed report is Quartermaster's: it carries `app.kubernetes.io/managed-by: quartermaster`, or
 * Quartermaster's field manager (`quartermaster-reconciler`) wrote some of its fields. The label alone is not
 * enough to rely on: a tenant may remove it, and the report would then be neither updated nor cleaned up.
 */
export function reportOwned(r: Pick<ExistingReport, "labels" | "managers">): boolean {
  return r.labels[MANAGED_BY_LABEL] === MANAGED_BY || (r.managers ?? []).includes(REPORT_FIELD_MANAGER);
}

export interface ReportPlan {
  /** Reports to create (no resourceVersion) or replace (with the one read). */
  put: Array<{ report: PolicyReport; resourceVersion?: string }>;
  /** Quartermaster's reports in namespaces with nothing left to report. */
  delete: Array<{ namespace: string; name: string; resourceVersion?: string }>;
  /** Namespaces whose `quartermaster` report is someone else's (no label, not written by Quartermaster): left alone. */
  skipped: Array<{ namespace: string; why: string }>;
}

/**
 * What to write: a report for each namespace with audited objects, and the deletion of Quartermaster's
 * report in every other namespace (nothing left, or out of scope). `existing` are the reports named
 * `quartermaster`; which are Quartermaster's is `reportOwned`'s (the label, or the field manager). A replace
 * writes the whole report, label included, so a report found by its manager alone gets its label back.
 */
export function planPolicyReports(entries: readonly AuditEntry[], existing: readonly ExistingReport[], now: Date): ReportPlan {
  const byNamespace = new Map<string, AuditEntry[]>();
  for (const e of entries) byNamespace.set(e.namespace, [...(byNamespace.get(e.namespace) ?? []), e]);
  const current = new Map(existing.filter((r) => r.name === POLICY_REPORT_NAME).map((r) => [r.namespace, r]));
  const plan: ReportPlan = { put: [], delete: [], skipped: [] };
  for (const [namespace, list] of [...byNamespace].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const there = current.get(namespace);
    if (there && !reportOwned(there)) {
      plan.skipped.push({
        namespace,
        why: `PolicyReport ${namespace}/${POLICY_REPORT_NAME} is not labelled ${OWNED_SELECTOR} nor written by field manager ${REPORT_FIELD_MANAGER}: not Quartermaster's, left alone`,
      });
      continue;
    }
    plan.put.push({ report: buildPolicyReport(namespace, list, now), ...(there?.resourceVersion ? { resourceVersion: there.resourceVersion } : {}) });
  }
  for (const r of existing) {
    if (reportOwned(r) && r.name === POLICY_REPORT_NAME && !byNamespace.has(r.namespace)) {
      plan.delete.push({ namespace: r.namespace, name: r.name, ...(r.resourceVersion ? { resourceVersion: r.resourceVersion } : {}) });
    }
  }
  return plan;
}
