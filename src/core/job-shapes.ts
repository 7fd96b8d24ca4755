/**
 * @module
 * Constants of the job-kind APIs that the bottom of the house needs (Kubeflow Trainer v2's, JobSet's), and the
 * kinds Kueue queues that are not training jobs. The shapes of the training-job kinds and their lookups are the
 * kinds registry's (`src/kinds/index.ts`).
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "./kube.js";
import { isObject } from "./object.js";

/** Kubeflow Trainer v2 (`trainer.kubeflow.org`), as its v2.3.0 API and constants spell it. */
export const TRAINER = Object.freeze({
  group: "trainer.kubeflow.org",
  version: "v1alpha1",
  /** `spec.managedBy` of a TrainJob the Trainer's own controller runs (its CRD's only other value is MultiKueue's). */
  controllerName: "trainer.kubeflow.org/trainjob-controller",
  /** The replicated Job and the container of the trainer nodes (`pkg/constants` Node). */
  node: "node",
  /** The label on a runtime's replicatedJob template marking the trainer step (`LabelTrainJobAncestor`). */
  ancestorLabel: "trainer.kubeflow.org/trainjob-ancestor-step",
  ancestorTrainer: "trainer",
  /** TrainJob status conditions with status True once it has finished (`TrainJobComplete`, `TrainJobFailed`). */
  finishedConditions: ["Complete", "Failed"] as readonly string[],
  runtimeKinds: ["ClusterTrainingRuntime", "TrainingRuntime"] as readonly string[],
});

/**
 * The Trainer's runtime kinds as resources (`/validate/runtimes` checks them itself, issue 45): the cluster-scoped
 * ClusterTrainingRuntime and the namespaced TrainingRuntime, `trainer.kubeflow.org/v1alpha1`.
 */
export const TRAINER_RUNTIME_KINDS = Object.freeze([
  { group: TRAINER.group, version: TRAINER.version, kind: "ClusterTrainingRuntime", plural: "clustertrainingruntimes", scope: "Cluster" },
  { group: TRAINER.group, version: TRAINER.version, kind: "TrainingRuntime", plural: "trainingruntimes", scope: "Namespaced" },
] as const);

/** JobSet (`jobset.x-k8s.io`, sigs.k8s.io/jobset v0.12.0) labels on the pods of a JobSet, hence of a TrainJob. */
export const JOBSET_LABELS = Object.freeze({
  jobsetName: "jobset.sigs.k8s.io/jobset-name",
  replicatedJobName: "jobset.sigs.k8s.io/replicatedjob-name",
  jobIndex: "jobset.sigs.k8s.io/job-index",
  completionIndex: "batch.kubernetes.io/job-completion-index",
});

/**
 * Quartermaster's TTL for a job kind without a `ttlSecondsAfterFinished` field of its own (TrainJob:
 * kubeflow/trainer#2899): seconds after it finished, a whole number, written by the user or by `/mutate/jobs`
 * from `jobDefaults.ttlSecondsAfterFinished`. Unset: never deleted.
 */
export const ANNOTATION_TTL_AFTER_FINISHED = "quartermaster.dev/ttl-seconds-after-finished";

/**
 * A kind Kueue queues that is not a training-job kind (issue 33): a batch Job or a JobSet carrying a queue name
 * is admitted by Kueue from its pod templates, like a training job, so `/mutate/jobs` outfits those templates at
 * CREATE (`src/mutate/job-templates.ts`). Nothing else of Quartermaster's applies to them: their pods are
 * outfitted at CREATE like any GPU pod, and they get no run-policy defaults, cluster spec or cleanup.
 */
export interface QueuedWorkloadKind {
  group: string;
  version: string;
  kind: string;
  plural: string;
  /**
   * Where the object's pod templates are, as paths of keys and indices from the object's root (e.g.
   * `["spec", "template"]`); only those that exist in `obj`.
   */
  templatePaths(obj: Record<string, unknown>): Array<Array<string | number>>;
}

const objectAt = (o: unknown, key: string): Record<string, unknown> | undefined => {
  const v = isObject(o) ? o[key] : undefined;
  return isObject(v) ? v : undefined;
};

/**
 * The kinds of {@link QueuedWorkloadKind}, as Kueue v0.19.2 integrates them (kueue `pkg/controller/jobs/job`,
 * `pkg/controller/jobs/jobset`): batch/v1 Job (`spec.template`) and JobSet v1alpha2 (each
 * `spec.replicatedJobs[i].template.spec.template`). A plain pod is queued from itself: `/mutate/pods` outfits it
 * at CREATE, before Kueue's controller reads it.
 */
export const QUEUED_WORKLOAD_KINDS: readonly QueuedWorkloadKind[] = Object.freeze([
  {
    group: "batch",
    version: "v1",
    kind: "Job",
    plural: "jobs",
    templatePaths: (obj) => (objectAt(objectAt(obj, "spec"), "template") ? [["spec", "template"]] : []),
  },
  {
    group: "jobset.x-k8s.io",
    version: "v1alpha2",
    kind: "JobSet",
    plural: "jobsets",
    templatePaths: (obj) => {
      const rjs = objectAt(obj, "spec")?.replicatedJobs;
      if (!Array.isArray(rjs)) return [];
      return rjs.flatMap((rj, i) =>
        objectAt(objectAt(objectAt(rj, "template"), "spec"), "template") ? [["spec", "replicatedJobs", i, "template", "spec", "template"]] : [],
      );
    },
  },
]);

/** The value at `path` in `root` (undefined where a step is missing). */
export const getIn = (root: unknown, path: ReadonlyArray<string | number>): unknown =>
  path.reduce<unknown>((o, k) => (typeof k === "number" ? (Array.isArray(o) ? o[k] : undefined) : isObject(o) ? o[k] : undefined), root);

/** An object where a pod spec belongs: the apiserver's schema validation has checked the rest. */
const isPodSpec = (v: unknown): v is V1PodSpec => isObject(v);

/** The pod specs of the templates of a batch Job or JobSet (what `/mutate/jobs` and `/validate/jobs` price and read claims for). */
export const workloadTemplateSpecs = (obj: KubeObject, kind: QueuedWorkloadKind): V1PodSpec[] =>
  kind.templatePaths(obj).flatMap((p) => {
    const spec = getIn(obj, [...p, "spec"]);
    return isPodSpec(spec) ? [spec] : [];
  });

/** Where each of {@link workloadTemplateSpecs} is (`spec.template.spec`, `spec.replicatedJobs[0].template.spec.template.spec`). */
export const workloadTemplateFields = (obj: KubeObject, kind: QueuedWorkloadKind): string[] =>
  kind
    .templatePaths(obj)
    .flatMap((p) =>
      isPodSpec(getIn(obj, [...p, "spec"])) ? [`${p.map((k, i) => (typeof k === "number" ? `[${k}]` : i === 0 ? k : `.${k}`)).join("")}.spec`] : [],
    );
