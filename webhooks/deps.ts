/**
 * @module
 * What every webhook is built from. Passed in by the composition root (`src/cli/main.ts`) or a test.
 */
import type { Logger } from "pino";
import type { Policy } from "../src/policy/types.js";
import type { JobReader } from "../src/membership/types.js";
import type { CapacitySource } from "../src/validate/job.js";
import type { EventWriter } from "../src/admission/events.js";
import { readPool, type ReadPool } from "../src/admission/read-pool.js";

export interface WebhookDeps {
  policy: Policy;
  log: Logger;
  /** Reads the training job a pod belongs to (cached; the only API read on the admission path). */
  jobs: JobReader;
  /** GPU capacity of the cluster from the device ledger (none until the reconciler has written one). */
  capacity?: CapacitySource;
  /**
   * Writes Events in the background (an Event on a job whose Kueue admission `/validate/jobs` refused); none: not
   * written (the `admit` command, tests that do not look).
   */
  events?: EventWriter;
  /**
   * The reads reviews make through `jobs`, each review in its own queue, served in turn (src/admission/read-pool.ts).
   * `createWebhooks` makes one for all the webhooks when none is given; a webhook built alone makes its own.
   */
  reads?: ReadPool;
  /** Wall clock, injectable for tests. */
  now: () => Date;
}

/** The read pool of `deps`, or a new one over its reader. */
export const readsOf = (deps: WebhookDeps): ReadPool => deps.reads ?? readPool(deps.jobs);

/**
 * Runs `work` with one review's reader of `pool` (its reads bounded by the job lookup's time), released when
 * `work` has its answer: whatever of the review still waits is then shed.
 */
export function withReviewReads<T>(pool: ReadPool, timeoutMs: number, work: (reader: JobReader) => T | Promise<T>): T | Promise<T> {
  const reads = pool.review(timeoutMs);
  let out: T | Promise<T>;
  try {
    out = work(reads);
  } catch (err) {
    reads.release();
    throw err;
  }
  if (out instanceof Promise) return out.finally(() => reads.release());
  reads.release();
  return out;
}
