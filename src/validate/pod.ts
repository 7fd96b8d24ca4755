/**
 * @module
 * `/validate/pods`: the pod-spec rules plus the accelerator and partition a pod asks for, which must be
 * among the ones allowed for its namespace (when the policy lists them).
 */
import type { V1Pod } from "@kubernetes/client-node";
import { ANNOTATION_ACCELERATOR, ANNOTATION_GPU_PARTITION } from "../keys.js";
import { validatePodSpec } from "./pod-spec.js";
import { merge, type Findings, type ValidationContext } from "./types.js";

function allowedValues(pod: V1Pod, ctx: ValidationContext): Findings {
  const out: Findings = { violations: [], warnings: [] };
  const check = (key: string, allowed: string[] | undefined, what: string): void => {
    const v = pod.metadata?.annotations?.[key]?.trim();
    if (!v || !allowed || allowed.includes(v)) return;
    out.violations.push({
      rule: "accelerator-allowed",
      field: `metadata.annotations[${key}]`,
      message: `${what} ${v} is not allowed in namespace ${ctx.namespace}; allowed: ${allowed.join(", ") || "none"}`,
    });
  };
  check(ANNOTATION_ACCELERATOR, ctx.limits.allowedAccelerators, "accelerator");
  check(ANNOTATION_GPU_PARTITION, ctx.limits.allowedPartitions, "GPU partition");
  return out;
}

export function validatePod(pod: V1Pod, ctx: ValidationContext): Findings {
  return merge(validatePodSpec(pod.spec, "spec", ctx), allowedValues(pod, ctx));
}
