/**
 * @module
 * Label, annotation and resource names users and operators type. Quartermaster's own live under
 * `quartermaster.dev/`; Kubeflow's are as upstream.
 */
export const ANNOTATION_ACCELERATOR = "quartermaster.dev/accelerator";
export const ANNOTATION_GPU_PARTITION = "quartermaster.dev/gpu-partition";
export const ANNOTATION_INTERRUPTIBLE = "quartermaster.dev/interruptible";
/** The webhook's record: the names of the mutations that changed the pod, comma-separated. */
export const ANNOTATION_MUTATIONS = "quartermaster.dev/mutations";
export const LABEL_NAMESPACE_OPT_IN = "quartermaster.dev/enabled";

export const LABEL_JOB_NAME = "training.kubeflow.org/job-name";
export const LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name";
export const LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type";
export const LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index";
export const LABEL_JOB_ROLE = "training.kubeflow.org/job-role";

/** The PolicyReport the reconciler keeps per namespace (wg-policy-prototypes, `wgpolicyk8s.io/v1alpha2`). */
export const POLICY_REPORT_API_VERSION = "wgpolicyk8s.io/v1alpha2";
export const POLICY_REPORT_NAME = "quartermaster";

/** The `source.component` of the reconciler's Events (src/reconcile/events.ts, src/explain/blocked.ts). */
export const RECONCILER_EVENT_SOURCE = "quartermaster-reconciler";

/**
 * The field manager of the reconciler's writes (adoption and release patches, Service creates), sent as the
 * `fieldManager` parameter: the apiserver then records in the object's managedFields that this manager set the
 * job's controller reference of a pod it adopted (`src/reconcile/services.ts` reads that record). Without it the
 * apiserver derives a name from the client's user agent.
 */
export const RECONCILER_FIELD_MANAGER = "quartermaster-reconciler";
