/**
 * @module
 * The Warning Event on a job whose Kueue admission `/validate/jobs` refused (reason `KueueAdmissionRefused`,
 * `kueueAdmissionRefusedEvent` in src/reconcile/events.ts), for the training jobs and the batch Jobs and JobSets
 * alike. Written only for a real refusal (issue 46, finding 5): a review is what its caller says, and anyone who can
 * reach the webhook's port could otherwise have the webhook's identity write an Event of their choosing into any
 * namespace, kube-system included. So the object is read fresh first, and the Event is written only when it exists
 * under the review's name with the review's uid. Off the admission path: the answer is sent at once, the read and
 * the write follow; nothing here throws, and the log says why an Event was not written. Never on a dry run (the
 * webhook's sideEffects is NoneOnDryRun).
 */
import { errorMessage } from "../src/core/errors.js";
import type { KubeObject, ObjectKind } from "../src/core/kube.js";
import { kueueAdmissionRefusedEvent } from "../src/admission/events.js";
import { readJob, type JobReadResult } from "../src/membership/lookup.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

export interface RefusedAdmission {
  object: KubeObject;
  kind: ObjectKind;
  namespace: string;
  /** The review's name (`request.name`). */
  name?: string | undefined;
  violations: ReadonlyArray<{ field: string; message: string }>;
  dryRun?: boolean | undefined;
}

/**
 * Reports a refused Kueue admission for `deps`: the log line at once, then the Event (see the module comment).
 * Returns at once; the promise (for tests) settles when the Event was written or skipped.
 */
export function kueueRefusalReporter(deps: WebhookDeps): (r: RefusedAdmission) => Promise<void> {
  // The fresh read takes its turn in the webhook's read pool as a review of its own (issue 46: a caller sending many
  // refusals makes many reads, and they are not to queue other reviews' reads; shed, the Event is not written).
  const pool = readsOf(deps);
  return async (r) => {
    deps.log.warn(
      { job: `${r.namespace}/${r.name ?? ""}`, kind: r.kind.kind, violations: r.violations.map((v) => v.message) },
      "Kueue's admission of a job refused: the node labels it wrote select what the policy does not allow",
    );
    if (r.dryRun === true || !deps.events) return;
    const meta = (r.object.metadata ?? {}) as { name?: unknown; uid?: unknown };
    const name = typeof meta.name === "string" ? meta.name : "";
    const uid = typeof meta.uid === "string" ? meta.uid : undefined;
    const skip = (why: string): void => deps.log.warn({ job: `${r.namespace}/${name}`, kind: r.kind.kind }, `KueueAdmissionRefused Event not written: ${why}`);
    if (name === "" || uid === undefined) return skip("the review's object has no name or uid");
    let read: JobReadResult;
    try {
      const timeoutMs = deps.policy.clusterSpec.jobLookupTimeoutMs;
      read = await withReviewReads(pool, timeoutMs, (jobs) => readJob({ kind: r.kind, namespace: r.namespace, name, jobs, timeoutMs, fresh: true }));
    } catch (err) {
      return skip(errorMessage(err));
    }
    if (read.kind !== "found") return skip(read.reason);
    const stored = (read.job.metadata as { uid?: unknown } | undefined)?.uid;
    if (stored !== uid) return skip(`the stored ${r.kind.kind} has uid ${String(stored)}, the review's ${uid}`);
    try {
      deps.events.write(kueueAdmissionRefusedEvent(r.object, r.kind, r.violations, deps.now()));
    } catch (err) {
      skip(errorMessage(err));
    }
  };
}
