/**
 * @module
 * The part of `POST /validate/jobs` (webhooks/validate-jobs.ts) that judges batch Jobs and JobSets
 * (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts) on CREATE and UPDATE, with the GPU rules only
 * (src/validate/workload.ts): the pod-spec, accelerator and DRA claim rules on every template, job-gpus on the
 * pods it runs at once, capacity. The webhook configuration sends only those whose templates ask for GPUs or
 * name ResourceClaims (match condition `gpu-workloads-only`, src/manifests/webhooks.ts); an object that asks
 * for none is admitted without a finding whatever reaches here (a controller makes most of them: a CronJob's
 * Jobs, a JobSet's Jobs, Trainer's JobSets).
 *
 * The wiring: which guard, the claims read (each review's reads in its own queue), the decisions
 * (src/validate/workload-review.ts: the price, UPDATEs judged for what they make worse, an unsuspend as a CREATE,
 * Kueue's admission refused only for the node labels written), and a refusal of Kueue's admission written as the
 * same Warning Event on the object as a training job's (`kueueAdmissionRefusedEvent`).
 */
import { claimNamesDenial, readClaims, type ClaimsRead } from "../src/admission/claims.js";
import type { ReviewCost } from "../src/core/cost.js";
import { allGuards, gpuWorkloadGuard, jobGuard } from "../src/admission/guards.js";
import type { ValidationResult } from "../src/admission/handler.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import { QUEUED_WORKLOAD_KINDS, type QueuedWorkloadKind } from "../src/core/job-shapes.js";
import type { KubeObject } from "../src/core/kube.js";
import { decideWorkloadReview, demandUnchanged, workloadReviewCost, workloadReviewTemplates } from "../src/validate/workload-review.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";
import { kueueRefusalReporter } from "./refusal-event.js";

/** The batch Job or JobSet kind a request is about (none for a subresource: neither kind has `scale`). */
export function workloadKindOf(request: AdmissionRequest): QueuedWorkloadKind | undefined {
  if (request.subResource) return undefined;
  return QUEUED_WORKLOAD_KINDS.find((k) => k.group === request.kind.group && k.kind === request.kind.kind);
}

export interface WorkloadValidation {
  /** Why a batch Job or JobSet request is not the webhook's business: an operation not handled, or no GPU asked for. */
  guard(request: AdmissionRequest, kind: QueuedWorkloadKind): string | undefined;
  cost(request: AdmissionRequest & { object: KubeObject }, kind: QueuedWorkloadKind): ReviewCost;
  validate(request: AdmissionRequest & { object: KubeObject }, kind: QueuedWorkloadKind): ValidationResult | Promise<ValidationResult>;
}

export function validateWorkloads(deps: WebhookDeps): WorkloadValidation {
  const { policy } = deps;
  const pool = readsOf(deps);
  // A writer is not to throw; if one does, the answer is the same and the log says why.
  const reportRefusal = kueueRefusalReporter(deps);
  const operations = jobGuard(QUEUED_WORKLOAD_KINDS, ["CREATE", "UPDATE"]);
  const gpuGuards = new Map(QUEUED_WORKLOAD_KINDS.map((k) => [k, gpuWorkloadGuard(policy, k)]));
  return {
    guard: (request, kind) => allGuards(operations, gpuGuards.get(kind)!)(request),
    cost: (request, kind) => workloadReviewCost(request, kind, policy),
    validate(request, kind) {
      // Nothing its GPUs depend on changed: no read, nothing can be worse.
      if (demandUnchanged(request, kind)) return { violations: [], warnings: [] };
      const namespace = request.namespace ?? "";
      const decide = ({ known, tooMany }: ClaimsRead): ValidationResult => {
        // More claim names than one review may make the webhook read: refused before any read (issue 46).
        if (tooMany) return claimNamesDenial(tooMany);
        const reads = { claims: known, capacity: deps.capacity?.current(), draCapacity: deps.capacity?.draCapacity?.() };
        const { result, refusedAdmission } = decideWorkloadReview(request, kind, policy, reads);
        // Logged at once; an Event on the object off the admission path, never on a dry run (./refusal-event.ts).
        if (refusedAdmission)
          void reportRefusal({ object: request.object, kind, namespace, name: request.name, violations: result.violations, dryRun: request.dryRun });
        return result;
      };
      const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
      return withReviewReads(pool, timeoutMs, (reader) => {
        // A claim template that does not exist or could not be read is judged with the claims (src/validate/claims.ts, gpu-unknown).
        const { specs, fields } = workloadReviewTemplates(request, kind);
        const claims = readClaims(specs, namespace, reader, timeoutMs, { fields, fresh: true });
        return claims instanceof Promise ? claims.then(decide) : decide(claims);
      });
    },
  };
}
