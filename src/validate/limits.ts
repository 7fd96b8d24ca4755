/**
 * @module
 * The limits in force for a namespace: the first `namespaces[]` entry whose pattern matches the name,
 * laid over the policy's `limits` section by section (a section the override leaves out keeps the default).
 * The AdmissionReview carries no namespace labels, hence name patterns.
 */
import { matchesGlob } from "../core/glob.js";
import type { Limits, NamespaceOverride, Policy } from "../policy/types.js";

export function effectiveLimits(policy: Policy, namespace: string): Limits {
  return overrideLimits(
    policy,
    policy.namespaces.find((n) => matchesGlob(n.pattern, namespace)),
  );
}

/** The policy's limits with one `namespaces[]` entry laid over them (the defaults when there is none). */
export function overrideLimits(policy: Policy, override: NamespaceOverride | undefined): Limits {
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
