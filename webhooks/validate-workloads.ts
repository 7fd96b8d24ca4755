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
 * An UPDATE is refused only for what it makes worse (`newOrWorse`), as a training job's, except an unsuspend
 * (`spec.suspend` true → false), judged as a CREATE: a suspended Job runs no pods, and it is when it is resumed
 * that its GPUs are taken. Kueue's admission is such an unsuspend (it admits a queued Job or JobSet by resuming
 * it and writing its flavors' node labels into the templates), and so is the JobSet controller's resume of the
 * Jobs it made: an UPDATE that carries only that (`kueueWorkloadAdmissionOnly`, src/kueue/admission.ts) of an
 * object with a queue name or a JobSet as its controller is refused only for the node labels written
 * (`kueueAdmissionFindings`, issue 33: never strand an admitted job), every other violation a warning; such a
 * refusal writes the same Warning Event on the object as a training job's (`kueueAdmissionRefusedEvent`). The
 * object was judged at its CREATE.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimNamesDenial, readClaims, type ClaimsRead } from "../src/admission/claims.js";
import { specsCost, type ReviewCost } from "../src/core/cost.js";
import { allGuards, gpuWorkloadGuard, jobGuard } from "../src/admission/guards.js";
import type { ValidationResult } from "../src/admission/handler.js";
import { kueueWorkloadAdmissionOnly, queueNameOf } from "../src/kueue/admission.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import { QUEUED_WORKLOAD_KINDS, type QueuedWorkloadKind } from "../src/core/job-shapes.js";
import type { KubeObject } from "../src/core/kube.js";
import { workloadTemplateFields, workloadTemplateSpecs } from "../src/mutate/job-templates.js";
import { controlledByJobSet, controlledByTrainJob } from "../src/membership/workload.js";
import { enforce } from "../src/validate/enforcement.js";
import { newOrWorse } from "../src/validate/job.js";
import { kueueAdmissionFindings } from "../src/validate/kueue.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { merge } from "../src/validate/types.js";
import { validateWorkload, validateWorkloadCapacity } from "../src/validate/workload.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";
import { kueueRefusalReporter } from "./refusal-event.js";

/** Passes the GPU rules make over each template (see `src/core/cost.ts`). */
const VALIDATE_WORKLOAD_PASSES = 8;

/** The batch Job or JobSet kind a request is about (none for a subresource: neither kind has `scale`). */
export function workloadKindOf(request: AdmissionRequest): QueuedWorkloadKind | undefined {
  if (request.subResource) return undefined;
  return QUEUED_WORKLOAD_KINDS.find((k) => k.group === request.kind.group && k.kind === request.kind.kind);
}

const suspended = (obj: KubeObject): boolean => (obj.spec as { suspend?: unknown } | undefined)?.suspend === true;

export interface WorkloadValidation {
  /** Why a batch Job or JobSet request is not the webhook's business: an operation not handled, or no GPU asked for. */
  guard(request: AdmissionRequest, kind: QueuedWorkloadKind): string | undefined;
  cost(request: AdmissionRequest & { object: KubeObject }, kind: QueuedWorkloadKind): ReviewCost;
  validate(request: AdmissionRequest & { object: KubeObject }, kind: QueuedWorkloadKind): ValidationResult | Promise<ValidationResult>;
}

/** What a Job's or JobSet's GPUs depend on: its templates and counts (a Job's parallelism and completions; a JobSet's replicated Jobs whole). */
function demandOf(o: KubeObject, kind: QueuedWorkloadKind): string {
  const spec = (o.spec ?? {}) as Record<string, unknown>;
  return JSON.stringify(kind.kind === "JobSet" ? [spec.replicatedJobs] : [spec.template, spec.parallelism, spec.completions]) ?? "";
}

/**
 * An UPDATE that changes nothing the object's GPUs depend on and does not unsuspend it: its GPUs are what they were,
 * so it is neither checked nor priced (review finding: a JobSet admitted at CREATE, priced again with its old object,
 * could never be updated after: not labelled, not preempted by Kueue, not freed of a finalizer to be deleted).
 */
function demandUnchanged(request: AdmissionRequest & { object: KubeObject }, kind: QueuedWorkloadKind): boolean {
  const old = request.operation === "UPDATE" ? request.oldObject : undefined;
  if (!old || (suspended(old) && !suspended(request.object))) return false;
  return demandOf(old, kind) === demandOf(request.object, kind);
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
    cost(request, kind) {
      // An UPDATE that changes nothing its GPUs depend on is not checked (validate below): priced at nothing.
      if (demandUnchanged(request, kind)) return specsCost([], VALIDATE_WORKLOAD_PASSES, policy.gpu.resources);
      // Kueue's admission is priced on the new object alone, as a training job's (webhooks/validate-jobs.ts).
      const admission = request.oldObject ? kueueWorkloadAdmissionOnly(request.oldObject, request.object, kind) : undefined;
      const old = request.oldObject && !admission ? workloadTemplateSpecs(request.oldObject, kind) : [];
      return specsCost([...workloadTemplateSpecs(request.object, kind), ...old], VALIDATE_WORKLOAD_PASSES, policy.gpu.resources);
    },
    validate(request, kind) {
      // Nothing its GPUs depend on changed (a label, a finalizer, Kueue's preemption, deletion): nothing can be worse.
      if (demandUnchanged(request, kind)) return { violations: [], warnings: [] };
      const namespace = request.namespace ?? "";
      const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace), draCapacity: deps.capacity?.draCapacity?.() };
      // A claim template that does not exist or could not be read is judged with the claims (src/validate/claims.ts, gpu-unknown).
      const decide = ({ known, tooMany }: ClaimsRead): ValidationResult => {
        // More claim names than one review may make the webhook read: refused before any read (issue 46).
        if (tooMany) return claimNamesDenial(tooMany);
        const withClaims = { ...ctx, claims: known };
        const check = (obj: KubeObject) =>
          merge(validateWorkload(obj, kind, withClaims), validateWorkloadCapacity(obj, kind, withClaims, deps.capacity?.current()));
        const now = check(request.object);
        const old = request.operation === "UPDATE" ? request.oldObject : undefined;
        // An unsuspend is judged as a CREATE: its pods are made now. Not Trainer's resume of a TrainJob's JobSet: the
        // TrainJob was judged whole at its own unsuspend (src/membership/workload.ts controlledByTrainJob).
        const unsuspend = old !== undefined && old !== null && suspended(old) && !suspended(request.object) && !controlledByTrainJob(request.object);
        const worse = old && !unsuspend ? newOrWorse(now, check(old)) : now;
        const resumedBy = old && (queueNameOf(request.object) !== undefined || controlledByJobSet(request.object));
        const admission = resumedBy ? kueueWorkloadAdmissionOnly(old, request.object, kind) : undefined;
        const found = admission ? kueueAdmissionFindings(worse, admission, queueNameOf(request.object)) : worse;
        const result = enforce(found, policy.enforcement, namespace);
        // Logged at once; an Event on the object off the admission path, never on a dry run (./refusal-event.ts).
        if (admission && result.violations.length > 0)
          void reportRefusal({ object: request.object, kind, namespace, name: request.name, violations: result.violations, dryRun: request.dryRun });
        return result;
      };
      const specs: V1PodSpec[] = [...workloadTemplateSpecs(request.object, kind), ...(request.oldObject ? workloadTemplateSpecs(request.oldObject, kind) : [])];
      const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
      return withReviewReads(pool, timeoutMs, (reader) => {
        const fields = [...workloadTemplateFields(request.object, kind), ...(request.oldObject ? workloadTemplateFields(request.oldObject, kind) : [])];
        const claims = readClaims(specs, namespace, reader, timeoutMs, { fields });
        return claims instanceof Promise ? claims.then(decide) : decide(claims);
      });
    },
  };
}
