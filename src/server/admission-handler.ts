/**
 * @module
 * One admission handler type, and the cross-cutting concerns of the admission path as wrappers around it.
 *
 * An {@link AdmissionHandler} is a webhook (review in → result out, `admission/handler.ts`) plus the points
 * where the server reports what became of a request: answered (with the time from body received to answer
 * written), refused with an HTTP error, or a large body parsed again on the main thread. The bare handler
 * ({@link admissionHandler}) reports nowhere; {@link withMetrics} and {@link withLogging} each add one
 * concern and hand every call on to the handler they wrap. They are composed where the webhooks are wired
 * (`app.ts`, `createRequestListener`), so the listener itself deals with HTTP only: checks, body, turns,
 * the answer's bytes.
 */
import type { Logger } from "pino";
import type { FailureMode, Webhook, WebhookResult } from "../admission/handler.js";
import type { AdmissionMetrics } from "./metrics.js";

export interface AdmissionHandler {
  readonly name: string;
  readonly failureMode: FailureMode;
  /** The webhook's own `admit`: the result at once, or a promise when a rule needs I/O. */
  admit(body: unknown): WebhookResult | Promise<WebhookResult>;
  /** The answer for `result` is written, `seconds` after the request's body began to be handled. */
  answered(result: WebhookResult, seconds: number): void;
  /** The request is refused with `status` and `message` (not an AdmissionReview answer); `cause` is what was thrown. */
  refused(refusal: { status: number; message: string }, cause: unknown): void;
  /** A large body's stand-in document did not decide it: the body is parsed again on the main thread (`parse.ts`). */
  parsedAgain(): void;
}

/** The webhook as a handler that reports nowhere. */
export function admissionHandler(webhook: Webhook): AdmissionHandler {
  return {
    name: webhook.name,
    failureMode: webhook.failureMode,
    admit: (body) => webhook.admit(body),
    answered() {},
    refused() {},
    parsedAgain() {},
  };
}

/** Adds the admission metrics (`metrics.ts`): durations and outcomes, refusals, bodies parsed again. */
export function withMetrics(handler: AdmissionHandler, metrics: AdmissionMetrics): AdmissionHandler {
  return {
    ...handler,
    answered(result, seconds) {
      metrics.observe(handler.name, result, seconds);
      handler.answered(result, seconds);
    },
    refused(refusal, cause) {
      metrics.rejected(handler.name, refusal.status);
      handler.refused(refusal, cause);
    },
    parsedAgain() {
      metrics.parsedAgain(handler.name);
      handler.parsedAgain();
    },
  };
}

/**
 * Adds the log lines: one per admission answered (at info; an error's, and one with violations admitted
 * under audit, whatever the level), one per refusal (warn; error for a 5xx).
 */
export function withLogging(handler: AdmissionHandler, log: Logger): AdmissionHandler {
  return {
    ...handler,
    answered(result, seconds) {
      // Audited violations are always recorded, whatever the log level.
      if (result.outcome === "error" || log.isLevelEnabled("info") || result.policyViolations.some((v) => v.mode === "audit"))
        logAdmission(log, handler, result, seconds);
      handler.answered(result, seconds);
    },
    refused(refusal, cause) {
      if (refusal.status >= 500) log.error({ err: cause, webhook: handler.name }, "admission request failed");
      else log.warn({ webhook: handler.name, status: refusal.status, reason: refusal.message }, "admission request refused");
      handler.refused(refusal, cause);
    },
  };
}

/** `value` when it is a non-empty string. */
function text(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function logAdmission(log: Logger, webhook: Pick<Webhook, "name" | "failureMode">, result: WebhookResult, seconds: number): void {
  const r = result.request;
  // The object is the client's: its metadata may hold anything but strings (an object without a
  // toString, say), and the log line must be written all the same.
  const meta = (r.object?.metadata ?? r.oldObject?.metadata) as { name?: unknown; generateName?: unknown } | undefined;
  const generateName = text(meta?.generateName);
  const admitted = result.policyViolations.filter((v) => v.mode !== "deny");
  // One flat object (pino leaves out the undefined fields): this line is written for every admission.
  const fields = {
    webhook: webhook.name,
    uid: r.uid,
    kind: r.kind.kind,
    namespace: r.namespace,
    name: text(r.name) ?? text(meta?.name) ?? (generateName ? `${generateName}*` : undefined),
    operation: r.operation,
    dryRun: r.dryRun === true,
    outcome: result.outcome,
    patchOps: result.patchOps,
    warnings: result.warnings,
    deniedRules: result.deniedRules.length > 0 ? result.deniedRules : undefined,
    // Violations admitted under warn or audit (src/validate/enforcement.ts), each with its rule and field.
    // With the value the rule compared (a count: GPUs, replicas), where it has one: what an audit is for.
    admittedViolations:
      admitted.length > 0 ? admitted.map((v) => ({ rule: v.rule, mode: v.mode, field: v.field, message: v.message, value: v.value })) : undefined,
    skipReason: result.skipReason || undefined,
    err: result.error,
    durationMs: Math.round(seconds * 1e6) / 1e3,
  };
  if (result.outcome === "error") {
    log.error(fields, `admission rule failed; ${webhook.failureMode === "allow" ? "allowed" : "denied"}`);
  } else if (admitted.some((v) => v.mode === "audit")) {
    log.warn(fields, "admission: policy violations admitted (audit)");
  } else {
    log.info(fields, "admission");
  }
}
