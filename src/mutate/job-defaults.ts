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
 * Kubeflow Trainer v2's TrainJob has no `runPolicy` either; the defaults that have a TrainJob meaning go where
 * it keeps them (`fillTrainJobDefaults`): `activeDeadlineSeconds` into `spec.activeDeadlineSeconds` (its own
 * field, same meaning: the Trainer fails the TrainJob past it), `ttlSecondsAfterFinished` into the annotation
 * `quartermaster.dev/ttl-seconds-after-finished` (the Trainer has no TTL, kubeflow/trainer#2899: Quartermaster's
 * reconciler deletes the finished TrainJob, as for v1 kinds). Left out, with the reason: `cleanPodPolicy` (JobSet
 * keeps a finished TrainJob's pods until the TrainJob is deleted; there is no field that says otherwise) and
 * `backoffLimit` (a TrainJob's retries are its runtime's JobSet `failurePolicy.maxRestarts` and its Jobs'
 * backoffLimit, which the TrainJob cannot set: runtimePatches carry neither).
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
import { ANNOTATION_TTL_AFTER_FINISHED } from "../core/job-shapes.js";
import type { JobDefaults, JobKind, Policy } from "../policy/types.js";
import { jobShape } from "../kinds/index.js";
import { isObject } from "../core/object.js";

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

/** Whether the kind has a `spec.runPolicy` at all (every Kubeflow training-operator kind; not caffe2-operator's Caffe2Job, not TrainJob). */
export function hasRunPolicy(kind: JobKind): boolean {
  return jobShape(kind).name === "replica-map";
}

/** `job` with every default of `defaults` that its `spec.runPolicy` leaves unset filled in. */
export function fillJobDefaults(job: KubeObject, kind: JobKind, defaults: JobDefaults): JobDefaultsResult {
  const unchanged: JobDefaultsResult = { job, filled: [], warnings: [] };
  if (jobShape(kind).name === "trainjob") return fillTrainJobDefaults(job, defaults);
  if (!hasRunPolicy(kind)) return unchanged;
  const spec = job.spec;
  // A job without a spec object, or whose runPolicy is not an object, is the CRD's to refuse: nothing to fill into.
  if (!isObject(spec)) return unchanged;
  const current = spec.runPolicy;
  if (current != null && !isObject(current)) return unchanged;
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

/** The TrainJob's TTL annotation's value set (a string: annotations are), or undefined. */
const ttlAnnotation = (job: KubeObject): unknown =>
  isObject(job.metadata) && isObject(job.metadata.annotations) ? job.metadata.annotations[ANNOTATION_TTL_AFTER_FINISHED] : undefined;

/** A TrainJob's defaults (see the module's comment): the TTL as an annotation, activeDeadlineSeconds in its spec. */
function fillTrainJobDefaults(job: KubeObject, defaults: JobDefaults): JobDefaultsResult {
  const unchanged: JobDefaultsResult = { job, filled: [], warnings: [] };
  const spec = job.spec;
  if (!isObject(spec)) return unchanged;
  let out = job;
  const filled: string[] = [];
  const warnings: string[] = [];
  const ttl = defaults.ttlSecondsAfterFinished;
  if (ttl !== undefined && ttlAnnotation(job) == null && (job.metadata == null || isObject(job.metadata))) {
    const metadata = job.metadata ?? {};
    const annotations = metadata.annotations;
    if (annotations == null || isObject(annotations)) {
      out = withKey(out, "metadata", withKey(metadata, "annotations", withKey(annotations ?? {}, ANNOTATION_TTL_AFTER_FINISHED, String(ttl))));
      filled.push(`ttlSecondsAfterFinished=${ttl}`);
      warnings.push(`quartermaster: set metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]=${ttl} (platform default ttlSecondsAfterFinished)`);
    }
  }
  const deadline = defaults.activeDeadlineSeconds;
  if (deadline !== undefined && spec.activeDeadlineSeconds == null) {
    out = withKey(out, "spec", withKey(spec, "activeDeadlineSeconds", deadline));
    filled.push(`activeDeadlineSeconds=${deadline}`);
    warnings.push(`quartermaster: set spec.activeDeadlineSeconds=${deadline} (platform default)`);
  }
  return filled.length === 0 ? unchanged : { job: out, filled, warnings };
}
