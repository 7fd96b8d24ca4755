/**
 * @module
 * `POST /validate/jobs`: limits and shape rules on training-job CREATE and UPDATE, for every configured
 * job kind. Fails closed. An UPDATE is refused only for what it makes worse. The rules live in `src/validate/`.
 */
import { jobGuard } from "../src/admission/guards.js";
import { validatingWebhook, type Webhook } from "../src/admission/handler.js";
import { newOrWorse, validateCapacity, validateJob } from "../src/validate/job.js";
import { merge } from "../src/validate/types.js";
import { effectiveLimits } from "../src/validate/limits.js";
import type { WebhookDeps } from "./deps.js";

export function validateJobs(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  return validatingWebhook({
    name: "validate-jobs",
    guard: jobGuard(policy.jobKinds, ["CREATE", "UPDATE"]),
    validate(request) {
      const kind = policy.jobKinds.find((k) => k.group === request.kind.group && k.kind === request.kind.kind)!;
      const namespace = request.namespace ?? "";
      const ctx = { policy, namespace, limits: effectiveLimits(policy, namespace) };
      const check = (job: typeof request.object) => merge(validateJob(job, kind, ctx), validateCapacity(job, kind, ctx, deps.capacity?.current()));
      const now = check(request.object);
      if (request.operation === "UPDATE" && request.oldObject) return newOrWorse(now, check(request.oldObject));
      return now;
    },
  });
}
