/**
 * @module
 * `replica-map`, Kubeflow training-operator v1's kinds (TFJob, PyTorchJob, MXJob, XGBoostJob, PaddleJob,
 * JAXJob): `spec.<framework>ReplicaSpecs.<Type>`, a replica spec each (`replicas`, `restartPolicy`,
 * `template`); `spec.runPolicy`; finished on `Succeeded`/`Failed`; `spec.runPolicy.managedBy` other than
 * `kubeflow.org/training-operator` is another controller's. The operator runs their jobs.
 *
 * Label scheme (training-operator `pkg/controller.v1/common/util.go` GenLabels): `training.kubeflow.org/job-name`
 * (the job's name, `/` → `-`), `training.kubeflow.org/operator-name` (`tfjob-controller`, ...),
 * `training.kubeflow.org/replica-type` (lower case) and `replica-index`. Claim selector `{operator-name,
 * job-name}`; a per-replica headless Service per pod.
 */
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE } from "../core/keys.js";
import type { JobShape, KindFramework, KindShape, LabelScheme } from "./types.js";
import { replicaName, v1Common, v1Replicas } from "./v1.js";

const metaOf = (job: KubeObject): { name?: string } => job.metadata ?? {};
const nameOf = (job: KubeObject): string => String(metaOf(job).name ?? "");

function kubeflowScheme(operator: string): LabelScheme {
  const value = (job: KubeObject): string => nameOf(job).replaceAll("/", "-");
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

const framework = (replicaSpecsField: string, operatorName: string): KindFramework => ({
  replicaSpecsField,
  operatorName,
  labelScheme: kubeflowScheme(operatorName),
});

const FRAMEWORKS: Readonly<Record<string, KindFramework>> = Object.freeze({
  tensorflow: framework("tfReplicaSpecs", "tfjob-controller"),
  pytorch: framework("pytorchReplicaSpecs", "pytorchjob-controller"),
  mxnet: framework("mxReplicaSpecs", "mxjob-controller"),
  xgboost: framework("xgbReplicaSpecs", "xgboostjob-controller"),
  paddle: framework("paddleReplicaSpecs", "paddlejob-controller"),
  jax: framework("jaxReplicaSpecs", "jaxjob-controller"),
});

const SHAPE: JobShape = {
  ...v1Common,
  name: "replica-map",
  layout: "map",
  kubeflowPodLabels: true,
  scaleSubresource: true,
  specsField: (kind) => `spec.${FRAMEWORKS[kind.framework]?.replicaSpecsField}`,
  specsHint: "spec.<framework>ReplicaSpecs",
  replicas: (job, kind) => v1Replicas(job, FRAMEWORKS[kind.framework]?.replicaSpecsField, false),
  objectName: (_ns, job, type, index) => replicaName(job, type, index),
  nameHints: { shorten: "shorten the job name", service: () => "" },
  namedContainer: true,
  v1Shape: true,
  singleReplicaStatus: false,
};

export const REPLICA_MAP: KindShape = { shape: SHAPE, defaultController: "operator", frameworks: FRAMEWORKS };
