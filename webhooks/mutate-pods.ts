/**
 * @module
 * `POST /mutate/pods`: outfits training pods on CREATE. Fails open (a failing rule admits the pod
 * unchanged, with a warning). The mutations themselves live in `src/mutate/`.
 */
import { podGuard } from "../src/admission/guards.js";
import { mutatingWebhook, type Webhook } from "../src/admission/handler.js";
import type { KubeObject } from "../src/admission/types.js";
import { mutatePod, type Pod } from "../src/mutate/index.js";
import type { WebhookDeps } from "./deps.js";

export function mutatePods(deps: WebhookDeps): Webhook {
  return mutatingWebhook({
    name: "mutate-pods",
    guard: podGuard(["CREATE"]),
    mutate(request) {
      const pod = request.object as Pod;
      const namespace = request.namespace ?? pod.metadata?.namespace ?? "";
      const out = mutatePod(pod, { policy: deps.policy, namespace });
      return { object: out.pod as KubeObject, warnings: out.warnings };
    },
  });
}
