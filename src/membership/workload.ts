/**
 * @module
 * The kinds that make GPU pods without being training jobs (`QUEUED_WORKLOAD_KINDS`, src/core/job-shapes.ts:
 * batch/v1 Job and JobSet v1alpha2), as `/validate/jobs` counts them (pure): one descriptor per kind, saying
 * where its pod templates are and how many pods of each template it can run at once. CronJobs make Jobs,
 * JobSet makes Jobs, Kubeflow Trainer makes JobSets: a cap on a job's GPUs that stopped at the training-job
 * kinds would not hold for the same pods made through one of these (issue 45, finding 8).
 *
 * Pods at once, from upstream's controllers:
 * - batch Job (kubernetes/kubernetes `pkg/controller/job/job_controller.go` manageJob): the controller keeps
 *   `wantActive` pods active, `parallelism` (defaulted to 1, `pkg/apis/batch/v1/defaults.go` SetDefaults_Job)
 *   bounded by the completions still to come (`completions - succeeded`), so at most min(parallelism,
 *   completions) when completions is set. The same in Indexed completion mode (`firstPendingIndexes` takes at
 *   most that many indexes, and completions is required there). A suspended Job runs none, but is counted as it
 *   will run once resumed (it is judged again at its unsuspend). `podReplacementPolicy: TerminatingOrFailed`
 *   (the default without a podFailurePolicy) lets the controller create a replacement while the pod it replaces
 *   is still terminating (`onlyReplaceFailedPods`: terminating pods are left out of `wantActive - terminating -
 *   active` only with `Failed`), so for the pod's grace period both hold devices. That overlap is not counted:
 *   it has no bound (each pod deleted within one grace period adds one more), so no multiple of the count
 *   would close it, and the scheduler still counts a terminating pod's devices as taken on its node; counting
 *   it twice would refuse every Job of a TrainJob admitted at its cap (Trainer's Jobs keep the default).
 * - JobSet (kubernetes-sigs/jobset `api/jobset/v1alpha2/jobset_types.go`): each of `spec.replicatedJobs[]`
 *   makes `replicas` Jobs (`+kubebuilder:default=1`) from its Job template, all of them at once in the worst
 *   case (`startupPolicy` InOrder and `dependsOn` only delay some), each running its template's pods at once
 *   as above. A restart (failurePolicy `Recreate`) recreates a Job only once its previous iteration and its
 *   pods are deleted.
 *
 * A count that is not a whole number (a `parallelism: "16"` the apiserver's schema would have refused, or one
 * sent to the CLI) is reported with its field, never counted as nothing (rule `gpu-unknown` in the rules).
 */
import type { V1PodTemplateSpec } from "@kubernetes/client-node";
import type { QueuedWorkloadKind } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";

/** How many pods of one template run at once, as an exact count, with the field that bounds it. */
export type PodsAtOnce = { pods: bigint; field: string } | { problem: string; field: string };

/** One pod template of a workload and how many of its pods can run at once. */
export interface WorkloadPods {
  /** The template's name for messages: `template` for a Job, the replicated Job's name for a JobSet. */
  name: string;
  template: V1PodTemplateSpec | undefined;
  /** Where the pod template is (`spec.template`, `spec.replicatedJobs[0].template.spec.template`). */
  templateField: string;
  count: PodsAtOnce;
}

export interface WorkloadShape {
  /** Where the job's GPUs in all are reported (job-gpus, capacity): the count field for one template, else the list. */
  jobGpusField(pods: readonly WorkloadPods[]): string;
  /** Where `suspend` is (both kinds: `spec.suspend`). */
  suspendField: string;
  pods(obj: KubeObject): WorkloadPods[];
}

/** Upstream's int32 count fields. */
const INT32_MAX = 2 ** 31 - 1;

/** Why a count field is not a whole number from 0 to int32's max, or undefined. */
function countProblem(v: unknown): string | undefined {
  if (typeof v !== "number") return `${JSON.stringify(v)?.slice(0, 64) ?? String(v)} must be an integer, not ${v === null ? "null" : typeof v}`;
  if (!Number.isInteger(v) || v < 0 || v > INT32_MAX) return `${String(v)} must be a whole number from 0 to ${INT32_MAX}`;
  return undefined;
}

/**
 * A batch Job's pods at once from its spec at `at` (`spec`, or a JobSet's `spec.replicatedJobs[i].template.spec`):
 * parallelism (default 1) bounded by completions when set, reported at whichever bounds it.
 */
export function jobPodsAtOnce(jobSpec: unknown, at: string): PodsAtOnce {
  const spec = objectOr(jobSpec);
  const parallelismField = `${at}.parallelism`;
  const completionsField = `${at}.completions`;
  const parallelism = spec.parallelism ?? 1;
  const problem = countProblem(parallelism);
  if (problem) return { problem, field: parallelismField };
  const completions = spec.completions;
  if (completions === undefined || completions === null) return { pods: BigInt(parallelism as number), field: parallelismField };
  const completionsProblem = countProblem(completions);
  if (completionsProblem) return { problem: completionsProblem, field: completionsField };
  return (completions as number) < (parallelism as number)
    ? { pods: BigInt(completions as number), field: completionsField }
    : { pods: BigInt(parallelism as number), field: parallelismField };
}

const BATCH_JOB: WorkloadShape = {
  suspendField: "spec.suspend",
  jobGpusField: (pods) => (pods.length === 1 ? pods[0]!.count.field : "spec"),
  pods(obj) {
    const spec = objectOr(obj.spec);
    if (!isObject(spec.template)) return [];
    return [{ name: "template", template: spec.template, templateField: "spec.template", count: jobPodsAtOnce(spec, "spec") }];
  },
};

const JOBSET: WorkloadShape = {
  suspendField: "spec.suspend",
  jobGpusField: () => "spec.replicatedJobs",
  pods(obj) {
    const rjobs = objectOr(obj.spec).replicatedJobs;
    if (!Array.isArray(rjobs)) return [];
    return rjobs.flatMap((raw, i): WorkloadPods[] => {
      const rjob = objectOr(raw);
      const jobSpec = objectOr(objectOr(rjob.template).spec);
      if (!isObject(jobSpec.template)) return [];
      const at = `spec.replicatedJobs[${i}]`;
      const name = typeof rjob.name === "string" ? rjob.name : `replicatedJobs[${i}]`;
      const replicas = rjob.replicas ?? 1;
      const problem = countProblem(replicas);
      const perJob = jobPodsAtOnce(jobSpec, `${at}.template.spec`);
      const count: PodsAtOnce = problem
        ? { problem, field: `${at}.replicas` }
        : "problem" in perJob
          ? perJob
          : { pods: BigInt(replicas as number) * perJob.pods, field: `${at}.replicas` };
      return [{ name, template: jobSpec.template, templateField: `${at}.template.spec.template`, count }];
    });
  },
};

const SHAPES: Readonly<Record<string, WorkloadShape>> = Object.freeze({ "batch/Job": BATCH_JOB, "jobset.x-k8s.io/JobSet": JOBSET });

/** The descriptor of a workload kind (`QUEUED_WORKLOAD_KINDS`). */
export function workloadShape(kind: Pick<QueuedWorkloadKind, "group" | "kind">): WorkloadShape {
  const shape = SHAPES[`${kind.group}/${kind.kind}`];
  if (!shape) throw new Error(`no workload shape for ${kind.group}/${kind.kind}`);
  return shape;
}

/** Whether `obj`'s controller (its ownerReference with `controller: true`) is of `kind` in API group `group`. */
function controlledBy(obj: KubeObject, kind: string, group: string): boolean {
  const refs = objectOr(obj.metadata).ownerReferences;
  return (
    Array.isArray(refs) &&
    refs.some((r) => isObject(r) && r.controller === true && r.kind === kind && typeof r.apiVersion === "string" && r.apiVersion.startsWith(`${group}/`))
  );
}

/**
 * A JobSet Trainer made for a TrainJob (its controller): the TrainJob was judged whole, against its runtime read
 * fresh, at its own CREATE and unsuspend (webhooks/validate-jobs.ts), so Trainer's resume of the JobSet is its
 * consequence, judged for what it makes worse, never refused for what the TrainJob already had (that would strand
 * a TrainJob Kueue admitted: its quota held, its JobSet never running).
 */
export function controlledByTrainJob(obj: KubeObject): boolean {
  return controlledBy(obj, "TrainJob", "trainer.kubeflow.org");
}

/** Whether the object's controller is a JobSet (a Job the JobSet controller made, and resumes). */
export function controlledByJobSet(obj: KubeObject): boolean {
  return controlledBy(obj, "JobSet", "jobset.x-k8s.io");
}
