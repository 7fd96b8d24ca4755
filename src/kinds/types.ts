/**
 * @module
 * What a job-kind shape is, as one adapter object (`KindShape`): its descriptor (`JobShape`: where the replicas
 * are and how to read them, run policy, finished conditions, managedBy, ...), the controller that runs its jobs
 * by default, and the frameworks it serves with what depends on the framework (the field of the replica specs, the
 * pods' label scheme, the operator's name). One adapter per file in this folder, listed once in `index.ts`
 * (`KIND_SHAPES`); every rule, render and reconciler decision asks the registry, never a framework name.
 */
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";

/** What the registry needs of a job kind (the policy's `jobKinds[]` entry is one): the framework names its shape. */
export interface KindRef {
  readonly framework: string;
}

/**
 * A replica spec (Kubeflow's `ReplicaSpec`) as it arrived, not validated: the pod template read with
 * client-node's types, every other field untyped (readers check what they rely on).
 */
export interface ReplicaSpec {
  replicas?: unknown;
  restartPolicy?: unknown;
  template?: V1PodTemplateSpec;
  [field: string]: unknown;
}

/** One replica type of a job, with the field paths its rules report at. */
export interface JobReplica {
  type: string;
  spec: ReplicaSpec;
  /** The replica spec's own path (e.g. `spec.pytorchReplicaSpecs.Worker`). */
  path: string;
  /** Where the replica count is. */
  replicasField: string;
  /** Where the pod template is. */
  templateField: string;
  /** A finding's field under `templateField`, moved to where the value was written (TrainJob's resourcesPerNode). */
  mapField?: (field: string) => string;
}

export type RunPolicyField = "ttlSecondsAfterFinished" | "activeDeadlineSeconds" | "backoffLimit" | "cleanPodPolicy" | "suspend";

/** A job's run policy as its shape stores it: each field's value and path. */
export interface RunPolicyView {
  /** The run-policy object as it arrived (checked to be an object), absent for a shape without one. */
  object?: { value: unknown; field: string };
  fields: Partial<Record<RunPolicyField, { value: unknown; field: string }>>;
  /** Where a field is (set or not), or undefined when the shape has no such field. */
  at(field: RunPolicyField): string | undefined;
}

/** The descriptor of a shape: everything the webhooks and the reconciler ask of a job that depends on its layout. */
export interface JobShape {
  /** The shape's name (`replica-map`, `pool`, `trainjob`, ...). */
  name: string;
  /** Where the replicas are, for "none at all" messages. */
  specsField(kind: KindRef): string;
  /** The same for any kind of the shape (the job controller's problem lines). */
  specsHint: string;
  /** The job's replicas; `runtime` is a TrainJob's (Cluster)TrainingRuntime (ignored by other shapes). */
  replicas(job: KubeObject, kind: KindRef, runtime?: KubeObject): JobReplica[];
  /**
   * Where the replicas live: a map of replica specs (`replica-map`), one spec (`pool`), or the runtime's
   * replicated Jobs (`runtime`: the job alone gives its own part, `replicas` without a runtime).
   */
  layout: "map" | "single" | "runtime";
  /** The job's runtime reference (TrainJob `spec.runtimeRef`), for shapes whose replicas are a runtime's. */
  runtimeRef?(job: KubeObject): { kind: string; name: string; apiGroup: string } | undefined;
  /**
   * Whether its pods get the Kubeflow v1 labels (`training-labels` mutation: job-name, replica-type, index,
   * job-role). Not a TrainJob's: JobSet labels them itself, and v1 labels would name replica types and indexes
   * no training operator made (DECIDE).
   */
  kubeflowPodLabels: boolean;
  /** Whether the kind's CRD has a `scale` subresource (`/validate/jobs` then checks scalings). */
  scaleSubresource: boolean;
  /** The replica type every pod of the job has, whatever its labels (pool: `worker`). */
  fixedReplicaType?: string;
  /** The name of replica `index` of type `type`: its pod's (hostname's) and its Service's. */
  objectName(namespace: string, job: string, type: string, index: number): string;
  /** How to fix a replica name over 63 characters; why a Service name is no DNS-1035 label (appended). */
  nameHints: { shorten: string; service(namespace: string): string };
  /** Whether a replica template must have a container named as the framework's default (`FRAMEWORKS`). */
  namedContainer: boolean;
  /** Whether the template's restartPolicy is the pods' when the replica spec sets none. */
  restartPolicyFromTemplate: boolean;
  /** Whether the v1 operators' webhook rules on replica types and the framework container apply (`job-shape`). */
  v1Shape: boolean;
  runPolicy(job: KubeObject): RunPolicyView;
  /** Condition types that, with status True, mean the job has finished. */
  finishedConditions: readonly string[];
  /** When the job finished, from its status (given it has). */
  completionTime(job: KubeObject): string | undefined;
  /** Why another controller manages the job, or undefined when it is the operator's (and so Quartermaster's). */
  managedElsewhere(job: KubeObject): string | undefined;
  /** Where a job-gpus finding points (v1: `spec`; TrainJob: the numNodes or resourcesPerNode it sets). */
  jobGpusField(job: KubeObject): string;
  /** The replica status map as the kind stores it (pool: a single object). */
  singleReplicaStatus: boolean;
}

/**
 * How a kind labels and selects its pods (read by adoption and release, the per-replica Services, the device
 * ledger's job attribution, the replica lookup, the pod webhooks' match conditions and guard).
 *
 * `key` is the one label that names the job: a controlled object without it, or with another value, no longer
 * belongs to the job (released). The other selector labels release only when present with another value, so a
 * pod the job controls is never released merely for lacking some labels (another scheme's or a tool's).
 */
export interface LabelScheme {
  /** The scheme's name (`kubeflow`, `caffe2`, `jobset`, ...): kinds sharing a scheme share its name. */
  name: string;
  /** The label naming the job on its pods, and the value it has for `job`. */
  key: { label: string; value(job: KubeObject): string };
  /**
   * The job a pod names by `key` (`<namespace>/<name>`), read back from the label's value, for the ledger's
   * attribution of a pod no job kind controls; absent when the value is the job's name itself.
   */
  jobOfKey?(namespace: string, value: string): string | undefined;
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

/** What depends on the framework within a shape. */
export interface KindFramework {
  /** The field of the job spec holding the replica specs (`tfReplicaSpecs`, `replicaSpecs`, ...). */
  readonly replicaSpecsField: string;
  readonly labelScheme: LabelScheme;
  /** The training operator's controller name (`training.kubeflow.org/operator-name`), where it has one. */
  readonly operatorName?: string;
}

/** One shape of job kind: the registry's entry (`KIND_SHAPES` in `index.ts`). */
export interface KindShape {
  readonly shape: JobShape;
  /** Who runs the kind's jobs when `jobKinds[].controller` is unset. */
  readonly defaultController: "operator" | "quartermaster";
  /** The frameworks whose kinds have this shape (a policy's `jobKinds[].framework`), each with its facts. */
  readonly frameworks: Readonly<Record<string, KindFramework>>;
}
