/**
 * @module
 * Prometheus metrics of the admission server, on a registry the caller owns (no global default
 * registry, so tests and several servers in one process never collide).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { WebhookResult } from "../admission/handler.js";

export interface AdmissionMetrics {
  readonly registry: Registry;
  observe(webhook: string, result: WebhookResult, seconds: number): void;
  /** A request refused before it reached a webhook (bad method, type, size, JSON or envelope). */
  rejected(webhook: string, status: number): void;
  /** A key pair was loaded (at start or by a reload). */
  certificateLoaded(notAfter: Date): void;
  /** A key pair was not loaded: `reason` is the `result` label (expired, not_yet_valid, mismatch, unreadable). */
  certificateReloadFailed(reason: string): void;
}

/**
 * Histogram buckets from 0.5 ms up to the webhook timeout, so the slow tail the apiserver gives up on
 * is still visible in its own bucket (Gatekeeper #4036 lost it to a 1 s top bucket).
 */
export function latencyBuckets(timeoutSeconds: number): number[] {
  const base = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30];
  const buckets = base.filter((b) => b < timeoutSeconds);
  buckets.push(timeoutSeconds);
  return buckets;
}

export function createAdmissionMetrics(opts: { timeoutSeconds: number; processMetrics?: boolean; now?: () => number }): AdmissionMetrics {
  const now = opts.now ?? Date.now;
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const duration = new Histogram({
    name: "quartermaster_admission_duration_seconds",
    help: "Time from request body received to response written, by webhook, operation and outcome.",
    labelNames: ["webhook", "operation", "outcome"] as const,
    buckets: latencyBuckets(opts.timeoutSeconds),
    registers,
  });
  const patches = new Counter({
    name: "quartermaster_admission_patches_total",
    help: "Admission responses that carried a JSON patch.",
    labelNames: ["webhook"] as const,
    registers,
  });
  const patchOps = new Counter({
    name: "quartermaster_admission_patch_operations_total",
    help: "JSON patch operations sent.",
    labelNames: ["webhook"] as const,
    registers,
  });
  const denials = new Counter({
    name: "quartermaster_admission_denials_total",
    help: "Denials, by the rule that caused them (a denial citing two rules counts once for each).",
    labelNames: ["webhook", "rule"] as const,
    registers,
  });
  const warnings = new Counter({
    name: "quartermaster_admission_warnings_total",
    help: "Warnings returned to clients.",
    labelNames: ["webhook"] as const,
    registers,
  });
  const errors = new Counter({
    name: "quartermaster_admission_errors_total",
    help: "Requests that failed: 'rule' (a rule threw; failure mode applied) or the HTTP status of a refused request.",
    labelNames: ["webhook", "type"] as const,
    registers,
  });
  const certExpiry = new Gauge({
    name: "quartermaster_tls_certificate_expiry_timestamp_seconds",
    help: "notAfter of the serving certificate in use, as a Unix timestamp.",
    registers,
  });
  let notAfterMs: number | undefined;
  // Days left, computed at scrape time from the same notAfter: what dashboards show and the alerts in
  // manifests/overlays/monitoring compare (under 30 a warning, under 7 critical, as `doctor` does).
  new Gauge({
    name: "quartermaster_tls_certificate_expiry_days",
    help: "Days until the serving certificate in use expires (fractional; negative once expired), computed at scrape time.",
    registers,
    collect() {
      if (notAfterMs !== undefined) this.set((notAfterMs - now()) / 86_400_000);
    },
  });
  const certReloads = new Counter({
    name: "quartermaster_tls_reloads_total",
    help: "Serving key pair loads, by result: ok, or why the pair was refused (expired, not_yet_valid, mismatch, unreadable).",
    labelNames: ["result"] as const,
    registers,
  });

  return {
    registry,
    observe(webhook, r, seconds) {
      duration.observe({ webhook, operation: r.request.operation, outcome: r.outcome }, seconds);
      if (r.patchOps > 0) {
        patches.inc({ webhook });
        patchOps.inc({ webhook }, r.patchOps);
      }
      for (const rule of r.deniedRules) denials.inc({ webhook, rule });
      if (r.warnings > 0) warnings.inc({ webhook }, r.warnings);
      if (r.outcome === "error") errors.inc({ webhook, type: "rule" });
    },
    rejected(webhook, status) {
      errors.inc({ webhook, type: String(status) });
    },
    certificateLoaded(notAfter) {
      certExpiry.set(notAfter.getTime() / 1000);
      notAfterMs = notAfter.getTime();
      certReloads.inc({ result: "ok" });
    },
    certificateReloadFailed(reason) {
      certReloads.inc({ result: reason });
    },
  };
}
