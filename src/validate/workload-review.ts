/**
 * @module
 * The decisions of `POST /validate/jobs` on batch Jobs and JobSets (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts;
 * webhooks/validate-workloads.ts holds the wiring: which guard, which reads, which answer): what a review is priced
 * on, whether an UPDATE can change the object's GPUs at all, and the verdict once the claims its templates name are
 * read. Pure: the reads and the refusal Event are the webhook's.
 *
 * An UPDATE is refused only for what it makes worse (`newOrWorse`), as a training job's, except an unsuspend
 * (`spec.suspend` true → false), judged as a CREATE: a suspended Job runs no pods, and it is when it is resumed
 * that its GPUs are taken. Kueue's admission is such an unsuspend (it admits a queued Job or JobSet by resuming
 * it and writing its flavors' node labels into the templates), and so is the JobSet controller's resume of the
 * Jobs it made: an UPDATE that carries only that (`kueueWorkloadAdmissionOnly`, src/kueue/admission.ts) of an
 * object with a queue name or a JobSet as its controller is refused only for the node labels written
 * (`kueueAdmissionFindings`, issue 33: never strand an admitted job), every other violation a warning.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { specsCost, type ReviewCost } from "../core/cost.js";
import { workloadTemplateFields, workloadTemplateSpecs, type QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KnownClaims } from "../core/dra.js";
import type { KubeObject } from "../core/kube.js";
import { kueueWorkloadAdmissionOnly, queueNameOf } from "../kueue/admission.js";
import { controlledByJobSet, controlledByTrainJob } from "../membership/workload.js";
import type { Policy } from "../policy/types.js";
import { enforce, type EnforcedFindings } from "./enforcement.js";
import { newOrWorse, type ClusterCapacity } from "./job.js";
import { kueueAdmissionFindings } from "./kueue.js";
import { effectiveLimits } from "./limits.js";
import { merge, type ValidationContext } from "./types.js";
import { validateWorkload, validateWorkloadCapacity } from "./workload.js";

/** Passes the GPU rules make over each template (see `src/core/cost.ts`). */
export const VALIDATE_WORKLOAD_PASSES = 8;

/** A batch Job's or JobSet's review as these decisions read it (an AdmissionRequest is one). */
export interface ReviewedWorkload {
  operation: string;
  object: KubeObject;
  oldObject?: KubeObject | null;
  namespace?: string;
}

const suspended = (obj: KubeObject): boolean => (obj.spec as { suspend?: unknown } | undefined)?.suspend === true;

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
export function demandUnchanged(review: ReviewedWorkload, kind: QueuedWorkloadKind): boolean {
  const old = review.operation === "UPDATE" ? review.oldObject : undefined;
  if (!old || (suspended(old) && !suspended(review.object))) return false;
  return demandOf(old, kind) === demandOf(review.object, kind);
}

/** The review priced: nothing for an UPDATE that cannot change its GPUs; Kueue's admission on the new object alone, as a training job's. */
export function workloadReviewCost(review: ReviewedWorkload, kind: QueuedWorkloadKind, policy: Pick<Policy, "gpu">): ReviewCost {
  if (demandUnchanged(review, kind)) return specsCost([], VALIDATE_WORKLOAD_PASSES, policy.gpu.resources);
  const admission = review.oldObject ? kueueWorkloadAdmissionOnly(review.oldObject, review.object, kind) : undefined;
  const old = review.oldObject && !admission ? workloadTemplateSpecs(review.oldObject, kind) : [];
  return specsCost([...workloadTemplateSpecs(review.object, kind), ...old], VALIDATE_WORKLOAD_PASSES, policy.gpu.resources);
}

/** The pod templates whose claims the review reads (the new object's and the old one's), and where each is. */
export function workloadReviewTemplates(review: ReviewedWorkload, kind: QueuedWorkloadKind): { specs: V1PodSpec[]; fields: string[] } {
  const objects = [review.object, ...(review.oldObject ? [review.oldObject] : [])];
  return {
    specs: objects.flatMap((o) => workloadTemplateSpecs(o, kind)),
    fields: objects.flatMap((o) => workloadTemplateFields(o, kind)),
  };
}

/** What the cluster gives the rules: the claims read, the ledger's capacity. */
export interface WorkloadReviewReads {
  claims: KnownClaims;
  capacity?: ClusterCapacity;
  draCapacity?: ValidationContext["draCapacity"];
}

/** The verdict, and whether it refuses Kueue's admission (or the JobSet controller's resume): then the webhook writes an Event. */
export interface WorkloadVerdict {
  result: EnforcedFindings;
  refusedAdmission: boolean;
}

/** The review decided, with the claims its templates name read (a claim not read is judged by the claims rules: gpu-unknown). */
export function decideWorkloadReview(review: ReviewedWorkload, kind: QueuedWorkloadKind, policy: Policy, reads: WorkloadReviewReads): WorkloadVerdict {
  // Nothing its GPUs depend on changed (a label, a finalizer, Kueue's preemption, deletion): nothing can be worse.
  if (demandUnchanged(review, kind)) return { result: { violations: [], warnings: [], waived: [] }, refusedAdmission: false };
  const namespace = review.namespace ?? "";
  const ctx: ValidationContext = { policy, namespace, limits: effectiveLimits(policy, namespace), draCapacity: reads.draCapacity, claims: reads.claims };
  const check = (obj: KubeObject) => merge(validateWorkload(obj, kind, ctx), validateWorkloadCapacity(obj, kind, ctx, reads.capacity));
  const now = check(review.object);
  const old = review.operation === "UPDATE" ? (review.oldObject ?? undefined) : undefined;
  // An unsuspend is judged as a CREATE: its pods are made now. Not Trainer's resume of a TrainJob's JobSet: the
  // TrainJob was judged whole at its own unsuspend (src/membership/workload.ts controlledByTrainJob).
  const unsuspend = old !== undefined && suspended(old) && !suspended(review.object) && !controlledByTrainJob(review.object);
  const worse = old && !unsuspend ? newOrWorse(now, check(old)) : now;
  const resumedBy = old && (queueNameOf(review.object) !== undefined || controlledByJobSet(review.object));
  const admission = resumedBy ? kueueWorkloadAdmissionOnly(old, review.object, kind) : undefined;
  const found = admission ? kueueAdmissionFindings(worse, admission, queueNameOf(review.object)) : worse;
  const result = enforce(found, policy.enforcement, namespace);
  return { result, refusedAdmission: admission !== undefined && result.violations.length > 0 };
}
