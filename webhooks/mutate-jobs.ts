/**
 * @module
 * `POST /mutate/jobs`: the policy's `jobDefaults` written into a training job's `spec.runPolicy` on CREATE,
 * for every configured job kind, with a warning per field filled; and a TrainJob's bare `gpu` in
 * `spec.trainer.resourcesPerNode` renamed to `gpu.resourceName` (`src/mutate/trainjob-resources.ts`: its
 * Jobs would be refused, where a v1 job's pods are renamed by `/mutate/pods`). Fails open (a failing rule admits the job
 * unchanged, with a warning). UPDATEs are not sent here and pass through if they are: a job is never
 * defaulted after it was created. The rules live in `src/mutate/job-defaults.ts` and `src/mutate/trainjob-resources.ts`.
 */
import { jobGuard } from "../src/admission/guards.js";
import { mutatingWebhook, type Webhook } from "../src/admission/handler.js";
import { effectiveJobDefaults, fillJobDefaults } from "../src/mutate/job-defaults.js";
import { renameTrainJobBareGpu } from "../src/mutate/trainjob-resources.js";
import type { WebhookDeps } from "./deps.js";

export function mutateJobs(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  return mutatingWebhook({
    name: "mutate-jobs",
    guard: jobGuard(policy.jobKinds, ["CREATE"]),
    mutate(request) {
      const kind = policy.jobKinds.find((k) => k.group === request.kind.group && k.kind === request.kind.kind)!;
      const namespace = request.namespace ?? "";
      const out = fillJobDefaults(request.object, kind, effectiveJobDefaults(policy, namespace));
      const renamed = renameTrainJobBareGpu(out.job, kind, policy.gpu.resourceName);
      return { object: renamed.job, warnings: [...out.warnings, ...renamed.warnings] };
    },
  });
}
