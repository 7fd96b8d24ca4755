/**
 * @module
 * `trainjob`, Kubeflow Trainer v2's TrainJob (framework `trainer`): replicas from the runtime's JobSet template
 * (`trainjob-runtime.ts`); no runPolicy: `spec.activeDeadlineSeconds`, `spec.suspend`, and Quartermaster's TTL
 * annotation; finished on `Complete`/`Failed` (time: the condition's lastTransitionTime, TrainJob status has no
 * completionTime); `spec.managedBy` other than `trainer.kubeflow.org/trainjob-controller` is another controller's
 * (MultiKueue). The Trainer's controller runs these jobs.
 *
 * Label scheme: JobSet's (sigs.k8s.io/jobset v0.12.0 `api/jobset/v1alpha2/jobset_types.go`), on the pods of a
 * TrainJob's JobSet, which the Trainer names after the TrainJob: `jobset.sigs.k8s.io/jobset-name` names the job,
 * `replicatedjob-name` the replica type, `batch.kubernetes.io/job-completion-index` the index within its Job.
 * The pods are the Jobs' (the Trainer's controller owns the JobSet, JobSet the Jobs): never claimed, no
 * Services of Quartermaster's (JobSet makes its own headless Service).
 */
import { ANNOTATION_TTL_AFTER_FINISHED, JOBSET_LABELS, TRAINER } from "../core/job-shapes.js";
import type { KubeObject } from "../core/kube.js";
import { isObject, objectOr } from "../core/object.js";
import { runtimeRefOf, trainJobReplicas } from "./trainjob-runtime.js";
import type { JobShape, KindShape, LabelScheme, RunPolicyField, RunPolicyView } from "./types.js";

const nameOf = (job: KubeObject): string => String((job.metadata as { name?: string } | undefined)?.name ?? "");

const JOBSET: LabelScheme = {
  name: "jobset",
  key: { label: JOBSET_LABELS.jobsetName, value: nameOf },
  selector: (job) => ({ [JOBSET_LABELS.jobsetName]: nameOf(job) }),
  replicaTypeLabel: JOBSET_LABELS.replicatedJobName,
  replicaIndexLabel: JOBSET_LABELS.completionIndex,
  podLabels: [JOBSET_LABELS.jobsetName],
  services: false,
  claimed: false,
};

/** A whole number of seconds as an annotation spells it (`"86400"`), else the value as it is (for the rules to refuse). */
function annotationCount(v: string): unknown {
  return /^(0|[1-9][0-9]{0,15})$/.test(v) ? Number(v) : v;
}

/**
 * Where a TrainJob keeps its run policy: its own `activeDeadlineSeconds` and `suspend`, Quartermaster's TTL
 * annotation; no backoffLimit (its runtime's Jobs have theirs) and no cleanPodPolicy (JobSet deletes the pods
 * with the TrainJob).
 */
const TRAINJOB_FIELDS: Partial<Record<RunPolicyField, string>> = {
  ttlSecondsAfterFinished: `metadata.annotations["${ANNOTATION_TTL_AFTER_FINISHED}"]`,
  activeDeadlineSeconds: "spec.activeDeadlineSeconds",
  suspend: "spec.suspend",
};

const SHAPE: JobShape = {
  name: "trainjob",
  layout: "runtime",
  kubeflowPodLabels: false,
  scaleSubresource: false,
  runtimeRef: runtimeRefOf,
  specsField: () => "spec.runtimeRef",
  specsHint: "spec.runtimeRef",
  replicas: (job, _kind, runtime) =>
    trainJobReplicas(job, runtime).map((r) => ({
      type: r.type,
      spec: { replicas: r.replicas, template: r.template },
      path: r.replicasField,
      replicasField: r.replicasField,
      templateField: r.templateField,
      mapField: r.mapField,
    })),
  // JobSet pod hostnames: `<jobset>-<replicatedJob>-<job index>-<completion index>`; the Trainer runs one Job per replicated Job.
  objectName: (_ns, job, type, index) => `${job}-${type}-0-${index}`,
  nameHints: { shorten: "shorten the TrainJob name (JobSet names pods <jobset>-<replicatedJob>-<job>-<index>)", service: () => "" },
  namedContainer: false,
  restartPolicyFromTemplate: false,
  v1Shape: false,
  runPolicy(job) {
    const spec = objectOr(job.spec);
    const fields: RunPolicyView["fields"] = {};
    const ttl = objectOr(objectOr(job.metadata).annotations)[ANNOTATION_TTL_AFTER_FINISHED];
    if (ttl !== undefined)
      fields.ttlSecondsAfterFinished = { value: typeof ttl === "string" ? annotationCount(ttl) : ttl, field: TRAINJOB_FIELDS.ttlSecondsAfterFinished! };
    for (const f of ["activeDeadlineSeconds", "suspend"] as const) if (spec[f] !== undefined) fields[f] = { value: spec[f], field: TRAINJOB_FIELDS[f]! };
    return { fields, at: (f) => TRAINJOB_FIELDS[f] };
  },
  jobGpusField(job) {
    const trainer = objectOr(objectOr(job.spec).trainer);
    return trainer.numNodes !== undefined
      ? "spec.trainer.numNodes"
      : trainer.resourcesPerNode !== undefined
        ? "spec.trainer.resourcesPerNode"
        : "spec.runtimeRef";
  },
  finishedConditions: TRAINER.finishedConditions,
  completionTime(job) {
    const conditions = objectOr(job.status).conditions;
    if (!Array.isArray(conditions)) return undefined;
    const done = (conditions as unknown[]).find((c) => isObject(c) && TRAINER.finishedConditions.includes(String(c.type)) && c.status === "True");
    const t = isObject(done) ? done.lastTransitionTime : undefined;
    return typeof t === "string" ? t : undefined;
  },
  managedElsewhere(job) {
    const by = objectOr(job.spec).managedBy;
    if (by === undefined || by === null || by === "" || by === TRAINER.controllerName) return undefined;
    return `spec.managedBy is ${JSON.stringify(by)}: another controller manages this TrainJob`;
  },
  singleReplicaStatus: false,
};

export const TRAINJOB: KindShape = {
  shape: SHAPE,
  defaultController: "operator",
  // The TrainJob's own part is `spec.trainer` (its replicas are its runtime's).
  frameworks: Object.freeze({ trainer: { replicaSpecsField: "trainer", labelScheme: JOBSET } }),
};
