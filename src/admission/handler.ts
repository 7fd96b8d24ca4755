/**
 * @module
 * The admission pipeline, independent of HTTP: body in → decode → guard → run the rules → build the
 * response. A webhook built here is a plain function of the review (its result at once, or a promise when
 * a rule needs I/O), so the HTTPS server mounts it and a serverless adapter can host the very same function.
 *
 * Failure modes, documented in docs/http.md and the manifests:
 * - mutating webhooks fail open: a rule that throws lets the pod through unchanged, with a warning;
 * - validating webhooks fail closed: a rule that throws denies the request with the error's message.
 */
import { errorMessage } from "../core/errors.js";
import { describeCost, explainCost, type ReviewCost } from "../core/cost.js";
import { decodeReview, encodeReview } from "./review.js";
import { StandInUndecided } from "../core/stand-in.js";
import { allowed, denied, errored, patched, withWarnings, type DenialStatus, type Violation } from "./response.js";
import type { AdmissionRequest, AdmissionResponse, AdmissionReview } from "./types.js";
import type { KubeObject } from "../core/kube.js";

export type FailureMode = "allow" | "deny";
export type Outcome = "allowed" | "patched" | "denied" | "skipped" | "error";

/** What one admission came to; the server turns this into a log line and metrics. */
export interface WebhookResult {
  review: AdmissionReview;
  request: AdmissionRequest;
  outcome: Outcome;
  patchOps: number;
  warnings: number;
  /**
   * The warnings whole, before the response's cut to 120 characters and ten warnings (the apiserver asks for
   * it; src/admission/response.ts): for `quartermaster admit`, which prints them in full.
   */
  warningTexts?: readonly string[];
  /** Rules that produced violations, once each. */
  deniedRules: string[];
  /** Every policy violation a validating webhook found, with its enforcement mode (denied ones too). */
  policyViolations: PolicyViolation[];
  /** Why the webhook did nothing, for `skipped` (the log line's text; {@link decidedBy} says it by kind). */
  skipReason?: string;
  /**
   * Set when the answer was decided before any rule looked inside the object: by a guard's skip (or a
   * request with no object), by the cost bound (the mutating webhook's skip, the validating webhook's
   * denial), or by the claim-name bound (`claims.ts`: the object left unchanged, or denied). These read a
   * list's length, resource names and claim names only, so they decide a document with stand-in arrays
   * (`stand-in.ts`) exactly; the server answers a large body from them (`server/app.ts`).
   */
  decidedBy?: Decision;
  /** What a rule threw, for `error`. */
  error?: unknown;
}

/** What decided an answer before the rules ran (see {@link WebhookResult.decidedBy}). */
export type Decision = { kind: "guard"; reason: string } | { kind: "no-object" } | { kind: "cost-bound"; cost: ReviewCost } | { kind: "claim-names" };

export interface Webhook {
  readonly name: string;
  readonly failureMode: FailureMode;
  /**
   * Admits one review: at once when no rule needs I/O (the common case), else through a promise.
   * Throws ReviewDecodeError when the body is not an AdmissionReview v1 request.
   */
  admit(body: unknown): WebhookResult | Promise<WebhookResult>;
}

/**
 * Returns why the request is none of this webhook's business, or undefined when it is. The server may run
 * it on a large body's document whose long arrays are stand-ins (`stand-in.ts`) and answer from its skip:
 * it must then give the answer the whole document gets, or throw StandInUndecided.
 */
export type Guard = (request: AdmissionRequest) => string | undefined;

export interface MutationResult {
  /** The mutated object; the very same reference as `request.object` when nothing changed. */
  object: KubeObject;
  warnings: readonly string[];
  /** Set when the policy says to refuse the object instead (e.g. its job could not be read). */
  deny?: Violation;
  /** Set when the object was left unchanged for naming more claims than one review may read ({@link Decision} claim-names). */
  tooManyClaims?: boolean;
}

/** A violation as admitted or denied under its rule's enforcement mode (src/validate/enforcement.ts). */
export interface PolicyViolation extends Violation {
  mode: "deny" | "warn" | "audit";
}

export interface ValidationResult {
  /** The violations that deny. */
  violations: readonly Violation[];
  warnings: readonly string[];
  /** Violations the policy's enforcement lets through (`warn`: their warnings are in `warnings`; `audit`). */
  waived?: readonly PolicyViolation[];
  /** The denial's HTTP code and reason; default 403 Forbidden. */
  status?: DenialStatus;
  /** Set when `violations` is a `review-cost` denial: the rule priced what it would check and found it over the bound. */
  costBound?: ReviewCost;
  /**
   * Set when `violations` is the claim-name bound's denial alone (`claims.ts`, `claimNamesDenial`): decided from the
   * names the object makes the webhook read, before any read or rule, so exactly on a document with stand-ins too.
   */
  tooManyClaims?: boolean;
}

/** Prices a review before its rules run (see `cost.ts`); over the bound, the rules are not run. */
export type Pricer = (request: AdmissionRequest & { object: KubeObject }) => ReviewCost;

export interface MutatingWebhookSpec {
  name: string;
  guard: Guard;
  /** Over its bound, the object is admitted unchanged with a warning. */
  cost?: Pricer;
  mutate(request: AdmissionRequest & { object: KubeObject }): Promise<MutationResult> | MutationResult;
}

export interface ValidatingWebhookSpec {
  name: string;
  guard: Guard;
  /** Over its bound, the object is denied with a message saying so. */
  cost?: Pricer;
  validate(request: AdmissionRequest & { object: KubeObject }): Promise<ValidationResult> | ValidationResult;
}

function result(request: AdmissionRequest, response: AdmissionResponse, fields: Partial<WebhookResult> & { outcome: Outcome }): WebhookResult {
  return {
    review: encodeReview(response),
    request,
    patchOps: 0,
    warnings: response.warnings?.length ?? 0,
    deniedRules: [],
    policyViolations: [],
    ...fields,
  };
}

function hasObject(request: AdmissionRequest): request is AdmissionRequest & { object: KubeObject } {
  return request.object !== null && typeof request.object === "object";
}

/** What a webhook kind does around its rules: their output turned into a result, or their failure. */
interface Rules<T> {
  name: string;
  failureMode: FailureMode;
  guard: Guard;
  cost?: Pricer;
  /** The result for a review over the cost bound, given at once without running the rules. */
  tooCostly(request: AdmissionRequest & { object: KubeObject }, cost: ReviewCost): WebhookResult;
  run(request: AdmissionRequest & { object: KubeObject }): T | Promise<T>;
  /** The result for the rules' output; if this throws, the rules count as failed. */
  finish(request: AdmissionRequest & { object: KubeObject }, out: T): WebhookResult;
  /** The result when the rules threw (the webhook's failure mode). */
  failed(request: AdmissionRequest, error: unknown): WebhookResult;
}

/** Decode, guard, run the rules: at once when they answer synchronously, else when their promise settles. */
function webhook<T>(rules: Rules<T>): Webhook {
  const settle = (request: AdmissionRequest & { object: KubeObject }, out: T): WebhookResult => {
    try {
      return rules.finish(request, out);
    } catch (error) {
      return rules.failed(request, error);
    }
  };
  return {
    name: rules.name,
    failureMode: rules.failureMode,
    admit(body) {
      const request = decodeReview(body);
      if (!hasObject(request)) {
        return result(request, allowed(request.uid), { outcome: "skipped", skipReason: "request carries no object", decidedBy: { kind: "no-object" } });
      }
      const skipReason = rules.guard(request);
      if (skipReason !== undefined) {
        return result(request, allowed(request.uid), { outcome: "skipped", skipReason, decidedBy: { kind: "guard", reason: skipReason } });
      }
      let pending: T | Promise<T>;
      try {
        const cost = rules.cost?.(request);
        if (cost?.over) return rules.tooCostly(request, cost);
        pending = rules.run(request);
      } catch (error) {
        // A document with stand-in arrays the cost bound cannot price (`stand-in.ts`): not a rule's failure.
        if (error instanceof StandInUndecided) throw error;
        return rules.failed(request, error);
      }
      return pending instanceof Promise
        ? pending.then(
            (out: T) => settle(request, out),
            (error: unknown) => rules.failed(request, error),
          )
        : settle(request, pending);
    },
  };
}

/** A mutating webhook: the patch is the diff of the raw request object against what `mutate` returns. */
export function mutatingWebhook(spec: MutatingWebhookSpec): Webhook {
  return webhook<MutationResult>({
    name: spec.name,
    failureMode: "allow",
    guard: spec.guard,
    ...(spec.cost ? { cost: spec.cost } : {}),
    tooCostly(request, cost) {
      const response = withWarnings(allowed(request.uid), [`quartermaster: admitted unchanged: ${describeCost(cost)}`]);
      return result(request, response, {
        outcome: "skipped",
        skipReason: `over the cost bound (${cost.partial ? "at least " : ""}${cost.cost})`,
        decidedBy: { kind: "cost-bound", cost },
      });
    },
    run: (request) => spec.mutate(request),
    finish(request, out) {
      if (out.deny) {
        const response = withWarnings(denied(request.uid, [out.deny]), out.warnings);
        return result(request, response, {
          outcome: "denied",
          deniedRules: [out.deny.rule],
          policyViolations: [{ ...out.deny, mode: "deny" }],
          warningTexts: out.warnings,
        });
      }
      const { response, ops } = patched(request.uid, request.object, out.object);
      return result(request, withWarnings(response, out.warnings), {
        outcome: ops > 0 ? "patched" : "allowed",
        patchOps: ops,
        warningTexts: out.warnings,
        ...(out.tooManyClaims && ops === 0 ? { decidedBy: { kind: "claim-names" } } : {}),
      });
    },
    failed(request, error) {
      const what = request.kind.kind === "Pod" ? "pod" : request.kind.kind;
      const response = withWarnings(allowed(request.uid), [`quartermaster: ${what} admitted unchanged, mutation failed: ${errorMessage(error)}`]);
      return result(request, response, { outcome: "error", error });
    },
  });
}

/** A validating webhook: every violation of every rule at once, or allowed (with warnings). */
export function validatingWebhook(spec: ValidatingWebhookSpec): Webhook {
  return webhook<ValidationResult>({
    name: spec.name,
    failureMode: "deny",
    guard: spec.guard,
    ...(spec.cost ? { cost: spec.cost } : {}),
    tooCostly(request, cost) {
      const violation: Violation = {
        rule: "review-cost",
        field: cost.at?.field ?? "spec",
        message: cost.at ? `${cost.at.why} (${explainCost(cost)})` : `${explainCost(cost)}; split the workload or ask the platform team`,
      };
      return result(request, denied(request.uid, [violation]), {
        outcome: "denied",
        deniedRules: [violation.rule],
        policyViolations: [{ ...violation, mode: "deny" }],
        decidedBy: { kind: "cost-bound", cost },
      });
    },
    run: (request) => spec.validate(request),
    finish(request, out) {
      const policyViolations: PolicyViolation[] = [...out.violations.map((v): PolicyViolation => ({ ...v, mode: "deny" })), ...(out.waived ?? [])];
      if (out.violations.length === 0) {
        return result(request, withWarnings(allowed(request.uid), out.warnings), { outcome: "allowed", policyViolations, warningTexts: out.warnings });
      }
      const deniedRules = [...new Set(out.violations.map((v) => v.rule))];
      const n = out.violations.length;
      const response = withWarnings(
        denied(request.uid, out.violations, out.status ? out.status.reason : `${n} policy violation${n === 1 ? "" : "s"}`, out.status),
        out.warnings,
      );
      return result(request, response, {
        outcome: "denied",
        deniedRules,
        policyViolations,
        warningTexts: out.warnings,
        ...(out.costBound ? { decidedBy: { kind: "cost-bound", cost: out.costBound } } : out.tooManyClaims ? { decidedBy: { kind: "claim-names" } } : {}),
      });
    },
    failed(request, error) {
      const response = errored(request.uid, 500, new Error(`quartermaster: validation failed: ${errorMessage(error)}`));
      return result(request, response, { outcome: "error", error });
    },
  });
}
