/**
 * @module
 * The audit of what already runs: existing pods and training jobs held to the policy's validation rules, as
 * `/validate/pods` and `/validate/jobs` would hold them on CREATE, each violation with its rule's mode in
 * the namespace (src/validate/enforcement.ts). Pure: the caller lists the objects (src/run/policy-reports.ts)
 * and decides the scope. Finished pods (Succeeded, Failed) and jobs, and objects being deleted, are left out:
 * they hold nothing any more. `capacity` is not evaluated (it needs the device ledger at admission time).
 */
import type { KubeObject } from "../core/kube.js";
import type { EnforcementMode, JobKind, Policy } from "../policy/types.js";
import { finishedAt } from "./finished.js";
import { modeOf } from "../validate/enforcement.js";
import { validateJob } from "../validate/job.js";
import { effectiveLimits } from "../validate/limits.js";
import { validatePod } from "../validate/pod.js";
import type { Finding, Findings } from "../validate/types.js";

/** An object to audit: a pod, or a training job of `jobKind`. */
export interface AuditTarget {
  object: KubeObject;
  jobKind?: JobKind;
}

export interface AuditViolation extends Finding {
  mode: EnforcementMode;
}

/** One audited object and what it breaks (nothing, for a compliant one). */
export interface AuditEntry {
  /** The webhook whose rules it was held to. */
  policy: "validate-pods" | "validate-jobs";
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
  violations: AuditViolation[];
}

interface Meta {
  name?: string;
  namespace?: string;
  uid?: string;
  deletionTimestamp?: string;
}

/** Whether the object is still live: not being deleted, not finished. */
export function auditable(t: AuditTarget): boolean {
  const m = (t.object.metadata ?? {}) as Meta;
  if (m.deletionTimestamp) return false;
  if (t.jobKind) return !finishedAt(t.object, t.jobKind).finished;
  const phase = (t.object.status as { phase?: string } | undefined)?.phase;
  return phase !== "Succeeded" && phase !== "Failed";
}

/** Audits one object (already known to be in scope). */
export function auditObject(policy: Policy, t: AuditTarget): AuditEntry {
  const m = (t.object.metadata ?? {}) as Meta;
  const namespace = String(m.namespace ?? "");
  const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace) };
  // A TrainJob is audited on its own part (numNodes × resourcesPerNode): the audit reads no runtimes.
  const found: Findings = t.jobKind ? validateJob(t.object, t.jobKind, ctx) : validatePod(t.object, ctx);
  return {
    policy: t.jobKind ? "validate-jobs" : "validate-pods",
    apiVersion: t.jobKind ? `${t.jobKind.group}/${t.jobKind.version}` : "v1",
    kind: t.jobKind ? t.jobKind.kind : "Pod",
    namespace,
    name: String(m.name ?? ""),
    uid: String(m.uid ?? ""),
    violations: found.violations.map((v) => ({ ...v, mode: modeOf(policy.enforcement, v.rule, namespace) })),
  };
}

/**
 * Every live object of `targets` in a namespace `inScope` accepts, audited; sorted by namespace, kind and
 * name so that reports and tables come out the same for the same cluster.
 */
export function auditObjects(policy: Policy, targets: readonly AuditTarget[], inScope: (namespace: string) => boolean): AuditEntry[] {
  const out: AuditEntry[] = [];
  for (const t of targets) {
    const ns = String(((t.object.metadata ?? {}) as Meta).namespace ?? "");
    if (!inScope(ns) || !auditable(t)) continue;
    out.push(auditObject(policy, t));
  }
  return out.sort((a, b) => cmp(a.namespace, b.namespace) || cmp(a.kind, b.kind) || cmp(a.name, b.name));
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** `quartermaster audit`'s table: one line per violation, then a count. */
export function auditTable(entries: readonly AuditEntry[]): string {
  const rows: string[][] = [["NAMESPACE", "KIND", "NAME", "RULE", "MODE", "FIELD", "MESSAGE"]];
  for (const e of entries) for (const v of e.violations) rows.push([e.namespace, e.kind, e.name, v.rule, v.mode, v.field, v.message]);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  "));
  const failing = entries.filter((e) => e.violations.length > 0).length;
  const count = rows.length - 1;
  const summary = `${entries.length} object${entries.length === 1 ? "" : "s"} audited, ${failing} with violations (${count} violation${count === 1 ? "" : "s"})`;
  return count === 0 ? summary : [...lines, "", summary].join("\n");
}
