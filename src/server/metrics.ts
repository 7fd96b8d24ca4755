/**
 * @module
 * Prometheus metrics of the admission server, on a registry the caller owns (no global default
 * registry, so tests and several servers in one process never collide).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { WebhookResult } from "../admission/handler.js";
import { registerLedgerMetrics, type LedgerReading } from "../reconcile/metrics.js";
import type { ConnectionCounts, ShedReason } from "./connections.js";

export interface AdmissionMetrics {
  readonly registry: Registry;
  observe(webhook: string, result: WebhookResult, seconds: number): void;
  /** A request refused before it reached a webhook (bad method, type, size, JSON or envelope). */
  rejected(webhook: string, status: number): void;
  /** A large body parsed off-thread was parsed again on the event loop: its stand-in arrays did not decide its answer (`parse.ts`). */
  parsedAgain(webhook: string): void;
  /** A key pair was loaded (at start or by a reload). */
  certificateLoaded(notAfter: Date): void;
  /** A key pair was not loaded: `reason` is the `result` label (expired, not_yet_valid, mismatch, unreadable). */
  certificateReloadFailed(reason: string): void;
  /** One job lookup on the admission path (the pod mutation's topology, the job validation's old object). */
  jobLookup(result: JobLookupResult, seconds: number): void;
  /** A TLS connection on the webhook port finished its handshake; `protocol` is what ALPN settled on. */
  connectionOpened(protocol: "h2" | "http/1.1"): void;
  /** The connection guard closed a connection on `port` (`webhook` or `metrics`) to make room, or for idling (`connections.ts`). */
  connectionShed(port: "webhook" | "metrics", reason: ShedReason): void;
  /** The webhook port's open connections by state, read at scrape time. */
  trackConnections(counts: () => ConnectionCounts): void;
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

export function createAdmissionMetrics(opts: {
  timeoutSeconds: number;
  processMetrics?: boolean;
  now?: () => number;
  /** The device ledger's index as last read (the capacity check's); its gauges are exported when given. */
  ledger?: () => LedgerReading | undefined;
}): AdmissionMetrics {
  const now = opts.now ?? Date.now;
  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });
  if (opts.ledger) registerLedgerMetrics(registry, opts.ledger);
  const registers = [registry];
  const { lookups, duration, patches, patchOps, denials, warnings, violations, errors, parsedAgain } = admissionInstruments(registers, opts.timeoutSeconds);
  const tls = tlsInstruments(registers, now);
  const { connections, shed, track: trackOpen } = connectionInstruments(registers);

  return {
    registry,
    connectionOpened(protocol) {
      connections.inc({ protocol });
    },
    connectionShed(port, reason) {
      shed.inc({ port, reason });
    },
    trackConnections(counts) {
      trackOpen(counts);
    },
    observe(webhook, r, seconds) {
      duration.observe({ webhook, operation: r.request.operation, outcome: r.outcome }, seconds);
      if (r.patchOps > 0) {
        patches.inc({ webhook });
        patchOps.inc({ webhook }, r.patchOps);
      }
      for (const rule of r.deniedRules) denials.inc({ webhook, rule });
      for (const v of r.policyViolations) violations.inc({ webhook, rule: v.rule, mode: v.mode });
      if (r.warnings > 0) warnings.inc({ webhook }, r.warnings);
      if (r.outcome === "error") errors.inc({ webhook, type: "rule" });
    },
    rejected(webhook, status) {
      errors.inc({ webhook, type: String(status) });
    },
    parsedAgain(webhook) {
      parsedAgain.inc({ webhook });
    },
    certificateLoaded(notAfter) {
      tls.loaded(notAfter);
    },
    certificateReloadFailed(reason) {
      tls.reloads.inc({ result: reason });
    },
    jobLookup(result, seconds) {
      lookups.observe({ result }, seconds);
    },
  };
}

/** How one job lookup on the admission path was answered (the `result` label of the lookup histogram). */
export type JobLookupResult = "hit" | "hit_refreshing" | "fetched" | "not_found" | "error" | "timeout";

/** Buckets for job lookups: a cache hit is microseconds, an apiserver GET milliseconds, up to the lookup timeout. */
export const JOB_LOOKUP_BUCKETS = [0.00001, 0.0001, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

type Registers = Registry[];

/** The admission path's instruments: lookups, durations, patches, verdicts, errors. */
function admissionInstruments(registers: Registers, timeoutSeconds: number) {
  const lookups = new Histogram({
    name: "quartermaster_job_lookup_duration_seconds",
    help: "Job lookups on the admission path by result: hit (answered from the cache), hit_refreshing (from the cache while the copy is re-read in the background), fetched (read from the apiserver), not_found, error, timeout.",
    labelNames: ["result"] as const,
    buckets: JOB_LOOKUP_BUCKETS,
    registers,
  });
  const duration = new Histogram({
    name: "quartermaster_admission_duration_seconds",
    help: "Time from request body received to response written, by webhook, operation and outcome.",
    labelNames: ["webhook", "operation", "outcome"] as const,
    buckets: latencyBuckets(timeoutSeconds),
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
  const violations = new Counter({
    name: "quartermaster_policy_violations_total",
    help: "Policy violations found at admission, by webhook, rule and enforcement mode (deny: refused; warn: admitted with a warning; audit: admitted and logged).",
    labelNames: ["webhook", "rule", "mode"] as const,
    registers,
  });
  const errors = new Counter({
    name: "quartermaster_admission_errors_total",
    help: "Requests that failed: 'rule' (a rule threw; failure mode applied) or the HTTP status of a refused request.",
    labelNames: ["webhook", "type"] as const,
    registers,
  });
  const parsedAgain = new Counter({
    name: "quartermaster_admission_bodies_parsed_again_total",
    help: "Large bodies parsed off the event loop and then parsed again on it, because the worker's document (long arrays as stand-ins) did not decide their answer.",
    labelNames: ["webhook"] as const,
    registers,
  });
  return { lookups, duration, patches, patchOps, denials, warnings, violations, errors, parsedAgain };
}

/** The serving certificate: its expiry (a timestamp, and days left at scrape time) and its reloads. */
function tlsInstruments(registers: Registers, now: () => number) {
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
    reloads: certReloads,
    loaded: (notAfter: Date): void => {
      certExpiry.set(notAfter.getTime() / 1000);
      notAfterMs = notAfter.getTime();
      certReloads.inc({ result: "ok" });
    },
  };
}

/** The webhook port's connections: handshakes by protocol, sheds by reason, open ones by state. */
function connectionInstruments(registers: Registers) {
  const connections = new Counter({
    name: "quartermaster_tls_connections_total",
    help: "TLS connections (handshakes) on the webhook port, by the protocol ALPN settled on: h2 or http/1.1.",
    labelNames: ["protocol"] as const,
    registers,
  });

  const shed = new Counter({
    name: "quartermaster_connections_shed_total",
    help: "Connections the server closed to make room or for idling, by port and reason: per_source (its source address had the most allowed), handshaking (too many unfinished TLS handshakes), capacity (the port was full), idle (no admission request for the keep-alive time).",
    labelNames: ["port", "reason"] as const,
    registers,
  });
  let connectionCounts: (() => ConnectionCounts) | undefined;
  new Gauge({
    name: "quartermaster_connections_open",
    help: "Open connections on the webhook port, by state: handshaking (TLS not done), idle, active (a request in flight).",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const counts = connectionCounts?.();
      if (counts) for (const state of Object.keys(counts) as Array<keyof ConnectionCounts>) this.set({ state }, counts[state]);
    },
  });

  return {
    connections,
    shed,
    track: (counts: () => ConnectionCounts): void => {
      connectionCounts = counts;
    },
  };
}
