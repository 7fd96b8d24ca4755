/**
 * @module
 * `/validate/pods`: the pod-spec rules plus the accelerators and partitions a pod asks for, which must be
 * among the ones allowed for its namespace (when the policy lists them; `accelerator.ts`), and the same limits on
 * GPUs asked for through ResourceClaims (`claims.ts`).
 */
import type { V1Pod } from "@kubernetes/client-node";
import { validateAccelerators } from "./accelerator.js";
import { validatePodClaims } from "./claims.js";
import { validatePodSpec } from "./pod-spec.js";
import { merge, type Findings, type ValidationContext } from "./types.js";

export function validatePod(pod: V1Pod, ctx: ValidationContext): Findings {
  return merge(validatePodSpec(pod.spec, "spec", ctx), validateAccelerators(pod.metadata, pod.spec, ctx), validatePodClaims(pod.spec, "spec", ctx));
}
