/**
 * @module
 * Quartermaster as the controller of a training job whose kind has no operator (Caffe2Job by default:
 * kubeflow/caffe2-operator is archived; any kind the policy marks `controller: quartermaster`). Pure:
 * `(job, its pods and Services, the clock, what is still in flight) → creates, deletes, status, Events`.
 * The I/O is `src/run/job-controller.ts`; finished jobs (CleanPodPolicy, TTL) stay with `finished.ts`, as
 * for every other kind.
 *
 * The rules are the Kubeflow common job controller's, training-operator v1.8.1
 * `pkg/controller.v1/common/job.go` ReconcileJobs, cited per step below:
 *
 * 1. A job being deleted: nothing. `Created=True` (`JobCreated`, "<Kind> <name> is created.") on first sight
 *    (training-operator's onOwnerCreateFunc).
 * 1a. Quartermaster's own refusals, before the rest of upstream's rules: a job over `MAX_JOB_REPLICAS` replicas
 *    (`TooManyReplicas`), and a job, neither finished nor suspended, whose pod templates ask for what
 *    `reconciler.allowedTemplates` does not allow (`TemplateRefused`, `template-guard.ts`: privileged
 *    containers, host namespaces, ServiceAccounts other than `default` and those listed). Either gets no pods
 *    or Services (and no `Created`), the condition and a Warning Event, and nothing else (its existing pods
 *    stay). Templates fixed: `TemplateRefused` turns False (`TemplateAllowed`, a Normal Event) and the rules go on.
 * 2. Finished (`Succeeded` or `Failed` True): a Succeeded job's active replicas count as succeeded; nothing
 *    else (its pods are `finished.ts`'s), except that a job failed by step 4 keeps losing its remaining pods
 *    and Services (those the deletion budget deferred, see below).
 * 3. `runPolicy.suspend`: every pod and Service deleted (the job is not finished, so CleanPodPolicy does not
 *    apply, as upstream's DeletePodsAndServices), active = 0, `Running` → False and `Suspended=True`
 *    (`JobSuspended`). Resumed: `Suspended=False` (`JobResumed`) and startTime = now.
 * 4. Backoff limit (`core/job.go` PastBackoffLimit: the restartCount of init and regular containers of
 *    Running pods whose replica type restarts, `limit == 0 ? sum > 0 : sum >= limit`; and ReconcileJobs'
 *    exceedsBackoffLimit: a new failure, not all replicas active, `restarts + 1 > limit`). DECIDE: upstream's
 *    `restarts` is the work queue's requeue count (a fake that is always 0 in training-operator); here it is
 *    the number of pods this controller deleted to restart them, kept on the job in the annotation
 *    `quartermaster.dev/restarts`, so a restart by recreation (ExitCode, or a Failed pod under OnFailure or
 *    Always) counts. Then the active deadline (`now - startTime >= activeDeadlineSeconds`). Either fails the
 *    job (`JobFailed`, upstream's messages), sets completionTime and deletes every pod and Service.
 * 5. Pods and Services per replica type (`pod.go` ReconcilePods, `service.go` ReconcileServices, slices by the
 *    replica-index label as `core/pod.go` GetPodSlices): a missing index below `replicas` is created (unless
 *    a create of that name is still in flight: expectations), an index at or above `replicas` is deleted
 *    (scale-down), a slot with two objects is only reported. A pod in phase Failed is restarted (deleted; the
 *    next pass recreates it) under OnFailure, Always, or ExitCode with a retryable code (>= 128: 1–127 are
 *    permanent, 128–255 retryable, `pkg/util/train/train_util.go` IsRetryableExitCode; the code is the default
 *    container's `state.terminated.exitCode`, 0xbeef when it has none), with `Restarting=True` and a Warning
 *    `JobRestarting`; ExitCode with a permanent code fails the job.
 * 6. Replica statuses (`core/status.go`): Running counts as active (as failed when being deleted), Succeeded
 *    and Failed as such, Pending and Unknown not at all. Then the job's conditions (the PyTorchJob
 *    controller's UpdateJobStatus, the common shape): with a Chief or Master replica type, it decides
 *    Running (active > 0) and Succeeded (all its replicas succeeded); else the Worker type does (else every
 *    type together). A type with failures and fewer succeeded + running than replicas: Restarting when its
 *    restart policy is not Never, else Failed. Succeeded and Failed set completionTime.
 * 7. Conditions are set as `pkg/util/status.go` setCondition: nothing once Failed; no change for the same
 *    status and reason; Running and Restarting replace each other; Succeeded or Failed turn Running False.
 *    The status is written only when it changed (with lastReconcileTime = now).
 *
 * Deletion budget: the decision's deletes (restarts by recreation, scale-down, suspend, a failed job's
 * cleanup) are bounded by `reconciler.maxDeletionsPerPass` together with the hygiene pass's
 * (`capControllerDeletes` in `plan.ts`); a deferred delete is decided again by the next pass or event (every
 * rule above is level-based), and a restart counts in the annotation only when its delete is sent.
 *
 * Names and labels: Kubeflow kinds as upstream (`<job>-<type>-<index>`, GenLabels, job-role). Caffe2Job with
 * caffe2-operator's labels (the kinds registry, `src/kinds/`) and named `<namespace>-<job>-worker-<index>`: the
 * very hosts caffe2-operator writes into CAFFE2_CONFIG (`pkg/controller/config.go`: genGeneralName of the
 * `<namespace>/<job>` key). caffe2-operator created no Services, so those hosts never resolved; here each pod
 * has a headless Service of its name, so they do, byte for byte unchanged. Its status keeps the Caffe2Job
 * CRD's shape (`replicaStatuses` one object: caffe2-operator `pkg/apis/caffe2/v1alpha1/types.go`). A
 * Caffe2Job may carry the common API's `spec.runPolicy` and `spec.replicaSpecs.restartPolicy` (its CRD
 * keeps unknown fields); without one, the template's restartPolicy, else Never (caffe2-operator's default).
 *
 * Condition and Event reasons are kubeflow/common's (`pkg/util/status.go`: JobCreated, JobRunning,
 * JobRestarting, JobSucceeded, JobFailed, and training-operator's Suspended/Resumed in the same form);
 * training-operator prefixes them with the kind (`TFJobRunning`). Pod and Service Events
 * (SuccessfulCreatePod, FailedCreatePod, SuccessfulDeletePod, ...) are written where the calls are made.
 */
import type { KubeObject } from "../core/kube.js";
import { ClusterSpecMemo } from "../mutate/frameworks.js";
import type { AllowedTemplates, JobKind } from "../policy/types.js";
import { jobShape, labelScheme } from "../kinds/index.js";
import { MAX_JOB_REPLICAS } from "../membership/ceiling.js";
import type { DeleteAction } from "./finished.js";
import { meta, type Meta } from "./meta.js";
import { DEFAULT_ALLOWED_TEMPLATES, describeViolations, jobTemplateViolations } from "./template-guard.js";
import {
  type ReplicaStatus,
  type Status,
  type RunPolicy,
  metaTime,
  isRetryableExitCode,
  hasCondition,
  setCondition,
  type ConditionChange,
  condition,
  readRunPolicy,
  readStatus,
  replicaStatusMap,
  totalFailed,
  restartsOf,
  isEqual,
} from "./job-status.js";
import { type Replica, readReplicas, replicaObjectName, podFor, serviceFor, type PodShape, exitCodeOf, phaseOf, slices } from "./job-replicas.js";

// What the job controller's status and replica modules export, from where its callers have always imported it.
export { ANNOTATION_RESTARTS, hasCondition, isRetryableExitCode, metaTime, restartsOf, setCondition } from "./job-status.js";
export {
  exitCodeOf,
  NO_EXIT_CODE,
  ownerReference,
  podFor,
  replicaLabels,
  replicaObjectName,
  serviceFor,
  type PodInput,
  type RestartPolicy,
} from "./job-replicas.js";

/** The ends of upstream's messages for the failures that delete every pod and Service (backoff limit, deadline). */
const FAILURES_THAT_DELETE = ["it has reached the specified backoff limit", "it was active longer than specified deadline"] as const;

/**
 * Creates (pods and Services together) per decision; the rest wait for the next pass or event (the decision
 * is level-based, and creates in flight are expectations, so nothing is sent twice). Kubernetes' own Job
 * controller bounds a sync the same way: `MaxPodCreateDeletePerSync = 500` in `pkg/controller/job/
 * job_controller.go`, sent in slow-start batches (`controller.SlowStartInitialBatchSize`). DECIDE: the bound,
 * not the slow start (a failed create here is retried by the next pass, not in doubling batches).
 */
export const MAX_CREATES_PER_DECISION = 500;

/** The condition and Event reason of a job over `MAX_JOB_REPLICAS` (`src/membership/ceiling.ts`). */
export const REASON_TOO_MANY_REPLICAS = "TooManyReplicas";

/**
 * The condition and Event reason of a job whose pod templates ask for what the policy does not allow
 * (`reconciler.allowedTemplates`, `template-guard.ts`); the condition turns False with {@link REASON_TEMPLATE_ALLOWED}
 * once the templates are fixed.
 */
export const REASON_TEMPLATE_REFUSED = "TemplateRefused";
export const REASON_TEMPLATE_ALLOWED = "TemplateAllowed";

export interface CreateAction {
  verb: "create";
  kind: "Pod" | "Service";
  namespace: string;
  name: string;
  job: string;
  jobKind: JobKind;
  jobUid: string;
  replicaType: string;
  index: number;
  reason: string;
  body: KubeObject;
}

export interface JobEvent {
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

export interface Decision {
  creates: CreateAction[];
  /** Pods and Services (scale-down, restarts, suspend, a failed job's cleanup). */
  deletes: DeleteAction[];
  /** The job's new status, when it changed. */
  status?: Record<string, unknown>;
  /** The new value of the restart counter annotation, when this decision restarts pods. */
  restarts?: number;
  events: JobEvent[];
  problems: string[];
  /** When the job should be looked at again at the latest (its active deadline), ms from now. */
  requeueAfterMs?: number;
}

/** What is in flight for the job: names created or deleted whose effect the listing may not show yet. */
export interface InFlight {
  /** `Pod/<name>` or `Service/<name>`. */
  creates: ReadonlySet<string>;
  deletes: ReadonlySet<string>;
}

export interface ControllerInput {
  job: KubeObject;
  kind: JobKind;
  /** The pods and Services the job controls (claimed). */
  pods: readonly KubeObject[];
  services: readonly KubeObject[];
  now: Date;
  /** Appended to Services' host names in TF_CONFIG (policy `clusterSpec.clusterDomain`). */
  clusterDomain?: string;
  inFlight?: InFlight;
  /** Where the job's cluster spec is built once for all its pods (default: one per decision). */
  memo?: ClusterSpecMemo;
  /** What the job's pod templates may ask for (policy `reconciler.allowedTemplates`; default: its schema defaults). */
  allowedTemplates?: AllowedTemplates;
}

/**
 * `TemplateRefused=True` with `msg`; true when it changed. Unlike {@link setCondition} a new message alone is
 * a change: a template edited from one violation to another must say which fields are refused now.
 */
function setTemplateRefused(status: Status, msg: string, now: Date): boolean {
  if (setCondition(status, condition({ type: REASON_TEMPLATE_REFUSED, status: "True", reason: REASON_TEMPLATE_REFUSED, message: msg }, now))) return true;
  const current = (status.conditions ?? []).find((c) => c.type === REASON_TEMPLATE_REFUSED);
  if (!current || current.message === msg || hasCondition(status, "Failed")) return false;
  current.message = msg;
  current.lastUpdateTime = metaTime(now);
  return true;
}

/**
 * What every step of {@link decideJob} reads and writes: the job as read (its run policy and replica types,
 * already validated), the status being decided (`status`, against `old` as read), and the decision so far
 * (`out`). Steps add to `status` and `out` and do no I/O.
 */
interface JobState {
  input: ControllerInput;
  job: KubeObject;
  kind: JobKind;
  now: Date;
  jm: Meta;
  /** The job's name, as messages spell it. */
  name: string;
  /** `<Kind>/<name>`, the actions' `job`. */
  jobId: string;
  /** `<namespace>/<Kind>/<name>`, the problems' prefix. */
  where: string;
  rp: RunPolicy;
  replicas: Replica[];
  old: Status;
  status: Status;
  inFlight: InFlight;
  out: Decision;
}

const emptyDecision = (): Decision => ({ creates: [], deletes: [], events: [], problems: [] });

/**
 * The job read for a decision: its run policy and replica specs, or, when either is invalid, a decision that
 * only reports why nothing is done for the job.
 */
function readJob(input: ControllerInput): JobState | Decision {
  const { job, kind, now } = input;
  const out = emptyDecision();
  const jm = meta(job);
  const jobId = `${kind.kind}/${jm.name}`;
  const where = `${jm.namespace}/${jobId}`;
  const rp = readRunPolicy(job);
  const replicas = readReplicas(job, kind);
  if ("problems" in rp || "problems" in replicas) {
    const problems = [...("problems" in rp ? rp.problems : []), ...("problems" in replicas ? replicas.problems : [])];
    out.problems.push(...problems.map((p) => `${where}: ${p}; nothing done for this job`));
    return out;
  }
  const inFlight = input.inFlight ?? { creates: new Set<string>(), deletes: new Set<string>() };
  return { input, job, kind, now, jm, name: String(jm.name), jobId, where, rp, replicas, old: readStatus(job), status: readStatus(job), inFlight, out };
}

/** Sets condition `type` on the status being decided (upstream `setCondition`); true when it changed. */
function setJobCondition(s: JobState, c: ConditionChange): boolean {
  return setCondition(s.status, condition(c, s.now));
}

/** Adds an Event to the decision, once per reason and message. */
function addEvent(s: JobState, type: JobEvent["type"], reason: string, message: string): void {
  if (!s.out.events.some((e) => e.reason === reason && e.message === message)) s.out.events.push({ type, reason, message });
}

/**
 * Adds the delete of a pod or Service to the decision, unless it is being deleted already, its delete is in
 * flight, or the decision deletes it already. The delete added, if any.
 */
function deleteObject(s: JobState, o: KubeObject, kindOf: "Pod" | "Service", reason: string): DeleteAction | undefined {
  const om = meta(o);
  if (om.deletionTimestamp || s.inFlight.deletes.has(`${kindOf}/${om.name}`)) return undefined;
  if (s.out.deletes.some((d) => d.kind === kindOf && d.name === om.name)) return undefined;
  const action: DeleteAction = {
    verb: "delete",
    kind: kindOf,
    namespace: String(om.namespace ?? s.jm.namespace),
    name: String(om.name),
    uid: String(om.uid),
    job: s.jobId,
    jobKind: s.kind,
    jobUid: String(s.jm.uid),
    reason,
  };
  s.out.deletes.push(action);
  return action;
}

/** Deletes every pod and Service of the job, for `reason`. */
function deleteAll(s: JobState, reason: string): void {
  for (const p of s.input.pods) deleteObject(s, p, "Pod", reason);
  for (const svc of s.input.services) deleteObject(s, svc, "Service", reason);
}

/** The status, when it changed, written into the decision (with lastReconcileTime = now). */
function writeStatus(s: JobState): Decision {
  if (!isEqual(s.old, s.status)) s.out.status = { ...s.status, lastReconcileTime: metaTime(s.now) };
  return s.out;
}

/** The decision's end: a job finished by this pass gets no new pods or Services (they would only be cleaned up again). */
function finish(s: JobState): Decision {
  if (isFinished(s.status)) {
    s.out.creates = [];
    delete s.out.requeueAfterMs;
  }
  return writeStatus(s);
}

const isFinished = (status: Status): boolean => hasCondition(status, "Failed") || hasCondition(status, "Succeeded");

/** Stores replica statuses in the kind's shape (Caffe2Job: its one Worker object). */
function storeReplicaStatuses(s: JobState, m: Record<string, ReplicaStatus>): void {
  s.status.replicaStatuses = jobShape(s.kind).singleReplicaStatus ? (m.Worker ?? { active: 0, succeeded: 0, failed: 0 }) : m;
}

/** Each replica type's statuses changed by `change`, stored when that changes them. */
function updateReplicaStatuses(s: JobState, change: (r: ReplicaStatus) => ReplicaStatus): void {
  const map = replicaStatusMap(s.status, s.kind);
  const next: Record<string, ReplicaStatus> = {};
  for (const [t, r] of Object.entries(map)) next[t] = change(r);
  if (!isEqual(next, map)) storeReplicaStatuses(s, next);
}

/**
 * 1a. The ceiling: a job over `MAX_JOB_REPLICAS` replicas, checked before anything is listed or allocated,
 * gets no pods and no Services, the reason on the job (`TooManyReplicas`, unless it is finished) and a Warning
 * Event. True when the job is refused (the decision ends).
 */
function refuseOverCeiling(s: JobState): boolean {
  const replicaTotal = s.replicas.reduce((n, r) => n + r.replicas, 0);
  if (replicaTotal <= MAX_JOB_REPLICAS) return false;
  const msg = `${s.kind.kind} ${s.jm.namespace}/${s.jm.name} has ${replicaTotal} replicas in all, over Quartermaster's ceiling of ${MAX_JOB_REPLICAS} per job (MAX_JOB_REPLICAS); no pods are created.`;
  s.out.problems.push(`${s.where}: ${msg}`);
  if (!isFinished(s.status) && setJobCondition(s, { type: REASON_TOO_MANY_REPLICAS, status: "True", reason: REASON_TOO_MANY_REPLICAS, message: msg })) {
    s.out.events.push({ type: "Warning", reason: REASON_TOO_MANY_REPLICAS, message: msg });
  }
  return true;
}

/**
 * 1a. The template guard (issue 29 item 6): what the job's pod templates ask for that the policy
 * (`reconciler.allowedTemplates`) does not allow. The pods are created with the controller's ServiceAccount,
 * so the policy, not the user's RBAC, decides what they may be.
 */
function templateViolations(s: JobState): ReturnType<typeof jobTemplateViolations> {
  return jobTemplateViolations(s.job, s.kind, s.input.allowedTemplates ?? DEFAULT_ALLOWED_TEMPLATES);
}

/**
 * 1a. A refused template, checked where the controller would create: a finished job creates nothing, and a
 * suspended one only loses its pods (its suspension still applies), so neither is refused. A refused job gets
 * no pods and no Services, `TemplateRefused=True` and a Warning Event, and nothing else is decided for it
 * either: its existing pods are left alone (never deleted for this) until the template is fixed. True when the
 * job is refused (the decision ends).
 */
function refuseTemplate(s: JobState, violations: ReturnType<typeof jobTemplateViolations>): boolean {
  if (violations.length === 0 || isFinished(s.status) || s.rp.suspend) return false;
  const msg = `${s.kind.kind} ${s.jm.namespace}/${s.jm.name}: the policy (reconciler.allowedTemplates) does not allow its template; no pods or Services are created: ${describeViolations(violations)}`;
  s.out.problems.push(`${s.where}: ${msg}`);
  if (setTemplateRefused(s.status, msg, s.now)) s.out.events.push({ type: "Warning", reason: REASON_TEMPLATE_REFUSED, message: msg });
  return true;
}

/**
 * 1a. Templates fixed: `TemplateRefused` turns False (`TemplateAllowed`, kept, as Kubernetes conditions are,
 * with when it changed; a Normal Event) and the rest of the decision creates what the job lacks.
 */
function allowFixedTemplate(s: JobState, violations: ReturnType<typeof jobTemplateViolations>): void {
  if (violations.length > 0 || !hasCondition(s.status, REASON_TEMPLATE_REFUSED)) return;
  const msg = `${s.kind.kind} ${s.jm.namespace}/${s.jm.name}: its template is now allowed by the policy (reconciler.allowedTemplates).`;
  if (setJobCondition(s, { type: REASON_TEMPLATE_REFUSED, status: "False", reason: REASON_TEMPLATE_ALLOWED, message: msg }))
    s.out.events.push({ type: "Normal", reason: REASON_TEMPLATE_ALLOWED, message: msg });
}

/** 1. `Created=True` (`JobCreated`, "<Kind> <name> is created.") on first sight (training-operator's onOwnerCreateFunc). */
function markCreated(s: JobState): void {
  if ((s.status.conditions ?? []).some((c) => c.type === "Created")) return;
  setJobCondition(s, { type: "Created", status: "True", reason: "JobCreated", message: `${s.kind.kind} ${s.name} is created.` });
}

/**
 * 2. Finished (`Succeeded` or `Failed` True): a Succeeded job's active replicas count as succeeded; nothing
 * else (its pods are `finished.ts`'s), except that a job this controller failed for its backoff limit or
 * deadline (step 4) loses every pod and Service: what an earlier pass's deletion budget left
 * (`capControllerDeletes`) is deleted now, pass after pass.
 */
function decideFinished(s: JobState): void {
  const failed = (s.status.conditions ?? []).find((c) => c.type === "Failed" && c.status === "True");
  if (failed?.reason === "JobFailed" && FAILURES_THAT_DELETE.some((f) => failed.message?.endsWith(f))) deleteAll(s, failed.message!);
  if (hasCondition(s.status, "Succeeded")) updateReplicaStatuses(s, (r) => ({ ...r, succeeded: (r.succeeded ?? 0) + (r.active ?? 0), active: 0 }));
}

/**
 * 3. `runPolicy.suspend`: every pod and Service deleted (the job is not finished, so CleanPodPolicy does not
 * apply, as upstream's DeletePodsAndServices), active = 0, `Running` → False and `Suspended=True` (`JobSuspended`).
 */
function decideSuspended(s: JobState): void {
  deleteAll(s, "the job is suspended");
  updateReplicaStatuses(s, (r) => ({ ...r, active: 0 }));
  const msg = `${s.kind.kind} ${s.name} is suspended.`;
  if (hasCondition(s.status, "Running")) setJobCondition(s, { type: "Running", status: "False", reason: "JobSuspended", message: msg });
  if (!hasCondition(s.status, "Suspended") && setJobCondition(s, { type: "Suspended", status: "True", reason: "JobSuspended", message: msg }))
    addEvent(s, "Normal", "JobSuspended", msg);
}

/** 3. Resumed: `Suspended=False` (`JobResumed`) and startTime = now. */
function resumeIfSuspended(s: JobState): void {
  if (!hasCondition(s.status, "Suspended")) return;
  const msg = `${s.kind.kind} ${s.name} is resumed.`;
  setJobCondition(s, { type: "Suspended", status: "False", reason: "JobResumed", message: msg });
  s.status.startTime = metaTime(s.now);
  addEvent(s, "Normal", "JobResumed", msg);
}

/** The replica type a pod or Service is labelled with (lower case). */
function replicaTypeOf(o: KubeObject, kind: JobKind): string | undefined {
  return meta(o).labels?.[labelScheme(kind).replicaTypeLabel];
}

/**
 * 4. Upstream `core/job.go` PastBackoffLimit: the restartCount of the init and regular containers of the
 * Running pods whose replica type restarts, `limit == 0 ? sum > 0 : sum >= limit`.
 */
function pastBackoffLimit(s: JobState, limit: number): boolean {
  let sum = 0;
  for (const r of s.replicas) {
    if (r.restartPolicy === "Never") continue;
    for (const p of s.input.pods) {
      if (replicaTypeOf(p, s.kind) !== r.rt || phaseOf(p) !== "Running") continue;
      const st = (p as PodShape).status;
      for (const c of [...(st?.initContainerStatuses ?? []), ...(st?.containerStatuses ?? [])]) sum += typeof c.restartCount === "number" ? c.restartCount : 0;
    }
  }
  return limit === 0 ? sum > 0 : sum >= limit;
}

/**
 * 4. Backoff limit: PastBackoffLimit, or ReconcileJobs' exceedsBackoffLimit (a new failure, not all replicas
 * active, `restarts + 1 > limit`, restarts being this controller's count in `quartermaster.dev/restarts`).
 * The failure message, or undefined.
 */
function backoffLimitFailure(s: JobState): string | undefined {
  const limit = s.rp.backoffLimit;
  if (limit === undefined) return undefined;
  const pods = s.input.pods;
  const active = pods.filter((p) => !meta(p).deletionTimestamp && phaseOf(p) !== "Succeeded" && phaseOf(p) !== "Failed").length;
  const failedPods = pods.filter((p) => phaseOf(p) === "Failed").length;
  const total = s.replicas.reduce((n, r) => n + r.replicas, 0);
  const newFailure = failedPods > totalFailed(replicaStatusMap(s.status, s.kind));
  const exceeds = newFailure && active !== total && restartsOf(s.job) + 1 > limit;
  return exceeds || pastBackoffLimit(s, limit) ? `Job ${s.name} has failed because ${FAILURES_THAT_DELETE[0]}` : undefined;
}

/**
 * 4. The active deadline (`now - startTime >= activeDeadlineSeconds`): the failure message, or undefined and
 * the job looked at again when its deadline passes.
 */
function activeDeadlineFailure(s: JobState): string | undefined {
  const start = s.status.startTime ? Date.parse(s.status.startTime) : NaN;
  if (s.rp.activeDeadlineSeconds === undefined || Number.isNaN(start)) return undefined;
  const left = start + s.rp.activeDeadlineSeconds * 1000 - s.now.getTime();
  if (left <= 0) return `Job ${s.name} has failed because ${FAILURES_THAT_DELETE[1]}`;
  s.out.requeueAfterMs = left;
  return undefined;
}

/** 4. Backoff limit or deadline passed: the job fails (`JobFailed`), completionTime is set and every pod and Service deleted. */
function failJob(s: JobState, failure: string): void {
  s.status.completionTime ??= metaTime(s.now);
  deleteAll(s, failure);
  addEvent(s, "Normal", "JobFailed", failure);
  setJobCondition(s, { type: "Failed", status: "True", reason: "JobFailed", message: failure });
  delete s.out.requeueAfterMs;
}

/** What step 5 keeps across replica types: the cluster-spec memo, the creates deferred and the pods restarted. */
interface ReplicaPass {
  memo: ClusterSpecMemo;
  deferredCreates: number;
  restarted: number;
}

/** 5. Whether the decision has room for another create (`MAX_CREATES_PER_DECISION`); a create without is deferred. */
function roomToCreate(s: JobState, pass: ReplicaPass): boolean {
  if (s.out.creates.length < MAX_CREATES_PER_DECISION) return true;
  pass.deferredCreates++;
  return false;
}

/** 5. A create action of replica `index` of `r`. */
function createAction(s: JobState, what: { kind: "Pod" | "Service"; r: Replica; index: number; body: KubeObject }): CreateAction {
  const { r, index } = what;
  const name = replicaObjectName(s.job, s.kind, r.rt, index);
  const reason = `${r.rt} ${index} has no ${what.kind === "Pod" ? "pod" : "service"}`;
  return {
    verb: "create",
    kind: what.kind,
    namespace: String(s.jm.namespace),
    name,
    job: s.jobId,
    jobKind: s.kind,
    jobUid: String(s.jm.uid),
    replicaType: r.type,
    index,
    reason,
    body: what.body,
  };
}

/** 5. The missing pod of replica `index` created, unless its create is in flight or the decision has no room. */
function createPod(s: JobState, pass: ReplicaPass, r: Replica, index: number): void {
  if (s.inFlight.creates.has(`Pod/${replicaObjectName(s.job, s.kind, r.rt, index)}`)) return;
  if (!roomToCreate(s, pass)) return;
  const { body, overwroteRestartPolicy } = podFor({ job: s.job, kind: s.kind, replica: r, index, clusterDomain: s.input.clusterDomain ?? "", memo: pass.memo });
  s.out.creates.push(createAction(s, { kind: "Pod", r, index, body }));
  if (overwroteRestartPolicy)
    addEvent(s, "Warning", "SetPodTemplateRestartPolicy", "Restart policy in pod template will be overwritten by restart policy in replica spec");
}

/**
 * 5. A pod in phase Failed (not being deleted): restarted (deleted; the next pass recreates it) under
 * OnFailure, Always, or ExitCode with a retryable code, with `Restarting=True` and a Warning `JobRestarting`;
 * ExitCode with a permanent code fails the job.
 */
function restartOrFailPod(s: JobState, pass: ReplicaPass, r: Replica, pod: KubeObject): void {
  if (phaseOf(pod) !== "Failed" || meta(pod).deletionTimestamp || s.inFlight.deletes.has(`Pod/${meta(pod).name}`)) return;
  const code = exitCodeOf(pod, s.kind);
  if (r.restartPolicy === "OnFailure" || r.restartPolicy === "Always" || (r.restartPolicy === "ExitCode" && isRetryableExitCode(code))) {
    const msg = `job ${s.name} is restarting because ${r.type} replica(s) failed.`;
    const restart = deleteObject(s, pod, "Pod", `restart (${r.restartPolicy}, exit code ${code})`);
    if (restart) {
      restart.restart = true;
      pass.restarted++;
    }
    addEvent(s, "Warning", "JobRestarting", msg);
    setJobCondition(s, { type: "Restarting", status: "True", reason: "JobRestarting", message: msg });
  } else if (r.restartPolicy === "ExitCode") {
    const msg = `job "${s.name}" is failing because "${r.type}" replica(s) failed.`;
    addEvent(s, "Warning", "JobFailed", msg);
    // DECIDE: upstream sets no completionTime on this path, and TTL then never applies ("completion time is nil").
    if (setJobCondition(s, { type: "Failed", status: "True", reason: "JobFailed", message: msg })) s.status.completionTime ??= metaTime(s.now);
  }
}

/**
 * 6. A pod counted in its replica type's statuses (upstream `core/status.go` UpdateJobReplicaStatuses): Running
 * as active (as failed when being deleted), Succeeded and Failed as such, Pending and Unknown not at all.
 */
function countPod(rs: ReplicaStatus, pod: KubeObject): void {
  const phase = phaseOf(pod);
  if (phase === "Running") {
    if (meta(pod).deletionTimestamp) rs.failed++;
    else rs.active++;
  } else if (phase === "Succeeded") rs.succeeded++;
  else if (phase === "Failed") rs.failed++;
}

/**
 * 5. The pods of replica type `r`, by slot: a missing index below `replicas` created, an index at or above
 * deleted (scale-down), a slot with two pods only reported, a Failed pod restarted or failing the job. Returns
 * the type's replica statuses.
 */
function reconcilePods(s: JobState, pass: ReplicaPass, r: Replica): ReplicaStatus {
  const rs: ReplicaStatus = { active: 0, succeeded: 0, failed: 0 };
  const own = s.input.pods.filter((p) => replicaTypeOf(p, s.kind) === r.rt);
  for (const [index, slot] of slices(own, r.replicas, labelScheme(s.kind).replicaIndexLabel, s.out.problems, `${s.where}: pod`)) {
    if (slot.length > 1) {
      s.out.problems.push(`${s.where}: ${slot.length} pods for ${r.rt} ${index}: ${slot.map((p) => meta(p).name).join(", ")}; left alone`);
      continue;
    }
    if (slot.length === 0) {
      createPod(s, pass, r, index);
      continue;
    }
    const pod = slot[0]!;
    if (index >= r.replicas) deleteObject(s, pod, "Pod", `scale-down: ${r.rt} ${index} is beyond the ${r.replicas} replicas`);
    restartOrFailPod(s, pass, r, pod);
    countPod(rs, pod);
  }
  return rs;
}

/**
 * 5. The headless Services of replica type `r`, by slot: a missing index below `replicas` created (unless in
 * flight, or deferred), an index at or above deleted (scale-down), a slot with two Services only reported.
 */
function reconcileServices(s: JobState, pass: ReplicaPass, r: Replica): void {
  const scheme = labelScheme(s.kind);
  const own = s.input.services.filter((svc) => meta(svc).labels?.[scheme.replicaTypeLabel] === r.rt);
  for (const [index, slot] of slices(own, r.replicas, scheme.replicaIndexLabel, s.out.problems, `${s.where}: service`)) {
    if (slot.length > 1) {
      s.out.problems.push(`${s.where}: ${slot.length} services for ${r.rt} ${index}; left alone`);
      continue;
    }
    if (slot.length === 0) {
      if (s.inFlight.creates.has(`Service/${replicaObjectName(s.job, s.kind, r.rt, index)}`)) continue;
      if (roomToCreate(s, pass)) s.out.creates.push(createAction(s, { kind: "Service", r, index, body: serviceFor(s.job, s.kind, r, index) }));
      continue;
    }
    if (index >= r.replicas) deleteObject(s, slot[0]!, "Service", `scale-down: ${r.rt} ${index} is beyond the ${r.replicas} replicas`);
  }
}

/**
 * 5. Pods and Services per replica type (`pod.go` ReconcilePods, `service.go` ReconcileServices), one cluster
 * spec per job (the host list of N replicas built once, not N times); the restart counter raised by the pods
 * restarted, the creates past `MAX_CREATES_PER_DECISION` reported. Returns (and stores) the replica statuses.
 */
function reconcileReplicas(s: JobState): Record<string, ReplicaStatus> {
  const pass: ReplicaPass = { memo: s.input.memo ?? new ClusterSpecMemo(), deferredCreates: 0, restarted: 0 };
  const counts: Record<string, ReplicaStatus> = {};
  for (const r of s.replicas) {
    counts[r.type] = reconcilePods(s, pass, r);
    reconcileServices(s, pass, r);
  }
  if (pass.restarted > 0) s.out.restarts = restartsOf(s.job) + pass.restarted;
  if (pass.deferredCreates > 0)
    s.out.problems.push(`${s.where}: ${pass.deferredCreates} creates wait for the next pass (at most ${MAX_CREATES_PER_DECISION} per decision)`);
  storeReplicaStatuses(s, counts);
  return counts;
}

/** 6. A running job's startTime (now, when it has none), and a look again when its active deadline could pass. */
function markStarted(s: JobState): void {
  s.status.startTime ??= metaTime(s.now);
  if (s.rp.activeDeadlineSeconds !== undefined && s.out.requeueAfterMs === undefined) s.out.requeueAfterMs = s.rp.activeDeadlineSeconds * 1000;
}

/** 6. The replica types that decide Running and Succeeded: a Chief or Master type, else the Worker type, else every type. */
function decidingReplicas(replicas: readonly Replica[]): readonly Replica[] {
  const lead = replicas.find((r) => r.rt === "chief" || r.rt === "master");
  const worker = replicas.find((r) => r.rt === "worker");
  return lead ? [lead] : worker ? [worker] : replicas;
}

/**
 * 6. Succeeded: every replica of the deciding types succeeded; sets completionTime, `Succeeded=True`
 * (`JobSucceeded`) and a Normal Event. True when the job succeeded (the decision ends).
 */
function decideSucceeded(s: JobState, counts: Record<string, ReplicaStatus>): boolean {
  if (!decidingReplicas(s.replicas).every((r) => r.replicas - (counts[r.type]?.succeeded ?? 0) <= 0)) return false;
  const msg = `${s.kind.kind} ${s.jm.namespace}/${s.name} successfully completed.`;
  s.status.completionTime ??= metaTime(s.now);
  if (setJobCondition(s, { type: "Succeeded", status: "True", reason: "JobSucceeded", message: msg })) addEvent(s, "Normal", "JobSucceeded", msg);
  return true;
}

/** 6. Running: a deciding replica type has active replicas (`Running=True`, `JobRunning`). */
function decideRunning(s: JobState, counts: Record<string, ReplicaStatus>): void {
  if (!decidingReplicas(s.replicas).some((r) => (counts[r.type]?.active ?? 0) > 0)) return;
  setJobCondition(s, { type: "Running", status: "True", reason: "JobRunning", message: `${s.kind.kind} ${s.jm.namespace}/${s.name} is running.` });
}

/**
 * 6. A replica type with failures and fewer succeeded + running than replicas: Restarting (a Warning Event)
 * when its restart policy is not Never, else Failed (completionTime set, a Normal Event).
 */
function decideReplicaFailures(s: JobState, counts: Record<string, ReplicaStatus>): void {
  for (const r of s.replicas) {
    const c = counts[r.type]!;
    if (c.failed <= 0 || r.replicas <= c.succeeded + c.active) continue;
    if (r.restartPolicy !== "Never") {
      const msg = `${s.kind.kind} ${s.name} is restarting because ${c.failed} ${r.type} replica(s) failed.`;
      if (setJobCondition(s, { type: "Restarting", status: "True", reason: "JobRestarting", message: msg })) addEvent(s, "Warning", "JobRestarting", msg);
      continue;
    }
    const msg = `${s.kind.kind} ${s.name} is failed because ${c.failed} ${r.type} replica(s) failed.`;
    if (setJobCondition(s, { type: "Failed", status: "True", reason: "JobFailed", message: msg })) {
      s.status.completionTime ??= metaTime(s.now);
      addEvent(s, "Normal", "JobFailed", msg);
    }
  }
}

/**
 * The decision for one job: the numbered steps of the module's doc, in order; a step that ends the decision
 * returns it. Step 7 is in every step (conditions set by `setCondition`) and at the end (`writeStatus`,
 * `finish`: the status written only when it changed).
 */
export function decideJob(input: ControllerInput): Decision {
  // 1. A job being deleted: nothing.
  if (meta(input.job).deletionTimestamp) return emptyDecision();
  const s = readJob(input);
  // An invalid run policy or replica spec: only the problems.
  if (!("input" in s)) return s;
  if (refuseOverCeiling(s)) return writeStatus(s);
  const violations = templateViolations(s);
  if (refuseTemplate(s, violations)) return writeStatus(s);
  allowFixedTemplate(s, violations);
  markCreated(s);
  if (isFinished(s.status)) {
    decideFinished(s);
    return finish(s);
  }
  if (s.rp.suspend) {
    decideSuspended(s);
    return finish(s);
  }
  resumeIfSuspended(s);
  const failure = backoffLimitFailure(s) ?? activeDeadlineFailure(s);
  if (failure) {
    failJob(s, failure);
    return finish(s);
  }
  const counts = reconcileReplicas(s);
  markStarted(s);
  if (decideSucceeded(s, counts)) return finish(s);
  decideRunning(s, counts);
  decideReplicaFailures(s, counts);
  return finish(s);
}

/** The Events' `source.component` (upstream: the controller's name, e.g. `pytorchjob-controller`). */
export const CONTROLLER_EVENT_SOURCE = "quartermaster-job-controller";

/** A core/v1 Event on the job, as client-go's recorder writes one (one per occurrence, no grouping). */
export function jobEvent(job: { namespace: string; name: string; uid: string }, kind: JobKind, e: JobEvent, now: Date): KubeObject {
  const at = metaTime(now);
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { generateName: `${job.name}.`, namespace: job.namespace },
    involvedObject: { apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: job.name, namespace: job.namespace, uid: job.uid },
    reason: e.reason,
    message: e.message.length > 1024 ? `${e.message.slice(0, 1021)}...` : e.message,
    type: e.type,
    source: { component: CONTROLLER_EVENT_SOURCE },
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
  };
}
