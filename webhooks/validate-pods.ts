/**
 * @module
 * `POST /validate/pods`: platform limits on pod CREATE, and on in-place resizes (UPDATE of the `resize`
 * subresource, on by default from Kubernetes 1.33), which change container cpu and memory after
 * admission. Fails closed (a failing rule denies with its error). A resize is held to the same rules as
 * a CREATE; as for any update, only what it makes worse than the pod before is refused. A pod too large
 * to check within the cost bound is denied. The rules themselves live in `src/validate/`.
 */
import type { V1Pod } from "@kubernetes/client-node";
import { specsCost } from "../src/core/cost.js";
import { allGuards, podGuard, unwalkedPodGuard } from "../src/admission/guards.js";
import { claimNamesDenial, readClaims, type ClaimsRead } from "../src/admission/claims.js";
import { validatingWebhook, type ValidationResult, type Webhook } from "../src/admission/handler.js";
import { enforce } from "../src/validate/enforcement.js";
import { newOrWorse } from "../src/validate/job.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { validatePod } from "../src/validate/pod.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

/** Passes the pod rules make over the containers (see `src/core/cost.ts`), counting both pods of a resize. */
export const VALIDATE_POD_PASSES = 4;

export function validatePods(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  const pool = readsOf(deps);
  return validatingWebhook({
    name: "validate-pods",
    guard: allGuards(podGuard(["CREATE"], { resize: ["UPDATE"] }), unwalkedPodGuard(policy)),
    cost: (request) => {
      const specs = [request.object.spec];
      if (request.subResource && request.oldObject) specs.push(request.oldObject.spec);
      return specsCost(specs, VALIDATE_POD_PASSES, policy.gpu.resources);
    },
    validate(request) {
      const pod = request.object as V1Pod;
      const namespace = request.namespace ?? pod.metadata?.namespace ?? "";
      // A claim that does not exist or could not be read is judged with the claims (src/validate/claims.ts, gpu-unknown).
      const decide = ({ known, tooMany }: ClaimsRead): ValidationResult => {
        // More claim names than one review may make the webhook read: refused before any read (issue 46).
        if (tooMany) return claimNamesDenial(tooMany);
        const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace), claims: known, draCapacity: deps.capacity?.draCapacity?.() };
        const now = validatePod(pod, ctx);
        const resize = request.subResource === "resize" && request.oldObject !== undefined;
        // Each violation then denies, warns or is recorded, by its rule's mode in the namespace.
        const found = resize ? newOrWorse(now, validatePod(request.oldObject!, ctx)) : now;
        return enforce(found, policy.enforcement, namespace);
      };
      const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
      return withReviewReads(pool, timeoutMs, (reader) => {
        const claims = readClaims([pod.spec], namespace, reader, timeoutMs, { fields: ["spec"] });
        return claims instanceof Promise ? claims.then(decide) : decide(claims);
      });
    },
  });
}
