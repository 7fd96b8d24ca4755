/**
 * @module
 * What every webhook is built from. Passed in by the composition root (`webhooks/cli.ts`) or a test.
 */
import type { Logger } from "pino";
import type { Policy } from "../src/policy/types.js";

export interface WebhookDeps {
  policy: Policy;
  log: Logger;
  /** Wall clock, injectable for tests. */
  now: () => Date;
}
