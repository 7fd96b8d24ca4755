/**
 * @module
 * How each job kind labels and selects its pods: one declaration per framework, read by adoption and release
 * (`src/reconcile/claim.ts`), the per-replica Services (`src/reconcile/services.ts`), the device ledger's job
 * attribution, the replica lookup (`src/topology/resolve.ts`) and the cluster-spec webhook's Caffe2 `RUN_ID`.
 *
 * - Kubeflow scheme (training-operator `pkg/controller.v1/common/util.go` GenLabels, the six Kubeflow kinds):
 *   `training.kubeflow.org/job-name` (the job's name, `/` → `-`), `training.kubeflow.org/operator-name`
 *   (`tfjob-controller`, ...), `training.kubeflow.org/replica-type` (lower case) and `replica-index`. Claim
 *   selector `{operator-name, job-name}`; a per-replica headless Service per pod.
 * - caffe2-operator's scheme (kubeflow/caffe2-operator `pkg/controller/controller.go` genLabels,
 *   `controller_pod.go` createNewPod): `group_name: kubeflow.org`, `caffe2_job_key: <namespace>-<name>` (the
 *   cache key `<namespace>/<name>` with `/` → `-`), `runtime_id: <spec.RuntimeID>`, `caffe2_replica_type: worker`,
 *   `caffe2_replica_index`. Claim selector `{group_name, caffe2_job_key, runtime_id}`. The operator creates no
 *   Services (its reconcileServices is commented out), so none are created here either. `RuntimeID` has no JSON
 *   tag in the operator's `Caffe2JobSpec`, so it is stored as `spec.RuntimeID`.
 *
 * `key` is the one label that names the job: a controlled object without it, or with another value, no longer
 * belongs to the job (released). The other selector labels release only when present with another value, so a
 * pod the job controls is never released merely for lacking some labels (another scheme's or a tool's).
 */
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE } from "../core/keys.js";
import { JOBSET_LABELS } from "../core/job-shapes.js";
import type { Framework, JobKind } from "../policy/types.js";

export interface LabelScheme {
  name: "kubeflow" | "caffe2" | "jobset";
  /** The label naming the job on its pods, and the value it has for `job`. */
  key: { label: string; value(job: KubeObject): string };
  /** Every label an object must carry (with these values) to be adopted by the job; includes `key`. */
  selector(job: KubeObject): Record<string, string>;
  replicaTypeLabel: string;
  replicaIndexLabel: string;
  /** Whether the framework's operator gives every replica pod a headless Service of its name. */
  services: boolean;
  /** The labels the job controller gives replica `index`, when the scheme fixes them all (caffe2-operator's genLabels). */
  replicaLabels?(job: KubeObject, index: number): Record<string, string>;
  /** Labels every pod of the scheme carries (all of them): the pod webhooks' match condition and guard look for them. */
  podLabels: readonly string[];
  /** Whether the reconciler adopts and releases the job's pods and Services by `selector` (not JobSet's: its Jobs own them). */
  claimed: boolean;
}

interface JobMeta {
  name?: string;
  namespace?: string;
}
const metaOf = (job: KubeObject): JobMeta => job.metadata ?? {};

/** The training operator's controller names (`training.kubeflow.org/operator-name`). */
export const OPERATOR_NAMES: Record<Framework, string | undefined> = {
  tensorflow: "tfjob-controller",
  pytorch: "pytorchjob-controller",
  mxnet: "mxjob-controller",
  xgboost: "xgboostjob-controller",
  paddle: "paddlejob-controller",
  jax: "jaxjob-controller",
  caffe2: undefined,
  trainer: undefined,
};

function kubeflowScheme(operator: string): LabelScheme {
  const value = (job: KubeObject): string => String(metaOf(job).name ?? "").replaceAll("/", "-");
  return {
    name: "kubeflow",
    key: { label: LABEL_JOB_NAME, value },
    selector: (job) => ({ [LABEL_JOB_NAME]: value(job), [LABEL_OPERATOR_NAME]: operator }),
    replicaTypeLabel: LABEL_REPLICA_TYPE,
    replicaIndexLabel: LABEL_REPLICA_INDEX,
    podLabels: [LABEL_JOB_NAME],
    services: true,
    claimed: true,
  };
}

export const CAFFE2_GROUP_NAME = "kubeflow.org";
export const CAFFE2_LABELS = {
  group: "group_name",
  jobKey: "caffe2_job_key",
  runtimeId: "runtime_id",
  replicaType: "caffe2_replica_type",
  replicaIndex: "caffe2_replica_index",
} as const;

/** A Caffe2Job's runtime id as caffe2-operator stores it (`spec.RuntimeID`, no JSON tag); "" when unset. */
export function caffe2RuntimeId(job: KubeObject): string {
  const id = ((job.spec ?? {}) as { RuntimeID?: unknown }).RuntimeID;
  return typeof id === "string" ? id : "";
}

const caffe2Key = (job: KubeObject): string => `${metaOf(job).namespace ?? ""}/${metaOf(job).name ?? ""}`.replaceAll("/", "-");

const CAFFE2: LabelScheme = {
  name: "caffe2",
  key: { label: CAFFE2_LABELS.jobKey, value: caffe2Key },
  selector: (job) => ({ [CAFFE2_LABELS.group]: CAFFE2_GROUP_NAME, [CAFFE2_LABELS.jobKey]: caffe2Key(job), [CAFFE2_LABELS.runtimeId]: caffe2RuntimeId(job) }),
  replicaTypeLabel: CAFFE2_LABELS.replicaType,
  replicaIndexLabel: CAFFE2_LABELS.replicaIndex,
  replicaLabels: (job, index) => ({
    [CAFFE2_LABELS.group]: CAFFE2_GROUP_NAME,
    [CAFFE2_LABELS.jobKey]: caffe2Key(job),
    [CAFFE2_LABELS.runtimeId]: caffe2RuntimeId(job),
    [CAFFE2_LABELS.replicaType]: "worker",
    [CAFFE2_LABELS.replicaIndex]: String(index),
  }),
  podLabels: [CAFFE2_LABELS.jobKey, CAFFE2_LABELS.group],
  services: false,
  claimed: true,
};

/**
 * JobSet's labels (sigs.k8s.io/jobset v0.12.0 `api/jobset/v1alpha2/jobset_types.go`), on the pods of a TrainJob's
 * JobSet, which the Trainer names after the TrainJob: `jobset.sigs.k8s.io/jobset-name` names the job,
 * `replicatedjob-name` the replica type, `batch.kubernetes.io/job-completion-index` the index within its Job.
 * The pods are the Jobs' (the Trainer's controller owns the JobSet, JobSet the Jobs): never claimed, no
 * Services of Quartermaster's (JobSet makes its own headless Service).
 */
const JOBSET: LabelScheme = {
  name: "jobset",
  key: { label: JOBSET_LABELS.jobsetName, value: (job) => String(metaOf(job).name ?? "") },
  selector: (job) => ({ [JOBSET_LABELS.jobsetName]: String(metaOf(job).name ?? "") }),
  replicaTypeLabel: JOBSET_LABELS.replicatedJobName,
  replicaIndexLabel: JOBSET_LABELS.completionIndex,
  podLabels: [JOBSET_LABELS.jobsetName],
  services: false,
  claimed: false,
};

const SCHEMES: Record<Framework, LabelScheme> = {
  tensorflow: kubeflowScheme(OPERATOR_NAMES.tensorflow!),
  pytorch: kubeflowScheme(OPERATOR_NAMES.pytorch!),
  mxnet: kubeflowScheme(OPERATOR_NAMES.mxnet!),
  xgboost: kubeflowScheme(OPERATOR_NAMES.xgboost!),
  paddle: kubeflowScheme(OPERATOR_NAMES.paddle!),
  jax: kubeflowScheme(OPERATOR_NAMES.jax!),
  caffe2: CAFFE2,
  trainer: JOBSET,
};

/** The label scheme of a job kind. */
export function labelScheme(kind: Pick<JobKind, "framework">): LabelScheme {
  return SCHEMES[kind.framework];
}

/** The distinct `key` labels of the claimed schemes (for indexing orphans by the job they name). */
export const KEY_LABELS: readonly string[] = [
  ...new Set(
    Object.values(SCHEMES)
      .filter((s) => s.claimed)
      .map((s) => s.key.label),
  ),
];

const SCHEME_ORDER: readonly LabelScheme["name"][] = ["kubeflow", "caffe2", "jobset"];

/** The distinct label schemes of `kinds`, in a fixed order (Kubeflow's, caffe2-operator's, JobSet's). */
export function schemesOf(kinds: ReadonlyArray<Pick<JobKind, "framework">>): LabelScheme[] {
  const found = new Map<LabelScheme["name"], LabelScheme>();
  for (const k of kinds) found.set(labelScheme(k).name, labelScheme(k));
  return SCHEME_ORDER.filter((n) => found.has(n)).map((n) => found.get(n)!);
}
