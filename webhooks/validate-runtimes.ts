/**
 * @module
 * A Kubeflow Trainer v2 TrainingRuntime or ClusterTrainingRuntime at CREATE and UPDATE, as `/validate/jobs` checks
 * it (issue 45; the jobs webhook's configuration lists both kinds when the policy has a Trainer job kind,
 * src/manifests/webhooks.ts): its replicated Jobs' pod templates against the per-container and per-pod caps
 * (`src/validate/runtime.ts`, which says which limits each kind is held to and why). An UPDATE is refused only for
 * what it makes worse, as a job's is (a runtime over a cap lowered later can still be relabelled). Priced as a job
 * is (`src/core/cost.ts`). Fails closed, with the jobs webhook.
 */
import type { ReviewCost } from "../src/core/cost.js";
import { specsCost } from "../src/core/cost.js";
import { jobKindOf } from "../src/admission/guards.js";
import type { ValidationResult } from "../src/admission/handler.js";
import type { AdmissionRequest } from "../src/admission/types.js";
import { TRAINER_RUNTIME_KINDS } from "../src/core/job-shapes.js";
import type { KubeObject } from "../src/core/kube.js";
import type { Policy } from "../src/policy/types.js";
import { enforce } from "../src/validate/enforcement.js";
import { newOrWorse } from "../src/validate/job.js";
import { runtimeContext, runtimePodSpecs, validateRuntime } from "../src/validate/runtime.js";

/** The Trainer runtime kind of the request, when it is one and the policy has a Trainer job kind. */
export function runtimeKindOf(request: AdmissionRequest, policy: Pick<Policy, "jobKinds">): (typeof TRAINER_RUNTIME_KINDS)[number] | undefined {
  if (!policy.jobKinds.some((k) => k.framework === "trainer")) return undefined;
  return jobKindOf(request, TRAINER_RUNTIME_KINDS);
}

/** A runtime's review priced: its pod templates (and the old object's), `passes` rule passes each. */
export function runtimeCost(request: AdmissionRequest & { object: KubeObject }, passes: number, policy: Policy): ReviewCost {
  const specs = [request.object, ...(request.oldObject ? [request.oldObject] : [])].flatMap((o) => runtimePodSpecs(o).map((s) => s.spec));
  return specsCost(specs, passes, policy.gpu.resources);
}

/** A runtime's review decided. */
export function validateRuntimeReview(
  request: AdmissionRequest & { object: KubeObject },
  kind: (typeof TRAINER_RUNTIME_KINDS)[number],
  policy: Policy,
): ValidationResult {
  // A ClusterTrainingRuntime serves every namespace: the policy's own limits; a TrainingRuntime its namespace's.
  const ctx = runtimeContext(policy, kind.scope, request.namespace ?? "");
  const now = validateRuntime(request.object, ctx);
  const found = request.operation === "UPDATE" && request.oldObject ? newOrWorse(now, validateRuntime(request.oldObject, ctx)) : now;
  return enforce(found, policy.enforcement, ctx.namespace);
}
