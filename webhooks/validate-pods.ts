/**
 * @module
 * `POST /validate/pods`: platform limits on pod CREATE. Fails closed (a failing rule denies with its error).
 * The rules themselves live in `src/validate/`.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { podGuard } from "../src/admission/guards.js";
import { validatingWebhook, type Webhook } from "../src/admission/handler.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { validatePod } from "../src/validate/pod.js";
import type { WebhookDeps } from "./deps.js";

export function validatePods(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  return validatingWebhook({
    name: "validate-pods",
    guard: podGuard(["CREATE"]),
    validate(request) {
      const pod = request.object as V1Pod;
      const namespace = request.namespace ?? pod.metadata?.namespace ?? "";
      return validatePod(pod, { policy, namespace, limits: effectiveLimits(policy, namespace) });
    },
  });
}
