/**
 * @module
 * `POST /validate/jobs`: limits and shape rules on training-job CREATE and UPDATE, for every configured
 * job kind, and on UPDATEs of their `scale` subresource (`kubectl scale`, autoscalers), which carry an
 * `autoscaling/v1` Scale instead of the job: the job is read as it is now (the reader's `fresh`, bypassing
 * the cache the pod mutation reads through) and checked with the new replica count (`src/validate/scale.ts`);
 * a Scale whose `metadata.resourceVersion` is not the job's current one is denied with 409 Conflict, so the
 * client reads again and retries (issue 29: within the cache's window, a scale was checked against the job
 * before its per-worker GPUs were raised). A Scale without a resourceVersion (an unconditional update) is
 * checked against the fresh job; the DRA claims its templates name are read as at CREATE, so a scaled template's
 * claim devices count toward job-gpus. Fails closed: a job that
 * cannot be read denies the scaling. An UPDATE is refused only for what it makes worse. A job too large
 * to check within the cost bound is denied. The rules live in `src/validate/`.
 *
 * A TrainJob (Kubeflow Trainer v2) is checked against its runtime (`spec.runtimeRef`, read through the same
 * reader and time bound as the pod webhook's job lookup: `readRuntime` in src/membership/lookup.ts), its pods as
 * Trainer v2.3.0 will make them (THE model, `trainJobModel` in src/kinds/trainjob-runtime.ts, which Kueue's pod sets and
 * `/mutate/jobs` read too); a runtime that cannot be read is handled as a failed job lookup
 * (`clusterSpec.onJobLookupFailure`: `deny` refuses it, rule `job-runtime`; `warn` checks the TrainJob's own
 * numNodes × resourcesPerNode and says so). Issue 45: on CREATE and on an unsuspend (`spec.suspend` true → false
 * or unset) the runtime is read fresh, bypassing the cache (`clusterSpec.jobCacheTtlMs`), as a `/scale` reads its
 * job; and an unsuspend is judged like a CREATE, every violation counting (old and new would both be judged
 * against the same current runtime, so new-or-worse would let an edited runtime through), Kueue's admission of a
 * TrainJob included. Issue 46: a TrainJob with more runtime patches than Trainer's CRD admits (16) is refused
 * (`review-cost`, at `spec.runtimePatches`) before anything merges them; it is priced on its own part and its
 * patches before the runtime is read, and with the runtime's templates once it has been.
 *
 * The Trainer's runtimes (TrainingRuntime, ClusterTrainingRuntime) are checked here too, at CREATE and UPDATE,
 * when the policy has a Trainer job kind (`src/validate/runtime.ts`).
 * The DRA claims a TrainJob's runtime templates name are read once the runtime is, with the TrainJob's own, so
 * their devices count (and one not found is `gpu-unknown`).
 *
 * Kueue's admission (issue 33): an UPDATE that only carries it (`kueueAdmissionOnly`, src/kueue/admission.ts:
 * suspend true → false, the flavors' node labels, tolerations, pod labels and annotations added to the templates)
 * is never refused for what the job already had: a lowered cap, a capacity that shrank, a rule that changed since
 * CREATE would otherwise strand a job Kueue has admitted and charged to quota, its pods never made
 * (kubernetes-sigs/kueue#2691). Only a violation at a nodeSelector entry Kueue wrote can refuse it (the flavor's
 * node labels select an accelerator or partition outside `allowedAccelerators`/`allowedPartitions`), with a
 * message that names those node labels (the flavor's name is in the Workload, not in the job) and the job's queue;
 * any other violation the update still shows is only a warning. Such an UPDATE is priced on the new object alone,
 * so a job admitted at CREATE is not refused by the cost bound for being checked twice. The refusal is logged, and
 * a Warning Event on the job says the same (reason `KueueAdmissionRefused`, `kueueAdmissionRefusedEvent` in
 * src/reconcile/events.ts), written through `deps.events` in the background (src/kube/events.ts): never delaying
 * or changing the answer, never on a dry run (the webhook's sideEffects is NoneOnDryRun), and only once the job has
 * been read fresh with the review's uid (`./refusal-event.ts`: a review is what its caller says).
 *
 * Kueue's queues (issue 33, rule `queue-capacity`): at CREATE, a job that carries a queue name and asks for GPUs
 * has its LocalQueue, ClusterQueue and the queue's GPU flavors read (src/admission/queue.ts, through the same
 * reader and within the same time bound as the runtime, in parallel with it) and is refused when the ClusterQueue
 * can never admit it (src/validate/queue-capacity.ts). A queue that cannot be read is a warning, never a refusal.
 * A job without a queue name reads nothing.
 *
 * Batch Jobs and JobSets that ask for GPUs are judged here too, with the GPU rules only (job-gpus on the pods
 * they run at once, capacity, the pod-spec and claim rules on their templates): webhooks/validate-workloads.ts.
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import { claimNamesDenial, readClaims, type ClaimsRead } from "../src/admission/claims.js";
import { jobGuard, jobKindOf } from "../src/admission/guards.js";
import { queueNameOf } from "../src/kueue/admission.js";
import { readQueue } from "../src/admission/queue.js";
import { NO_QUEUE, type QueueRead } from "../src/kueue/queues.js";
import { isGpuResource } from "../src/core/gpu.js";
import { validatingWebhook, type ValidationResult, type Webhook } from "../src/admission/handler.js";
import { CONFLICT } from "../src/admission/response.js";
import type { KubeObject } from "../src/core/kube.js";
import { readJob, readRuntime, type JobReadResult } from "../src/membership/lookup.js";
import type { JobReader } from "../src/membership/types.js";
import { jobShape } from "../src/kinds/index.js";
import { enforce } from "../src/validate/enforcement.js";
import type { ValidationContext } from "../src/validate/types.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { validateScale } from "../src/validate/scale.js";
import type { JobKind } from "../src/policy/types.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";
import { kueueRefusalReporter } from "./refusal-event.js";
import { validateWorkloads, workloadKindOf } from "./validate-workloads.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import { runtimeReviewCost, validateRuntimeReview } from "../src/validate/runtime.js";
import type { Policy } from "../src/policy/types.js";
import { TRAINER_RUNTIME_KINDS } from "../src/core/job-shapes.js";
import {
  asksForGpus,
  claimSources,
  judgeJob,
  scaleRead,
  jobReviewCost,
  NO_RUNTIME,
  pricedTemplates as templates,
  runtimeRead,
  runtimeTooCostly,
  templateFields,
  tooManyPatches,
  trainJobMode,
  VALIDATE_JOB_PASSES,
  type RuntimeRead,
} from "../src/validate/job-review.js";

export function validateJobs(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  // One pool for this webhook's reviews, its batch Jobs' and JobSets' (`./validate-workloads.ts`) and its Events' reads.
  const pool = readsOf(deps);
  // A writer is not to throw; if one does, the answer is the same and the log says why.
  const reportRefusal = kueueRefusalReporter({ ...deps, reads: pool });
  // Batch Jobs and JobSets: the GPU rules only (webhooks/validate-workloads.ts).
  const workloads = validateWorkloads({ ...deps, reads: pool });
  const jobsOnly = jobGuard(policy.jobKinds, ["CREATE", "UPDATE"], { scale: ["UPDATE"] });
  const runtimeOnly = jobGuard(TRAINER_RUNTIME_KINDS, ["CREATE", "UPDATE"]);
  const workloadOf = (request: AdmissionRequest) => (jobKindOf(request, policy.jobKinds) ? undefined : workloadKindOf(request));
  return validatingWebhook({
    name: "validate-jobs",
    // A Trainer runtime (TrainingRuntime, ClusterTrainingRuntime) too, checked itself (`src/validate/runtime.ts`).
    guard(request) {
      if (runtimeKindOf(request, policy) && !request.subResource) return runtimeOnly(request);
      const workload = workloadOf(request);
      return workload ? workloads.guard(request, workload) : jobsOnly(request);
    },
    cost(request) {
      if (runtimeKindOf(request, policy)) return runtimeReviewCost(request, VALIDATE_JOB_PASSES, policy);
      const workload = workloadOf(request);
      if (workload) return workloads.cost(request, workload);
      return jobReviewCost(request, jobKindOf(request, policy.jobKinds)!, policy);
    },
    validate(request) {
      const runtimeKind = runtimeKindOf(request, policy);
      if (runtimeKind) return validateRuntimeReview(request, runtimeKind.scope, policy);
      const workload = workloadOf(request);
      if (workload) return workloads.validate(request, workload);
      return withReviewReads(pool, policy.clusterSpec.jobLookupTimeoutMs, (reader) => {
        const kind = jobKindOf(request, policy.jobKinds)!;
        const namespace = request.namespace ?? "";
        const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace), draCapacity: deps.capacity?.draCapacity?.() };
        const review: JobReview = { request, kind, namespace, reader, ctx, deps, templates, templateFields, reportRefusal };
        return request.subResource === "scale" ? scaleReview(review) : jobReview(review);
      });
    },
  });
}

/** One review of a training job, with what its checks read through and price with. */
interface JobReview {
  request: AdmissionRequest & { object: KubeObject };
  kind: JobKind;
  namespace: string;
  reader: JobReader;
  ctx: ValidationContext;
  deps: WebhookDeps;
  /** The templates a job is priced on (a TrainJob: its own part and runtime patches). */
  templates: (job: unknown, kind: JobKind) => unknown[];
  /** Where each of `templates` is, for a refusal's field. */
  templateFields: (job: unknown, kind: JobKind) => string[];
  reportRefusal: ReturnType<typeof kueueRefusalReporter>;
}

/** A job's `/scale`: the job read fresh, its templates priced, the claims they name read, the scaling judged. */
function scaleReview(r: JobReview): ValidationResult | Promise<ValidationResult> {
  const { request, kind, namespace, reader, ctx, deps, templates, templateFields } = r;
  const { policy } = deps;
  const name = request.name ?? String((request.object.metadata as { name?: unknown } | undefined)?.name ?? "");
  const decide = (read: JobReadResult): ValidationResult | Promise<ValidationResult> => {
    const step = scaleRead(request.object, read, kind, policy, `${namespace}/${name}`);
    if ("refused" in step) {
      const { conflict, ...result } = step.refused;
      return conflict ? { ...result, status: CONFLICT } : result;
    }
    const job = step.job;
    // The claims its templates name count as at CREATE: a template's devices times the new replica count.
    const judge = ({ known, tooMany }: ClaimsRead): ValidationResult =>
      tooMany
        ? claimNamesDenial(tooMany)
        : enforce(
            validateScale({ scale: request.object, job: job, kind, ctx: { ...ctx, claims: known }, capacity: deps.capacity?.current() }),
            policy.enforcement,
            namespace,
          );
    const claims = readClaims(templates(job, kind) as V1PodSpec[], namespace, reader, policy.clusterSpec.jobLookupTimeoutMs, {
      fields: templateFields(job, kind),
      fresh: true,
    });
    return claims instanceof Promise ? claims.then(judge) : judge(claims);
  };
  const read = readJob({ kind, namespace, name, jobs: reader, timeoutMs: policy.clusterSpec.jobLookupTimeoutMs, fresh: true });
  return read instanceof Promise ? read.then(decide) : decide(read);
}

/** A TrainJob's runtime, read fresh on CREATE and on an unsuspend (issue 45), or failed as `onJobLookupFailure` says. */
function readRuntimeOf(r: JobReview, job: KubeObject, fresh: boolean): RuntimeRead | Promise<RuntimeRead> {
  const { kind, namespace, reader, deps } = r;
  const { policy } = deps;
  if (jobShape(kind).layout !== "runtime") return NO_RUNTIME;
  const read = readRuntime(job, kind, namespace, reader, { timeoutMs: policy.clusterSpec.jobLookupTimeoutMs, fresh });
  const onRead = (x: JobReadResult): RuntimeRead => runtimeRead(x, policy.clusterSpec.onJobLookupFailure);
  return read instanceof Promise ? read.then(onRead) : onRead(read);
}

/** A queued job's LocalQueue, ClusterQueue and GPU flavors (`queue-capacity`), within the job lookup's bound. */
function readQueueOf(r: JobReview, job: KubeObject): QueueRead | Promise<QueueRead> {
  const { policy } = r.deps;
  return readQueue({
    job,
    namespace: r.namespace,
    isGpu: (x) => isGpuResource(x, policy.gpu.resources),
    reader: r.reader,
    timeoutMs: policy.clusterSpec.jobLookupTimeoutMs,
  });
}

/** A job's CREATE or UPDATE: its runtime (a TrainJob), the claims its templates name and its queue read, then judged. */
function jobReview(r: JobReview): ValidationResult | Promise<ValidationResult> {
  const { request, kind, namespace, reader, ctx, deps, templates } = r;
  const { policy } = deps;
  const { reportRefusal } = r;
  // More runtime patches than Trainer's CRD admits: refused before anything merges them (issue 46).
  const overCrd = tooManyPatches(request.object, kind);
  if (overCrd) return overCrd;
  // A TrainJob unsuspended (spec.suspend true → false or unset): its pods are about to be made from the runtime
  // as it is now, so it is judged like a CREATE, against a runtime read fresh (issue 45).
  const { unsuspend, fresh: freshRuntime } = trainJobMode(request, kind);
  // The runtime's templates priced with the TrainJob's as soon as it is read, before the model merges them or
  // their claims are read (issue 46: a 20,000-container runtime was modelled, ~200 ms, to find its claims, and
  // only then refused for its cost).
  const priced = (runtime: RuntimeRead): PricedRuntime => {
    const objects = [request.object, ...(request.oldObject && !unsuspend ? [request.oldObject] : [])];
    return {
      runtime,
      overBound: runtimeTooCostly(
        objects.map((o) => templates(o, kind)),
        runtime.object,
        policy,
      ),
    };
  };
  // A claim template that does not exist or could not be read is judged with the claims (src/validate/claims.ts, gpu-unknown).
  const decide = ({ runtime, overBound }: PricedRuntime, { known, tooMany }: ClaimsRead, queue: QueueRead): ValidationResult => {
    // Over the bound with its runtime: refused, its claims never read.
    if (overBound) return overBound;
    // More claim names than one review may make the webhook read: refused before any claim read (issue 46).
    if (tooMany) return claimNamesDenial(tooMany);
    const { result, kueueAdmission } = judgeJob({
      request,
      kind,
      ctx,
      claims: known,
      capacity: deps.capacity?.current(),
      runtime,
      queue,
      unsuspend,
      enforcement: policy.enforcement,
      namespace,
    });
    // Logged at once; an Event on the object off the admission path, never on a dry run (./refusal-event.ts).
    if (kueueAdmission && result.violations.length > 0)
      void reportRefusal({ object: request.object, kind, namespace, name: request.name, violations: result.violations, dryRun: request.dryRun });
    return result;
  };
  const read = readRuntimeOf(r, request.object, freshRuntime);
  const runtime = read instanceof Promise ? read.then(priced) : priced(read);
  // A TrainJob's runtime templates may name claims too: read once the runtime is (a v1 kind has none, at once),
  // unless the runtime made the review too costly to check. Which specs, and where: `claimSources`.
  const claimsWith = ({ runtime: rt, overBound }: PricedRuntime): ClaimsRead | Promise<ClaimsRead> => {
    if (overBound) return NO_CLAIMS;
    const { specs, fields } = claimSources(request, kind, rt.object);
    return readClaims(specs, namespace, reader, policy.clusterSpec.jobLookupTimeoutMs, { fields, fresh: true });
  };
  const claims = runtime instanceof Promise ? runtime.then(claimsWith) : claimsWith(runtime);
  const queued = request.operation === "CREATE" && queueNameOf(request.object) !== undefined;
  const queue = queued && asksForGpus(r.kind, r.ctx, request.object) ? readQueueOf(r, request.object) : NO_QUEUE;
  // No runtime to read (a v1 kind), no claims, not queued: decided at once.
  if (!(runtime instanceof Promise) && !(claims instanceof Promise) && !(queue instanceof Promise)) return decide(runtime, claims, queue);
  return Promise.all([runtime, claims, queue]).then(([r, c, q]) => decide(r, c, q));
}

/** A runtime read and, when the TrainJob with its runtime's templates is over the cost bound, the refusal. */
interface PricedRuntime {
  runtime: RuntimeRead;
  overBound: ValidationResult | undefined;
}

/** No claims read: the review is refused for its cost before any (`PricedRuntime`). */
const NO_CLAIMS: ClaimsRead = Object.freeze({ known: { claims: new Map(), templates: new Map() }, failures: [] });

/** The Trainer runtime kind of the request, when it is one and the policy has a Trainer job kind. */
function runtimeKindOf(request: AdmissionRequest, policy: Pick<Policy, "jobKinds">): (typeof TRAINER_RUNTIME_KINDS)[number] | undefined {
  if (!policy.jobKinds.some((k) => k.framework === "trainer")) return undefined;
  return jobKindOf(request, TRAINER_RUNTIME_KINDS);
}
