/**
 * @module
 * `pool`, caffe2-operator's Caffe2Job: one replica spec under `spec.replicaSpecs`, type `Worker`; replica names on
 * the `<namespace>/<job>` key; no container name required; the template's restartPolicy counts. caffe2-operator
 * is archived, so Quartermaster's job controller runs these jobs unless the policy says otherwise.
 *
 * Label scheme (kubeflow/caffe2-operator `pkg/controller/controller.go` genLabels, `controller_pod.go`
 * createNewPod): `group_name: kubeflow.org`, `caffe2_job_key: <namespace>-<name>` (the cache key
 * `<namespace>/<name>` with `/` → `-`), `runtime_id: <spec.RuntimeID>`, `caffe2_replica_type: worker`,
 * `caffe2_replica_index`. Claim selector `{group_name, caffe2_job_key, runtime_id}`. The operator creates no
 * Services (its reconcileServices is commented out), so none are created here either. `RuntimeID` has no JSON
 * tag in the operator's `Caffe2JobSpec`, so it is stored as `spec.RuntimeID`.
 */
import type { KubeObject } from "../core/kube.js";
import type { JobShape, KindShape, LabelScheme } from "./types.js";
import { replicaName, v1Common, v1Replicas } from "./v1.js";

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

interface JobMeta {
  name?: string;
  namespace?: string;
}
const metaOf = (job: KubeObject): JobMeta => job.metadata ?? {};
const caffe2Key = (job: KubeObject): string => `${metaOf(job).namespace ?? ""}/${metaOf(job).name ?? ""}`.replaceAll("/", "-");

const CAFFE2: LabelScheme = {
  name: "caffe2",
  key: { label: CAFFE2_LABELS.jobKey, value: caffe2Key },
  // `caffe2_job_key: <namespace>-<name>`: the job, when the value starts with the pod's namespace.
  jobOfKey: (namespace, value) => (value.startsWith(`${namespace}-`) ? `${namespace}/${value.slice(namespace.length + 1)}` : undefined),
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

const FIELD = "replicaSpecs";

const SHAPE: JobShape = {
  ...v1Common,
  name: "pool",
  layout: "single",
  kubeflowPodLabels: true,
  scaleSubresource: true,
  specsField: () => `spec.${FIELD}`,
  specsHint: "spec.replicaSpecs",
  replicas: (job) => v1Replicas(job, FIELD, true),
  fixedReplicaType: "worker",
  objectName: (ns, job, type, index) => replicaName(`${ns}/${job}`, type, index),
  nameHints: {
    shorten: "shorten the job name (the Caffe2 controller prefixes it with the namespace)",
    service: (ns) =>
      `: the Caffe2 controller names replicas <namespace>-<job>-worker-<index>, and namespace ${JSON.stringify(ns)} does not start with a letter`,
  },
  namedContainer: false,
  restartPolicyFromTemplate: true,
  v1Shape: true,
  singleReplicaStatus: true,
};

export const POOL: KindShape = {
  shape: SHAPE,
  defaultController: "quartermaster",
  frameworks: Object.freeze({ caffe2: { replicaSpecsField: FIELD, labelScheme: CAFFE2 } }),
};
