/**
 * @module
 * Platform defaults for a training job's `spec.runPolicy` (`jobDefaults` in the policy, laid over by the first
 * matching `namespaces[]` entry): each of `ttlSecondsAfterFinished`, `cleanPodPolicy`, `activeDeadlineSeconds`
 * and `backoffLimit` that the job leaves unset (absent or null) is set to the default, with one warning per
 * field. What the job sets is never changed, whatever its type (the validating webhook and the CRD judge it).
 *
 * Why at admission, and only on CREATE: the training operator (kubeflow/training-operator `pkg/apis/kubeflow.org/v1`,
 * `RunPolicy`) defaults `ttlSecondsAfterFinished` to none and `cleanPodPolicy` to `None`; a platform that wants
 * otherwise says so in the job itself, where users, `kubectl get -o yaml` and the reconciler all see it. Jobs
 * that existed before a default was configured keep what they had. Caffe2Job (caffe2-operator `v1alpha1`) has
 * no `runPolicy` and is left as it is.
 *
 * Pure and copy-on-write: the input is never changed, and a job with nothing to fill comes back as the very
 * same reference. Filling is idempotent: a second run finds every field set.
 *
 * @example
 * // jobDefaults: {ttlSecondsAfterFinished: 86400}; a PyTorchJob without runPolicy →
 * // spec.runPolicy: {ttlSecondsAfterFinished: 86400}, warning
 * // "quartermaster: set spec.runPolicy.ttlSecondsAfterFinished=86400 (platform default)"
 */
import type { KubeObject } from "../core/kube.js";
import { withKey } from "../core/copy.js";
import { matchesGlob } from "../core/glob.js";
import type { JobDefaults, JobKind, Policy } from "../policy/types.js";

/** The fields filled, in the order they are filled and warned about. */
export const JOB_DEFAULT_FIELDS = ["ttlSecondsAfterFinished", "cleanPodPolicy", "activeDeadlineSeconds", "backoffLimit"] as const;

export interface JobDefaultsResult {
  /** The job with its defaults, or the very same reference when nothing was filled. */
  job: KubeObject;
  /** `field=value` of each field filled. */
  filled: string[];
  warnings: string[];
}

/** The defaults in force for jobs created in `namespace`: the first matching `namespaces[]` entry's over the top-level ones. */
export function effectiveJobDefaults(policy: Policy, namespace: string): JobDefaults {
  const override = policy.namespaces.find((n) => matchesGlob(n.pattern, namespace));
  return override?.jobDefaults ? { ...policy.jobDefaults, ...override.jobDefaults } : policy.jobDefaults;
}

/** Whether the kind has a `spec.runPolicy` at all (every Kubeflow training-operator kind; not caffe2-operator's Caffe2Job). */
export function hasRunPolicy(kind: JobKind): boolean {
  return kind.framework !== "caffe2";
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** `job` with every default of `defaults` that its `spec.runPolicy` leaves unset filled in. */
export function fillJobDefaults(job: KubeObject, kind: JobKind, defaults: JobDefaults): JobDefaultsResult {
  const unchanged: JobDefaultsResult = { job, filled: [], warnings: [] };
  if (!hasRunPolicy(kind)) return unchanged;
  const spec = job.spec;
  // A job without a spec object, or whose runPolicy is not an object, is the CRD's to refuse: nothing to fill into.
  if (!isMap(spec)) return unchanged;
  const current = spec.runPolicy;
  if (current != null && !isMap(current)) return unchanged;
  let runPolicy = current;
  const filled: string[] = [];
  for (const field of JOB_DEFAULT_FIELDS) {
    const value = defaults[field];
    if (value === undefined || (runPolicy != null && runPolicy[field] != null)) continue;
    runPolicy = withKey(runPolicy, field, value);
    filled.push(`${field}=${value}`);
  }
  if (filled.length === 0) return unchanged;
  return {
    job: withKey(job, "spec", withKey(spec, "runPolicy", runPolicy)),
    filled,
    warnings: filled.map((f) => `quartermaster: set spec.runPolicy.${f} (platform default)`),
  };
}
