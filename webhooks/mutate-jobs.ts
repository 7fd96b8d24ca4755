/**
 * @module
 * `POST /mutate/jobs`: the policy's `jobDefaults` written into a training job's `spec.runPolicy` on CREATE,
 * for every configured job kind, with a warning per field filled; a TrainJob's bare `gpu` in
 * `spec.trainer.resourcesPerNode` renamed to `gpu.resourceName` (`src/mutate/trainjob-resources.ts`: its
 * Jobs would be refused, where a v1 job's pods are renamed by `/mutate/pods`); and, for a job queued in Kueue
 * (label `kueue.x-k8s.io/queue-name`), its pod templates outfitted with the pod mutations whose result Kueue
 * reads (`src/mutate/job-templates.ts`: resources, GPU tolerations, accelerator and interruptible placement), so
 * flavor assignment and quota see what the pods will ask for (a queued TrainJob through its runtime, read as
 * /validate/jobs reads it: `src/mutate/trainjob-outfit.ts`); the same for a queued batch Job or JobSet (sent
 * here by `jobs.mutate`, whose match condition `training-jobs-or-queued` passes a batch Job or JobSet only when
 * it has a queue name: nothing else of Quartermaster's applies to them). A job without a queue name keeps its templates as written (the reason
 * is in that module). The DRA claims the templates name are read as the pod webhook reads a
 * pod's (the only I/O). Fails open (a failing rule admits the job unchanged, with a warning). UPDATEs are not
 * sent here and pass through if they are: a job is never mutated after it was created (Kueue's admission
 * UPDATE included).
 */
import { readClaims, unreadClaimWarnings, type ClaimsRead } from "../src/admission/claims.js";
import { jobGuard } from "../src/admission/guards.js";
import { mutatingWebhook, type MutationResult, type Webhook } from "../src/admission/handler.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import { QUEUED_WORKLOAD_KINDS } from "../src/core/job-shapes.js";
import type { KubeObject } from "../src/core/kube.js";
import { readRuntime, type JobReadResult } from "../src/membership/lookup.js";
import type { JobReader } from "../src/membership/types.js";
import type { JobKind } from "../src/policy/types.js";
import {
  isQueuedTrainJob,
  mutateJobsCost,
  mutateJobWithClaims,
  outfitTrainJobWithClaims,
  queuedTemplateSpecs,
  queuedTrainJobRuntime,
  queuedTrainJobStart,
  type MutatedKind,
} from "../src/mutate/job-review.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

export function mutateJobs(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  const pool = readsOf(deps);
  const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
  /** The configured training-job kind of the request, else the queued batch Job or JobSet kind (the guard admits no other). */
  const kindOf = (request: AdmissionRequest): MutatedKind => {
    const job = policy.jobKinds.find((k) => k.group === request.kind.group && k.kind === request.kind.kind);
    return job ? { job } : { workload: QUEUED_WORKLOAD_KINDS.find((k) => k.group === request.kind.group && k.kind === request.kind.kind)! };
  };
  return mutatingWebhook({
    name: "mutate-jobs",
    guard: jobGuard([...policy.jobKinds, ...QUEUED_WORKLOAD_KINDS], ["CREATE"]),
    // A job over the bound is admitted unchanged, with a warning.
    cost: (request) => mutateJobsCost(request.object, kindOf(request), policy),
    mutate(request) {
      return withReviewReads(pool, timeoutMs, (reader) => {
        const namespace = request.namespace ?? "";
        const kind = kindOf(request);
        if (isQueuedTrainJob(request.object, kind)) return mutateQueuedTrainJob({ request, kind: kind.job, namespace, reader, deps });
        const decide = (claims: ClaimsRead): MutationResult =>
          mutateJobWithClaims(request.object, kind, { policy, namespace, claims: claims.known }, unreadClaimWarnings(claims));
        const claims = readClaims(queuedTemplateSpecs(request.object, kind), namespace, reader, timeoutMs);
        return claims instanceof Promise ? claims.then(decide) : decide(claims);
      });
    },
  });
}

/** A queued TrainJob's review, as mutateQueuedTrainJob reads it. */
interface QueuedTrainJob {
  request: AdmissionRequest & { object: KubeObject };
  kind: JobKind;
  namespace: string;
  reader: JobReader;
  deps: WebhookDeps;
}

/**
 * A queued TrainJob: its runtime read (the reader, cache and bound of /validate/jobs), then the claims its trainer
 * nodes' template names; each step's decision is src/mutate/job-review.ts's.
 */
function mutateQueuedTrainJob({ request, kind, namespace, reader, deps: { policy } }: QueuedTrainJob): MutationResult | Promise<MutationResult> {
  const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
  const start = queuedTrainJobStart(request.object, kind, policy, namespace);
  if (start.done) return { object: start.object, warnings: start.warnings };
  const withRuntime = (read: JobReadResult): MutationResult | Promise<MutationResult> => {
    const step = queuedTrainJobRuntime(start, read, policy);
    if ("done" in step) return step.done;
    const outfit = (claims: ClaimsRead): MutationResult =>
      outfitTrainJobWithClaims(start, kind, step.runtime, { policy, namespace, claims: claims.known }, unreadClaimWarnings(claims));
    const claims = readClaims(step.node?.spec ? [step.node.spec] : [], namespace, reader, timeoutMs);
    return claims instanceof Promise ? claims.then(outfit) : outfit(claims);
  };
  const read = readRuntime(start.object, kind, namespace, reader, timeoutMs);
  return read instanceof Promise ? read.then(withRuntime) : withRuntime(read);
}
