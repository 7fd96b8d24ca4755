/**
 * @module
 * The webhooks by HTTP path, as `quartermaster serve` mounts them. A serverless host can mount the same
 * map, or call one webhook's `admit(review)` directly.
 */
import type { Webhook } from "../src/admission/handler.js";
import type { WebhookDeps } from "./deps.js";
import { mutateJobs } from "./mutate-jobs.js";
import { mutatePods } from "./mutate-pods.js";
import { validateClaims } from "./validate-claims.js";
import { validateJobs } from "./validate-jobs.js";
import { validatePods } from "./validate-pods.js";

export type { WebhookDeps } from "./deps.js";

export function createWebhooks(deps: WebhookDeps): Record<string, Webhook> {
  return {
    "/mutate/pods": mutatePods(deps),
    "/mutate/jobs": mutateJobs(deps),
    "/validate/pods": validatePods(deps),
    "/validate/jobs": validateJobs(deps),
    "/validate/claims": validateClaims(deps),
  };
}
