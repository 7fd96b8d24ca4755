/**
 * @module
 * Kubeflow Trainer v2 / JobSet pods: which JobSet a pod belongs to and where it sits in it, from the labels the
 * JobSet and Job controllers put on it. Pure.
 *
 * - sigs.k8s.io/jobset v0.12.0 `api/jobset/v1alpha2/jobset_types.go` (the label keys) and
 *   `pkg/controllers/jobset_controller.go` labelAndAnnotateObject: every pod template gets
 *   `jobset.sigs.k8s.io/jobset-name`, `…/replicatedjob-name`, `…/job-index` (labels and annotations alike).
 * - Kubernetes' Job controller gives each pod of an Indexed Job `batch.kubernetes.io/job-completion-index`
 *   (annotation always, label since PodIndexLabel, GA in 1.32).
 *
 * The pod's owner is its Job (batch/v1), not the JobSet, so the v1 lookup (`resolve.ts` jobRef, through the
 * controller ownerReference) does not find it: the JobSet is read by the name in the jobset-name label.
 */
import type { KubeObject, ObjectKind, Pod } from "../core/kube.js";

export const JOBSET_LABELS = {
  jobSetName: "jobset.sigs.k8s.io/jobset-name",
  replicatedJob: "jobset.sigs.k8s.io/replicatedjob-name",
  jobIndex: "jobset.sigs.k8s.io/job-index",
  completionIndex: "batch.kubernetes.io/job-completion-index",
} as const;

/** The label kubeflow/trainer puts on its runtimes (`trainer.kubeflow.org/framework: torch`, ...). */
export const LABEL_TRAINER_FRAMEWORK = "trainer.kubeflow.org/framework";

/** The JobSet as a kind the job reader can read (`JobReader.get` uses group, version and plural); not a policy job kind. */
export const JOBSET_KIND: ObjectKind = Object.freeze({
  kind: "JobSet",
  group: "jobset.x-k8s.io",
  version: "v1alpha2",
  plural: "jobsets",
});

/**
 * The JobSet to read for a TensorFlow pod: a pod with the jobset-name label and the
 * `trainer.kubeflow.org/framework: tensorflow` label (put on the pod templates by the TensorFlow runtime,
 * examples/trainer/tensorflow-runtime.yaml), so that no other JobSet pod costs a read.
 */
export function tfJobSetRef(pod: Pod, namespace: string): { namespace: string; name: string } | undefined {
  const labels = pod.metadata?.labels ?? {};
  const name = labels[JOBSET_LABELS.jobSetName];
  if (!name || labels[LABEL_TRAINER_FRAMEWORK] !== "tensorflow") return undefined;
  return { namespace, name };
}

/** Whether the JobSet is a TensorFlow one (the runtime's template labels, which Trainer copies to the JobSet). */
export function isTfJobSet(jobSet: KubeObject): boolean {
  return (jobSet.metadata as { labels?: Record<string, string> } | undefined)?.labels?.[LABEL_TRAINER_FRAMEWORK] === "tensorflow";
}

export interface JobSetPlace {
  replicatedJob: string;
  jobIndex: number;
  completionIndex: number;
}

const INDEX = /^(0|[1-9]\d{0,8})$/;

/** Where the pod sits in its JobSet, from its labels (the completion index also from its annotation). */
export function jobSetPlace(pod: Pod): JobSetPlace | { problem: string } {
  const labels = pod.metadata?.labels ?? {};
  const rjob = labels[JOBSET_LABELS.replicatedJob];
  const jobIndex = labels[JOBSET_LABELS.jobIndex];
  const completion = labels[JOBSET_LABELS.completionIndex] ?? pod.metadata?.annotations?.[JOBSET_LABELS.completionIndex];
  if (!rjob) return { problem: `the pod has no ${JOBSET_LABELS.replicatedJob} label` };
  if (jobIndex === undefined || !INDEX.test(jobIndex)) return { problem: `the pod has no numeric ${JOBSET_LABELS.jobIndex} label` };
  if (completion === undefined || !INDEX.test(completion)) return { problem: `the pod has no numeric ${JOBSET_LABELS.completionIndex}` };
  return { replicatedJob: rjob, jobIndex: Number(jobIndex), completionIndex: Number(completion) };
}
