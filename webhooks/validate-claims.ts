/**
 * @module
 * `POST /validate/claims`: GPU limits on ResourceClaim and ResourceClaimTemplate CREATE (`resource.k8s.io/v1`,
 * Dynamic Resource Allocation). A claim is what one pod using it gets at least, so its GPU devices are held to
 * the per-container and per-pod caps and the accelerator and partition allow-lists of its namespace
 * (`src/validate/claims.ts`), before any pod can name it; a pod naming it is then counted with it at the pod's
 * own CREATE (`/validate/pods`). Their specs are immutable, so CREATE is all there is to check. Fails closed.
 * Under a GPU cap, the DeviceClasses a claim names that the policy does not list are read (cluster-scoped, cached):
 * one that may select GPUs, or that is absent or unreadable, is `gpu-unknown` (src/core/dra.ts `classSelectsGpus`).
 */
import { RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, readDeviceClasses } from "../src/admission/claims.js";
import { jobGuard, jobKindOf } from "../src/admission/guards.js";
import { validatingWebhook, type Webhook } from "../src/admission/handler.js";
import { claimSpecOf, type DeviceClassRead } from "../src/core/dra.js";
import { validateClaimObject } from "../src/validate/claims.js";
import { enforce } from "../src/validate/enforcement.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { gpuCapApplies } from "../src/validate/pod-spec.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

const CLAIM_KINDS = [RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE];

export function validateClaims(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  const pool = readsOf(deps);
  return validatingWebhook({
    name: "validate-claims",
    guard: jobGuard(CLAIM_KINDS, ["CREATE"]),
    // No cost bound: the apiserver bounds a claim (at most 32 requests of at most 8 alternatives, each a few selectors).
    validate(request) {
      const kind = jobKindOf(request, CLAIM_KINDS)!;
      const namespace = request.namespace ?? "";
      const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace), draCapacity: deps.capacity?.draCapacity?.() };
      const template = kind === RESOURCE_CLAIM_TEMPLATE;
      const spec = claimSpecOf(request.object, template ? "ResourceClaimTemplate" : "ResourceClaim");
      const judge = (deviceClasses?: ReadonlyMap<string, DeviceClassRead>) => {
        const claims = deviceClasses ? { claims: new Map(), templates: new Map(), deviceClasses } : undefined;
        return enforce(validateClaimObject(spec, template ? "spec.spec" : "spec", { ...ctx, ...(claims ? { claims } : {}) }), policy.enforcement, namespace);
      };
      // Under a GPU cap, the DeviceClasses it names that the policy does not list are read: what they select.
      if (!gpuCapApplies(ctx)) return judge();
      const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
      return withReviewReads(pool, timeoutMs, (reader) => {
        const classes = readDeviceClasses([spec], policy.gpu.deviceClasses, reader, timeoutMs);
        return classes instanceof Promise ? classes.then(judge) : judge(classes);
      });
    },
  });
}
