/**
 * @module
 * What every webhook is built from. Passed in by the composition root (`webhooks/cli.ts`) or a test.
 */
import type { Logger } from "pino";
import type { Policy } from "../src/policy/types.js";
import type { JobReader } from "../src/topology/types.js";
import type { CapacitySource } from "../src/kube/capacity.js";
import type { EventWriter } from "../src/kube/events.js";

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
  /** Wall clock, injectable for tests. */
  now: () => Date;
}
