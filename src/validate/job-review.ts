/**
 * @module
 * The decisions of `POST /validate/jobs` (webhooks/validate-jobs.ts holds its wiring: which rules, which reads,
 * which answer): what a training job's review is priced on and where each priced template is, which pod specs its
 * DRA claims are read from, the TrainJob's runtime as the rules get it (or the failure
 * `clusterSpec.onJobLookupFailure` makes of it), the refusals before any rule runs (more runtime patches than
 * Trainer's CRD admits, a TrainJob over the cost bound with its runtime's templates), how a TrainJob's runtime is
 * read and judged (issue 45: CREATE and unsuspend), and a stale Scale.
 * Pure: the reads are the webhook's.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { isObject } from "../core/object.js";
import { explainCost, jobTemplateSpecs, specsCost, type ReviewCost } from "../core/cost.js";
import type { JobReadResult } from "../membership/lookup.js";
import { jobShape, replicaSpecsField } from "../kinds/index.js";
import { MAX_RUNTIME_PATCHES, runtimePatchCount, runtimePodSpecs, trainJobPricedSpecs } from "../kinds/trainjob-runtime.js";
import type { JobKind, Policy } from "../policy/types.js";
import { merge, type Findings, type ValidationContext } from "./types.js";
import { enforce, type EnforcedFindings } from "./enforcement.js";
import { newOrWorse, validateCapacity, validateJob } from "./job.js";
import { kueueAdmissionFindings } from "./kueue.js";
import { jobPodSets, queueCapacityFindings } from "./queue-capacity.js";
import { kueueAdmissionOnly, queueNameOf } from "../kueue/admission.js";
import type { QueueRead } from "../kueue/queues.js";
import { SCALE_FIELD } from "./scale.js";

/** A job's review as these decisions read it (an AdmissionRequest is one). */
export interface ReviewedJob {
  operation: string;
  object: KubeObject;
  oldObject?: unknown;
}

/** A `review-cost` refusal with what was priced. */
export type CostDenial = Findings & { costBound: ReviewCost };

/** Passes the job rules make over each replica template (see `src/core/cost.ts`). */
export const VALIDATE_JOB_PASSES = 8;
/** One more for a queued job's CREATE: its pod sets against its ClusterQueue (`queue-capacity`). */
export const QUEUE_CAPACITY_PASSES = 1;

/**
 * A training job's review priced: its templates (and the old object's, but for Kueue's admission, priced on the new
 * object alone), one pass more for a queued CREATE (`queue-capacity`); a Scale carries no templates (the job it
 * scales is priced once it has been read). Over the bound with more runtime patches than Trainer's CRD admits, the
 * price points there (issue 46).
 */
export function jobReviewCost(review: ReviewedJob & { subResource?: string }, kind: JobKind, policy: Pick<Policy, "gpu">): ReviewCost {
  const oldObject = isObject(review.oldObject) ? (review.oldObject as KubeObject) : undefined;
  const admission = oldObject && !review.subResource ? kueueAdmissionOnly(oldObject, review.object, kind) : undefined;
  const old = oldObject && !admission ? pricedTemplates(oldObject, kind) : [];
  const specs = review.subResource ? [] : [...pricedTemplates(review.object, kind), ...old];
  const queued = review.operation === "CREATE" && queueNameOf(review.object) !== undefined;
  const cost = specsCost(specs, VALIDATE_JOB_PASSES + (queued ? QUEUE_CAPACITY_PASSES : 0), policy.gpu.resources);
  const patches = jobShape(kind).layout === "runtime" ? runtimePatchCount(review.object) : 0;
  return cost.over && patches > MAX_RUNTIME_PATCHES ? { ...cost, at: { field: "spec.runtimePatches", why: tooManyPatchesWhy(patches) } } : cost;
}

/** The templates a job is priced on (a TrainJob: its own part and its runtime patches). */
export function pricedTemplates(job: unknown, kind: JobKind): unknown[] {
  const shape = jobShape(kind);
  // A TrainJob is priced on its own part (its `node` Job) and its runtime patches (at most the CRD's 16) before
  // its runtime is read; with the runtime's templates too once it has been (`runtimeCost` below).
  if (shape.layout === "runtime") return isObject(job) ? [...shape.replicas(job, kind).map((r) => r.spec.template?.spec), ...trainJobPricedSpecs(job)] : [];
  return jobTemplateSpecs(job, replicaSpecsField(kind), shape.layout === "single");
}

/** Where each of {@link pricedTemplates} is, for a refusal's field (`readClaims`). */
export function templateFields(job: unknown, kind: JobKind): string[] {
  const shape = jobShape(kind);
  if (shape.layout === "runtime")
    return isObject(job)
      ? [...shape.replicas(job, kind).map((r) => `${r.templateField}.spec`), ...trainJobPricedSpecs(job).map(() => "spec.runtimePatches")]
      : [];
  const field = replicaSpecsField(kind);
  const replicas = isObject(job) && isObject(job.spec) ? job.spec[field] : undefined;
  if (!isObject(replicas)) return [];
  return shape.layout === "single" ? [`spec.${field}.template.spec`] : Object.keys(replicas).map((type) => `spec.${field}.${type}.template.spec`);
}

/** The pod specs a job's review reads DRA claims from, and where each is (`readClaims`'s `fields`, index for index). */
export interface ClaimSources {
  specs: (V1PodSpec | undefined)[];
  fields: string[];
}

/**
 * Where a job's CREATE or UPDATE reads the DRA claims it names: the templates it is priced on (`pricedTemplates`: a
 * TrainJob's own part and runtime patches) of the object, then of the old object when there is one; then, for a
 * TrainJob whose runtime was read (`runtime`), the pods Trainer will make of the new object and that runtime (so the
 * claims the runtime's templates name count too). A v1 kind (it has no runtime), or a TrainJob without its runtime
 * (not read, `onJobLookupFailure: warn`): the templates alone. Pure: the webhook reads the claims (`readClaims`).
 */
export function claimSources(request: ReviewedJob, kind: JobKind, runtime: KubeObject | undefined): ClaimSources {
  const objects = [request.object, ...(request.oldObject ? [request.oldObject] : [])];
  const shape = jobShape(kind);
  const replicas = runtime && shape.layout === "runtime" ? shape.replicas(request.object, kind, runtime) : [];
  return {
    specs: [...objects.flatMap((o) => pricedTemplates(o, kind)), ...replicas.map((x) => x.spec.template?.spec)] as (V1PodSpec | undefined)[],
    fields: [...objects.flatMap((o) => templateFields(o, kind)), ...replicas.map((x) => `${x.templateField}.spec`)],
  };
}

/** A TrainJob's GPUs may be its runtime's: asked for as read. A v1 job without any GPU has nothing to check. */
export function asksForGpus(kind: JobKind, ctx: ValidationContext, job: KubeObject): boolean {
  return jobShape(kind).layout === "runtime" || jobPodSets(job, kind, ctx).some((p) => [...p.gpus.values()].some((n) => n > 0n));
}

/** A TrainJob's runtime as the rules get it: the object, or why not and what that means for the review. */
export interface RuntimeRead {
  object?: KubeObject;
  findings: Findings;
}

export const NO_RUNTIME: RuntimeRead = Object.freeze({ findings: { violations: [], warnings: [] } });

/**
 * A TrainJob's runtime read, or the same failure handling as the pod webhook's job lookup
 * (`clusterSpec.onJobLookupFailure`): `deny` refuses the TrainJob (rule `job-runtime`, at `spec.runtimeRef`),
 * `warn` checks the TrainJob on its own part (numNodes × resourcesPerNode) and says so in a warning.
 */
export function runtimeRead(read: JobReadResult, onFailure: "warn" | "deny"): RuntimeRead {
  if (read.kind === "found") return { object: read.job, findings: { violations: [], warnings: [] } };
  const why = `the TrainJob's runtime could not be read (${read.reason})`;
  if (onFailure === "deny")
    return { findings: { violations: [{ rule: "job-runtime", field: "spec.runtimeRef", message: `${why}: cannot check the job` }], warnings: [] } };
  return { findings: { violations: [], warnings: [`quartermaster: ${why}; checked without the runtime's templates`] } };
}

/** A TrainJob with more runtime patches than Trainer v2.3.0's CRD admits, refused before any merge (issue 46). */
export function tooManyPatches(job: KubeObject, kind: JobKind): Findings | undefined {
  if (jobShape(kind).layout !== "runtime") return undefined;
  const n = runtimePatchCount(job);
  if (n <= MAX_RUNTIME_PATCHES) return undefined;
  return { violations: [{ rule: "review-cost", field: "spec.runtimePatches", message: tooManyPatchesWhy(n) }], warnings: [] };
}

export const tooManyPatchesWhy = (n: number): string =>
  `${n} runtime patches, over the ${MAX_RUNTIME_PATCHES} Trainer v2.3.0's TrainJob CRD admits (kubeflow/trainer ` +
  `pkg/apis/trainer/v1alpha1/trainjob_types.go, MaxItems=16): not checked; keep at most ${MAX_RUNTIME_PATCHES} entries, one per manager`;

/**
 * A TrainJob priced with its runtime's templates (each object's own part and patches, `perObject`, and the runtime's
 * Jobs once per object checked), denied when over the bound; undefined within it, or without a runtime.
 */
export function runtimeTooCostly(perObject: unknown[][], runtime: KubeObject | undefined, policy: Policy): CostDenial | undefined {
  if (!runtime) return undefined;
  const runtimeSpecs = runtimePodSpecs(runtime).map((s) => s.spec);
  const cost = specsCost(
    perObject.flatMap((own) => [...own, ...runtimeSpecs]),
    VALIDATE_JOB_PASSES,
    policy.gpu.resources,
  );
  if (!cost.over) return undefined;
  const message = `the TrainJob with its runtime's templates: ${explainCost(cost)}; split the workload or ask the platform team`;
  return { violations: [{ rule: "review-cost", field: "spec.runtimeRef", message }], warnings: [], costBound: cost };
}

/**
 * How a TrainJob's review reads its runtime and judges it (issue 45): on CREATE and on an unsuspend the runtime is
 * read fresh, and an unsuspend is judged like a CREATE. Other kinds: neither.
 */
export function trainJobMode(request: ReviewedJob, kind: JobKind): { unsuspend: boolean; fresh: boolean } {
  if (jobShape(kind).layout !== "runtime") return { unsuspend: false, fresh: false };
  const unsuspend = request.operation === "UPDATE" && isObject(request.oldObject) && isUnsuspend(request.oldObject, request.object);
  return { unsuspend, fresh: unsuspend || request.operation === "CREATE" };
}

/** spec.suspend true → false or unset: the TrainJob's pods are about to be made. */
export function isUnsuspend(old: KubeObject, now: KubeObject): boolean {
  const suspended = (o: KubeObject): boolean => (o.spec as { suspend?: unknown } | undefined)?.suspend === true;
  return suspended(old) && !suspended(now);
}

const resourceVersionOf = (o: KubeObject): string | undefined => {
  const rv = (o.metadata as { resourceVersion?: unknown } | undefined)?.resourceVersion;
  return typeof rv === "string" && rv !== "" ? rv : undefined;
};

/**
 * Why a Scale is not of the job as it is now, or undefined: its `metadata.resourceVersion` (the job's,
 * which the apiserver copies into the Scale) differs from the freshly read job's. Without one the update is
 * unconditional and the fresh job is what it applies to.
 */
export function staleScale(scale: KubeObject, job: KubeObject): string | undefined {
  const asked = resourceVersionOf(scale);
  const current = resourceVersionOf(job);
  if (asked === undefined || asked === current) return undefined;
  return `the Scale is of resourceVersion ${asked} but the job's current one is ${current ?? "unknown"}: the job changed; read it again and retry`;
}

/** A `/scale` refused before its claims are read; `conflict`: the answer is 409 (read the job again and retry). */
export type ScaleRefusal = Findings & { conflict?: true; costBound?: ReviewCost };

/**
 * A job's `/scale` with the job it scales read fresh: refused when the job could not be read, when the Scale is
 * stale, or when the stored job, checked twice (scaled and as it is, as an UPDATE would be), is over the cost bound;
 * otherwise the job, and the claims its templates name are read next.
 */
export function scaleRead(
  scale: KubeObject,
  read: JobReadResult,
  kind: JobKind,
  policy: Pick<Policy, "gpu">,
  where: string,
): { refused: ScaleRefusal } | { job: KubeObject } {
  const refused = (r: ScaleRefusal) => ({ refused: r });
  if (read.kind !== "found")
    return refused({ violations: [{ rule: "job-scale", field: SCALE_FIELD, message: `cannot check the scaling: ${read.reason}` }], warnings: [] });
  const conflict = staleScale(scale, read.job);
  if (conflict) return refused({ violations: [{ rule: "job-scale", field: "metadata.resourceVersion", message: conflict }], warnings: [], conflict: true });
  const templates = pricedTemplates(read.job, kind);
  const cost = specsCost([...templates, ...templates], VALIDATE_JOB_PASSES, policy.gpu.resources);
  if (!cost.over) return { job: read.job };
  return refused({
    violations: [{ rule: "review-cost", field: SCALE_FIELD, message: `${kind.kind} ${where}: ${explainCost(cost)}` }],
    warnings: [],
    costBound: cost,
  });
}

/** What a job's CREATE or UPDATE is judged with once its runtime, claims and queue are read. */
export interface JobJudgement {
  request: ReviewedJob;
  kind: JobKind;
  /** The review's context (a queued job's pod sets are counted with it as it is). */
  ctx: ValidationContext;
  /** The claims read: the rules and capacity judge with them. */
  claims: ValidationContext["claims"];
  capacity: Parameters<typeof validateCapacity>[3];
  runtime: RuntimeRead;
  queue: QueueRead;
  /** An unsuspended TrainJob (`trainJobMode`): judged like a CREATE. */
  unsuspend: boolean;
  enforcement: Policy["enforcement"];
  namespace: string;
}

/**
 * A job's CREATE or UPDATE judged: the job rules, capacity and the runtime's findings; an UPDATE only for what it
 * makes worse (an unsuspended TrainJob: every violation, as at CREATE); an UPDATE that only carries Kueue's admission
 * refused only at the node labels Kueue wrote (`kueueAdmission`: the webhook then reports the refusal); a queued
 * job against its ClusterQueue; each violation then denies, warns or is recorded by its rule's mode.
 */
export function judgeJob(j: JobJudgement): { result: EnforcedFindings; kueueAdmission: boolean } {
  const { request, kind, ctx, runtime, unsuspend } = j;
  const withClaims = { ...ctx, claims: j.claims };
  const check = (job: KubeObject) =>
    merge(validateJob(job, kind, withClaims, runtime.object), validateCapacity(job, kind, withClaims, j.capacity, runtime.object), runtime.findings);
  const now = check(request.object);
  const update = request.operation === "UPDATE" && request.oldObject !== undefined;
  // An unsuspended TrainJob: every violation, as at CREATE (its old and new objects would both be judged
  // against the same current runtime, so nothing would look worse), Kueue's admission included.
  const worse = update && !unsuspend ? newOrWorse(now, check(request.oldObject as KubeObject)) : now;
  const admission = update ? kueueAdmissionOnly(request.oldObject as KubeObject, request.object, kind) : undefined;
  const found = admission && !unsuspend ? kueueAdmissionFindings(worse, admission, queueNameOf(request.object)) : worse;
  const capacityOfQueue = queueCapacityFindings(request.object, jobPodSets(request.object, kind, ctx, runtime.object), j.queue);
  // Each violation then denies, warns or is recorded, by its rule's mode in the namespace.
  return { result: enforce(merge(found, capacityOfQueue), j.enforcement, j.namespace), kueueAdmission: admission !== undefined };
}
