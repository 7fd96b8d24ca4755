/**
 * @module
 * The webhooks by HTTP path, as `quartermaster serve` mounts them. A serverless host can mount the same
 * map, or call one webhook's `admit(review)` directly.
 */
import type { Webhook } from "../src/admission/handler.js";
import { readsOf, type WebhookDeps } from "./deps.js";
import { mutateJobs } from "./mutate-jobs.js";
import { mutatePods } from "./mutate-pods.js";
import { validateClaims } from "./validate-claims.js";
import { validateJobs } from "./validate-jobs.js";
import { validatePods } from "./validate-pods.js";

export type { WebhookDeps } from "./deps.js";

export function createWebhooks(given: WebhookDeps): Record<string, Webhook> {
  // One read pool for every webhook: reviews of all of them take turns on the one client (issue 46).
  const deps = { ...given, reads: readsOf(given) };
  return {
    "/mutate/pods": mutatePods(deps),
    "/mutate/jobs": mutateJobs(deps),
    "/validate/pods": validatePods(deps),
    "/validate/jobs": validateJobs(deps),
    "/validate/claims": validateClaims(deps),
  };
}
