/**
 * @module
 * The limits in force for a namespace: the first `namespaces[]` entry whose pattern matches the name,
 * laid over the policy's `limits` section by section (a section the override leaves out keeps the default).
 * The AdmissionReview carries no namespace labels, hence name patterns.
 */
import { matchesGlob } from "../glob.js";
import type { Limits, Policy } from "../policy/types.js";

export function effectiveLimits(policy: Policy, namespace: string): Limits {
  const override = policy.namespaces.find((n) => matchesGlob(n.pattern, namespace));
  if (!override) return policy.limits;
  const o = override.limits;
  return {
    container: { ...policy.limits.container, ...o.container, gpus: { ...policy.limits.container.gpus, ...o.container?.gpus } },
    pod: { ...policy.limits.pod, ...o.pod },
    job: { ...policy.limits.job, ...o.job, replicas: { ...policy.limits.job.replicas, ...o.job?.replicas } },
    runPolicy: { ...policy.limits.runPolicy, ...o.runPolicy },
    allowedAccelerators: o.allowedAccelerators ?? policy.limits.allowedAccelerators,
    allowedPartitions: o.allowedPartitions ?? policy.limits.allowedPartitions,
  };
}
