/**
 * @module
 * `POST /validate/pods`: platform limits on pod CREATE, and on in-place resizes (UPDATE of the `resize`
 * subresource, on by default from Kubernetes 1.33), which change container cpu and memory after
 * admission. Fails closed (a failing rule denies with its error). A resize is held to the same rules as
 * a CREATE; as for any update, only what it makes worse than the pod before is refused. A pod too large
 * to check within the cost bound is denied. The rules themselves live in `src/validate/`.
 *
 * A pod that names ResourceClaims, made by a job (its controller: a training job, a batch Job, a JobSet's Job), where
 * a per-job GPU cap applies, is also judged with its job: the job's GPUs counted with the claims and templates as they
 * are now (`src/validate/pod-job.ts`), read past the cache. The reads: the job (cached), then each claim's metadata
 * (its whole object only when it changed).
 */
import type { V1Pod, V1PodSpec } from "@kubernetes/client-node";
import { specsCost } from "../src/core/cost.js";
import { allGuards, podGuard, unwalkedPodGuard } from "../src/admission/guards.js";
import { claimNames, claimNamesDenial, readClaims, withDeviceClasses, type ClaimsRead, type ReadClaimsOptions } from "../src/admission/claims.js";
import { validatingWebhook, type ValidationResult, type Webhook } from "../src/admission/handler.js";
import { enforce } from "../src/validate/enforcement.js";
import { newOrWorse } from "../src/validate/job.js";
import { effectiveLimits } from "../src/validate/limits.js";
import { gpuCapApplies } from "../src/validate/pod-spec.js";
import { validatePod } from "../src/validate/pod.js";
import { readPodJob } from "../src/admission/pod-job.js";
import { hasResourceClaims } from "../src/core/dra.js";
import { ownerTemplateSpecs } from "../src/membership/owner.js";
import type { JobReader } from "../src/membership/types.js";
import type { Policy } from "../src/policy/types.js";
import { keptJobFindings, podJobFindings, type PodJob } from "../src/validate/pod-job.js";
import { merge } from "../src/validate/types.js";
import { readsOf, withReviewReads, type WebhookDeps } from "./deps.js";

/** Passes the pod rules make over the containers (see `src/core/cost.ts`), counting both pods of a resize. */
export const VALIDATE_POD_PASSES = 4;

/** Reads the claims some pod specs name (and under a GPU cap the DeviceClasses they name that the policy does not list). */
type ReadClaims = (specs: (V1PodSpec | undefined)[], options: ReadClaimsOptions) => ClaimsRead | Promise<ClaimsRead>;

/**
 * A DRA pod judged with the job it counts against: the job read (`readPodJob`), then the claims the pod and the job's
 * templates name, each as it is now (`fresh`: a template created again within the cache's window must not pass).
 */
async function judgedWithJob(
  pod: V1Pod,
  namespace: string,
  policy: Policy,
  reader: JobReader,
  read: ReadClaims,
): Promise<{ claims: ClaimsRead; job?: PodJob }> {
  const owner = await readPodJob(pod, namespace, policy, reader, policy.clusterSpec.jobLookupTimeoutMs);
  // No job: the pod's own claims, through the cache, as for any pod (its caps are its claims' own CREATE's too).
  if (owner.kind === "none") return { claims: await read([pod.spec], { fields: ["spec"] }) };
  const job: PodJob = owner.kind === "found" ? owner : { failed: owner.reason };
  const templates = owner.kind === "found" ? ownerTemplateSpecs(owner.job, owner.owner, policy) : [];
  return { claims: await read([pod.spec, ...templates], { fields: ["spec", ...templates.map(() => undefined)], fresh: true }), job };
}

export function validatePods(deps: WebhookDeps): Webhook {
  const { policy } = deps;
  const pool = readsOf(deps);
  // A DRA job's findings, judged once for its launch's pods (src/validate/pod-job.ts).
  const kept = keptJobFindings();
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
      const limits = effectiveLimits(policy, namespace);
      const resize = request.subResource === "resize" && request.oldObject !== undefined;
      // A claim that does not exist or could not be read is judged with the claims (src/validate/claims.ts, gpu-unknown).
      const decide = ({ known, tooMany }: ClaimsRead, job?: PodJob): ValidationResult => {
        // More claim names than one review may make the webhook read: refused before any read (issue 46).
        if (tooMany) return claimNamesDenial(tooMany);
        const ctx = { policy, namespace, limits, claims: known, draCapacity: deps.capacity?.draCapacity?.() };
        const now = merge(validatePod(pod, ctx), podJobFindings(pod.spec, job, ctx, kept));
        // Each violation then denies, warns or is recorded, by its rule's mode in the namespace.
        const found = resize ? newOrWorse(now, validatePod(request.oldObject!, ctx)) : now;
        return enforce(found, policy.enforcement, namespace);
      };
      const timeoutMs = policy.clusterSpec.jobLookupTimeoutMs;
      // Under a GPU cap, the DeviceClasses the claims name that the policy does not list are read too (what they select).
      const capped = gpuCapApplies({ policy, namespace, limits });
      return withReviewReads(pool, timeoutMs, (reader) => {
        const read: ReadClaims = (specs, options) => {
          const claims = readClaims(specs, namespace, reader, timeoutMs, options);
          if (!capped) return claims;
          const classes = (c: ClaimsRead) => withDeviceClasses(c, policy.gpu.deviceClasses, reader, timeoutMs);
          return claims instanceof Promise ? claims.then(classes) : classes(claims);
        };
        // A DRA pod's CREATE under a job cap: its job, then its claims and the job's read as they are now (src/validate/pod-job.ts).
        if (!resize && limits.job.gpus !== undefined && hasResourceClaims(pod.spec)) {
          // The claim-name bound first, at once: a pod over it is refused before any read (from a stand-in too).
          const names = claimNames([pod.spec], { fields: ["spec"] });
          if ("tooMany" in names) return claimNamesDenial(names.tooMany);
          return judgedWithJob(pod, namespace, policy, reader, read).then(({ claims, job }) => decide(claims, job));
        }
        const claims = read([pod.spec], { fields: ["spec"] });
        return claims instanceof Promise ? claims.then((c) => decide(c)) : decide(claims);
      });
    },
  });
}
