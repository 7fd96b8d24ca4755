/**
 * @module
 * Quartermaster as the controller of a training job whose kind has no operator (Caffe2Job by default:
 * kubeflow/caffe2-operator is archived; any kind the policy marks `controller: quartermaster`). Pure:
 * `(job, its pods and Services, the clock, what is still in flight) → creates, deletes, status, Events`.
 * The I/O is `src/kube/job-controller.ts`; finished jobs (CleanPodPolicy, TTL) stay with `finished.ts`, as
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
 * caffe2-operator's labels (`src/topology/label-scheme.ts`) and named `<namespace>-<job>-worker-<index>`: the
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
import type { V1Container, V1EnvVar } from "@kubernetes/client-node";
import { isDeepStrictEqual } from "node:util";
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_JOB_ROLE, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE } from "../core/keys.js";
import { clusterSpec, ClusterSpecMemo, FRAMEWORKS, isMasterRole, replicaObjectName as nameOfReplica } from "../mutate/frameworks.js";
import type { AllowedTemplates, Framework, JobKind } from "../policy/types.js";
import { CAFFE2_GROUP_NAME, CAFFE2_LABELS, caffe2RuntimeId, labelScheme, OPERATOR_NAMES } from "../topology/label-scheme.js";
import { MAX_JOB_REPLICAS } from "../topology/ceiling.js";
import { replicaSpecs, replicasOf, type ReplicaSpec } from "../topology/resolve.js";
import type { DeleteAction } from "./finished.js";
import { meta } from "./meta.js";
import { DEFAULT_ALLOWED_TEMPLATES, describeViolations, jobTemplateViolations } from "./template-guard.js";

/** Where Quartermaster counts the pods it deleted to restart them (the backoff limit's restarts). */
export const ANNOTATION_RESTARTS = "quartermaster.dev/restarts";

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

/** The condition and Event reason of a job over `MAX_JOB_REPLICAS` (`src/topology/ceiling.ts`). */
export const REASON_TOO_MANY_REPLICAS = "TooManyReplicas";

/**
 * The condition and Event reason of a job whose pod templates ask for what the policy does not allow
 * (`reconciler.allowedTemplates`, `template-guard.ts`); the condition turns False with {@link REASON_TEMPLATE_ALLOWED}
 * once the templates are fixed.
 */
export const REASON_TEMPLATE_REFUSED = "TemplateRefused";
export const REASON_TEMPLATE_ALLOWED = "TemplateAllowed";

/** Exit code upstream uses when the default container has not terminated (`pod.go` ReconcilePods). */
export const NO_EXIT_CODE = 0xbeef;

export type RestartPolicy = "Always" | "OnFailure" | "Never" | "ExitCode";

/** Upstream's default restart policy per framework (training-operator `*_defaults.go`; caffe2: the template's, else Never). */
const DEFAULT_RESTART: Record<Framework, RestartPolicy> = {
  tensorflow: "Never",
  pytorch: "OnFailure",
  mxnet: "Never",
  xgboost: "Never",
  paddle: "OnFailure",
  jax: "Never",
  caffe2: "Never",
};

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

interface Condition {
  type: string;
  status: "True" | "False" | "Unknown";
  reason?: string;
  message?: string;
  lastUpdateTime?: string;
  lastTransitionTime?: string;
}

interface ReplicaStatus {
  active: number;
  succeeded: number;
  failed: number;
}

interface Status {
  conditions?: Condition[];
  replicaStatuses?: Record<string, ReplicaStatus> | ReplicaStatus;
  startTime?: string;
  completionTime?: string;
  lastReconcileTime?: string;
  [k: string]: unknown;
}

interface RunPolicy {
  suspend: boolean;
  backoffLimit?: number;
  activeDeadlineSeconds?: number;
}

/** metav1.Time as the apiserver stores it: RFC 3339, whole seconds, UTC. */
export const metaTime = (d: Date): string => d.toISOString().replace(/\.\d+Z$/, "Z");

/** Upstream `IsRetryableExitCode`: 128 and above (signals: 137 SIGKILL, 143 SIGTERM) are retryable. */
export function isRetryableExitCode(code: number): boolean {
  return code >= 128;
}

/** Whether the job has condition `type` with status True. */
export function hasCondition(status: { conditions?: Condition[] } | undefined, type: string): boolean {
  return (status?.conditions ?? []).some((c) => c.type === type && c.status === "True");
}

/**
 * Upstream `setCondition` (training-operator `pkg/util/status.go`); true when the conditions changed.
 */
export function setCondition(status: Status, c: Condition): boolean {
  const conditions = status.conditions ?? [];
  if (hasCondition(status, "Failed")) return false;
  const current = conditions.find((x) => x.type === c.type);
  if (current && current.status === c.status && current.reason === c.reason) return false;
  const next: Condition = { ...c };
  if (current && current.status === c.status) next.lastTransitionTime = current.lastTransitionTime;
  const kept: Condition[] = [];
  for (const x of conditions) {
    if (x.type === c.type) continue;
    if ((c.type === "Restarting" && x.type === "Running") || (c.type === "Running" && x.type === "Restarting")) continue;
    kept.push((c.type === "Failed" || c.type === "Succeeded") && x.type === "Running" ? { ...x, status: "False" } : x);
  }
  status.conditions = [...kept, next];
  return true;
}

/**
 * `TemplateRefused=True` with `msg`; true when it changed. Unlike {@link setCondition} a new message alone is
 * a change: a template edited from one violation to another must say which fields are refused now.
 */
function setTemplateRefused(status: Status, msg: string, now: Date): boolean {
  if (setCondition(status, condition(REASON_TEMPLATE_REFUSED, "True", REASON_TEMPLATE_REFUSED, msg, now))) return true;
  const current = (status.conditions ?? []).find((c) => c.type === REASON_TEMPLATE_REFUSED);
  if (!current || current.message === msg || hasCondition(status, "Failed")) return false;
  current.message = msg;
  current.lastUpdateTime = metaTime(now);
  return true;
}

function condition(type: string, status: Condition["status"], reason: string, message: string, now: Date): Condition {
  const t = metaTime(now);
  return { type, status, reason, message, lastUpdateTime: t, lastTransitionTime: t };
}

function readRunPolicy(job: KubeObject): RunPolicy | { problems: string[] } {
  const raw = (job.spec as { runPolicy?: unknown } | undefined)?.runPolicy;
  if (raw !== undefined && (raw === null || typeof raw !== "object" || Array.isArray(raw))) return { problems: ["spec.runPolicy is not an object"] };
  const rp = (raw ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  const count = (field: string, min: number): number | undefined => {
    const v = rp[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min) problems.push(`spec.runPolicy.${field} ${JSON.stringify(v)} is not a whole number ≥ ${min}`);
    return v as number;
  };
  const backoffLimit = count("backoffLimit", 0);
  const activeDeadlineSeconds = count("activeDeadlineSeconds", 1);
  if (rp.suspend !== undefined && typeof rp.suspend !== "boolean") problems.push(`spec.runPolicy.suspend ${JSON.stringify(rp.suspend)} is not a boolean`);
  if (problems.length > 0) return { problems };
  return { suspend: rp.suspend === true, ...(backoffLimit !== undefined ? { backoffLimit } : {}), ...(activeDeadlineSeconds !== undefined ? { activeDeadlineSeconds } : {}) };
}

interface Replica {
  /** As the spec spells it (`Worker`). */
  type: string;
  /** Lower case, as in names and labels. */
  rt: string;
  spec: ReplicaSpec;
  replicas: number;
  restartPolicy: RestartPolicy;
}

const RESTART_POLICIES: readonly string[] = ["Always", "OnFailure", "Never", "ExitCode"];

function readReplicas(job: KubeObject, kind: JobKind): Replica[] | { problems: string[] } {
  const problems: string[] = [];
  const out: Replica[] = [];
  for (const [type, spec] of replicaSpecs(job, kind)) {
    const n = spec.replicas;
    if (n !== undefined && (typeof n !== "number" || !Number.isInteger(n) || n < 0)) problems.push(`replica type ${type}: replicas ${JSON.stringify(n)} is not a whole number ≥ 0`);
    if (!spec.template || typeof spec.template !== "object") problems.push(`replica type ${type} has no template`);
    const own = spec.restartPolicy;
    if (own !== undefined && !(RESTART_POLICIES as readonly unknown[]).includes(own)) problems.push(`replica type ${type}: restartPolicy ${JSON.stringify(own)} is not one of Always, OnFailure, Never, ExitCode`);
    const fromTemplate = kind.framework === "caffe2" ? spec.template?.spec?.restartPolicy : undefined;
    const restartPolicy = (own ?? (fromTemplate !== undefined && RESTART_POLICIES.includes(fromTemplate) ? fromTemplate : undefined) ?? DEFAULT_RESTART[kind.framework]) as RestartPolicy;
    out.push({ type, rt: type.toLowerCase(), spec, replicas: replicasOf(spec), restartPolicy });
  }
  if (out.length === 0) problems.push(`no replica specs (spec.${kind.framework === "caffe2" ? "replicaSpecs" : "<framework>ReplicaSpecs"})`);
  if (problems.length > 0) return { problems };
  // Upstream ranges over a Go map (random order); here the order is the types' names, as TFJob's fixed order is.
  return out.sort((a, b) => (a.type < b.type ? -1 : a.type > b.type ? 1 : 0));
}

/** The name of replica `index` of type `rt`: upstream GenGeneralName; Caffe2 on its `<namespace>/<job>` key. */
export function replicaObjectName(job: KubeObject, kind: JobKind, rt: string, index: number): string {
  const m = meta(job);
  return nameOfReplica(kind.framework, String(m.namespace), String(m.name), rt, index);
}

/** The controller's labels of replica `index` of type `rt` (upstream GenLabels + type + index [+ job-role]). */
export function replicaLabels(job: KubeObject, kind: JobKind, type: string, index: number): Record<string, string> {
  const m = meta(job);
  if (kind.framework === "caffe2") {
    return {
      [CAFFE2_LABELS.group]: CAFFE2_GROUP_NAME,
      [CAFFE2_LABELS.jobKey]: `${m.namespace}/${m.name}`.replaceAll("/", "-"),
      [CAFFE2_LABELS.runtimeId]: caffe2RuntimeId(job),
      [CAFFE2_LABELS.replicaType]: "worker",
      [CAFFE2_LABELS.replicaIndex]: String(index),
    };
  }
  const labels: Record<string, string> = {
    [LABEL_OPERATOR_NAME]: OPERATOR_NAMES[kind.framework]!,
    [LABEL_JOB_NAME]: String(m.name).replaceAll("/", "-"),
    [LABEL_REPLICA_TYPE]: type.toLowerCase(),
    [LABEL_REPLICA_INDEX]: String(index),
  };
  if (isMasterRole({ job, kind, replicaType: type, index })) labels[LABEL_JOB_ROLE] = "master";
  return labels;
}

export function ownerReference(job: KubeObject, kind: JobKind): Record<string, unknown> {
  const m = meta(job);
  return { apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: m.name, uid: m.uid, controller: true, blockOwnerDeletion: true };
}

const withEnv = (c: V1Container, env: readonly V1EnvVar[]): V1Container => {
  const have = new Set((c.env ?? []).map((e) => e.name));
  const add = env.filter((e) => !have.has(e.name));
  return add.length === 0 ? c : { ...c, env: [...(c.env ?? []), ...add] };
};

/**
 * The pod of replica `index` (upstream `createNewPod` and `GetPodFromTemplate`): the template's labels with
 * the controller's over them, its annotations and finalizers, its spec with the cluster-spec environment
 * appended (never overwriting a variable the container sets) and the restart policy from the replica spec
 * (`ExitCode` → `Never`, `core.SetRestartPolicy`), the job as controller. Also whether the template's own
 * restartPolicy was overwritten (upstream's Warning `SetPodTemplateRestartPolicy`).
 */
export function podFor(job: KubeObject, kind: JobKind, r: Replica, index: number, clusterDomain: string, memo?: ClusterSpecMemo): { body: KubeObject; overwroteRestartPolicy: boolean } {
  const m = meta(job);
  const template = structuredClone(r.spec.template ?? {}) as { metadata?: Record<string, unknown>; spec?: Record<string, unknown> };
  const tm = template.metadata ?? {};
  const spec = (template.spec ?? {}) as { restartPolicy?: string; containers?: V1Container[] };
  const cs = clusterSpec({ job, kind, replicaType: r.type, index }, String(m.namespace), clusterDomain, memo);
  if (!("skip" in cs)) {
    const target = cs.target;
    let done = false;
    spec.containers = (spec.containers ?? []).map((c) => {
      if (target === "all") return withEnv(c, cs.env);
      if (done || c.name !== target.container) return c;
      done = true;
      return withEnv(c, cs.env);
    });
  }
  const explicit = r.spec.restartPolicy !== undefined;
  const overwroteRestartPolicy = explicit && spec.restartPolicy !== undefined && spec.restartPolicy !== "";
  spec.restartPolicy = r.restartPolicy === "ExitCode" ? "Never" : r.restartPolicy;
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: replicaObjectName(job, kind, r.rt, index),
      namespace: m.namespace,
      labels: { ...(tm.labels ?? {}), ...replicaLabels(job, kind, r.type, index) },
      ...(tm.annotations ? { annotations: tm.annotations } : {}),
      ...(tm.finalizers ? { finalizers: tm.finalizers } : {}),
      ownerReferences: [ownerReference(job, kind)],
    },
    spec,
  };
  return { body, overwroteRestartPolicy };
}

/**
 * The headless Service of replica `index` (upstream `CreateNewService`): named like the pod, `clusterIP:
 * None`, labels and selector the controller's labels minus job-role, a port per port of the framework's
 * default container in the template (none named so: the framework's default port, which CRD defaulting
 * would have injected), the job as controller.
 */
export function serviceFor(job: KubeObject, kind: JobKind, r: Replica, index: number): KubeObject {
  const m = meta(job);
  const info = FRAMEWORKS[kind.framework];
  const labels = replicaLabels(job, kind, r.type, index);
  delete labels[LABEL_JOB_ROLE];
  const containers = (r.spec.template?.spec?.containers ?? []) as Array<{ name?: string; ports?: Array<{ name?: string; containerPort?: number }> }>;
  const own = (containers.find((c) => c.name === info.container)?.ports ?? []).filter((p) => typeof p.containerPort === "number");
  const ports = own.length > 0 ? own.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.containerPort! })) : [{ name: info.portName, port: info.port }];
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: replicaObjectName(job, kind, r.rt, index), namespace: m.namespace, labels, ownerReferences: [ownerReference(job, kind)] },
    spec: { clusterIP: "None", selector: labels, ports },
  };
}

interface PodShape {
  metadata?: { name?: string; uid?: string; namespace?: string; deletionTimestamp?: string; labels?: Record<string, string> };
  status?: {
    phase?: string;
    containerStatuses?: Array<{ name?: string; restartCount?: number; state?: { terminated?: { exitCode?: number } } }>;
    initContainerStatuses?: Array<{ restartCount?: number }>;
  };
}

/** The default container's exit code (upstream: the last terminated status of the container of that name), else 0xbeef. */
export function exitCodeOf(pod: KubeObject, kind: JobKind): number {
  let code = NO_EXIT_CODE;
  for (const s of (pod as PodShape).status?.containerStatuses ?? []) {
    const t = s.state?.terminated;
    if (s.name === FRAMEWORKS[kind.framework].container && t && typeof t.exitCode === "number") code = t.exitCode;
  }
  // A Caffe2 template need not name its container `caffe2` (caffe2-operator never read exit codes): its single
  // container's code stands when no container has the default name.
  if (code === NO_EXIT_CODE && kind.framework === "caffe2") {
    const statuses = (pod as PodShape).status?.containerStatuses ?? [];
    const t = statuses.length === 1 ? statuses[0]!.state?.terminated : undefined;
    if (t && typeof t.exitCode === "number") code = t.exitCode;
  }
  return code;
}

const phaseOf = (pod: KubeObject): string | undefined => (pod as PodShape).status?.phase;

/**
 * Upstream `GetPodSlices`: objects by their replica-index label; unparseable indices are reported and skipped.
 * Sparse: the slots `0 .. replicas-1` (empty or not), then only the occupied slots beyond, in order, so an
 * index label of 4294967296 (or a replica count past the ceiling) never allocates (upstream's dense slice
 * threw a RangeError here and aborted the pass).
 */
function slices(objects: readonly KubeObject[], replicas: number, indexLabel: string, problems: string[], what: string): Array<[number, KubeObject[]]> {
  const byIndex = new Map<number, KubeObject[]>();
  for (const o of objects) {
    const raw = meta(o).labels?.[indexLabel];
    if (raw === undefined || !/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
      problems.push(`${what} ${meta(o).name} has no valid ${indexLabel} label; left alone`);
      continue;
    }
    const i = Number(raw);
    const list = byIndex.get(i);
    if (list) list.push(o);
    else byIndex.set(i, [o]);
  }
  const n = Math.min(Math.max(0, replicas), MAX_JOB_REPLICAS);
  const out: Array<[number, KubeObject[]]> = [];
  for (let i = 0; i < n; i++) out.push([i, byIndex.get(i) ?? []]);
  for (const i of [...byIndex.keys()].filter((i) => i >= n).sort((a, b) => a - b)) out.push([i, byIndex.get(i)!]);
  return out;
}

function readStatus(job: KubeObject): Status {
  return structuredClone((job.status ?? {}) as Status);
}

/** Replica statuses in the common map shape, whatever the kind stores. */
function replicaStatusMap(status: Status, kind: JobKind): Record<string, ReplicaStatus> {
  const rs = status.replicaStatuses;
  if (!rs || typeof rs !== "object") return {};
  if (kind.framework === "caffe2") return "active" in rs || "succeeded" in rs || "failed" in rs ? { Worker: rs as ReplicaStatus } : (rs as Record<string, ReplicaStatus>);
  return rs as Record<string, ReplicaStatus>;
}

function totalFailed(map: Record<string, ReplicaStatus>): number {
  return Object.values(map).reduce((n, r) => n + (typeof r?.failed === "number" ? r.failed : 0), 0);
}

/** The restarts counted so far (the annotation; anything but a whole number reads as 0). */
export function restartsOf(job: KubeObject): number {
  const raw = (job.metadata as { annotations?: Record<string, string> } | undefined)?.annotations?.[ANNOTATION_RESTARTS];
  const n = Number(raw);
  return raw !== undefined && raw !== "" && Number.isInteger(n) && n >= 0 ? n : 0;
}

/** Deep equality regardless of key order (the apiserver returns a custom resource's keys sorted). */
function isEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(a, b);
}

/** The decision for one job. */
export function decideJob(input: ControllerInput): Decision {
  const { job, kind, now } = input;
  const out: Decision = { creates: [], deletes: [], events: [], problems: [] };
  const jm = meta(job);
  if (jm.deletionTimestamp) return out;
  const jobId = `${kind.kind}/${jm.name}`;
  const where = `${jm.namespace}/${jobId}`;
  const rp = readRunPolicy(job);
  const reps = readReplicas(job, kind);
  if ("problems" in rp || "problems" in reps) {
    out.problems.push(...[...("problems" in rp ? rp.problems : []), ...("problems" in reps ? reps.problems : [])].map((p) => `${where}: ${p}; nothing done for this job`));
    return out;
  }
  const old = readStatus(job);
  const status = readStatus(job);
  const replicaTotal = reps.reduce((n, r) => n + r.replicas, 0);
  if (replicaTotal > MAX_JOB_REPLICAS) {
    // Checked before anything is listed or allocated: no pods, no Services, the reason on the job.
    const msg = `${kind.kind} ${jm.namespace}/${jm.name} has ${replicaTotal} replicas in all, over Quartermaster's ceiling of ${MAX_JOB_REPLICAS} per job (MAX_JOB_REPLICAS); no pods are created.`;
    out.problems.push(`${where}: ${msg}`);
    if (!hasCondition(status, "Failed") && !hasCondition(status, "Succeeded")) {
      if (setCondition(status, condition(REASON_TOO_MANY_REPLICAS, "True", REASON_TOO_MANY_REPLICAS, msg, now))) out.events.push({ type: "Warning", reason: REASON_TOO_MANY_REPLICAS, message: msg });
    }
    if (!isEqual(old, status)) out.status = { ...status, lastReconcileTime: metaTime(now) };
    return out;
  }
  // The template guard (issue 29 item 6): the pods are created with the controller's ServiceAccount, so the
  // policy, not the user's RBAC, decides what they may be. Checked where the controller would create: a
  // finished job creates nothing, and a suspended one only loses its pods (its suspension still applies). A
  // refused job gets no pods and no Services, and nothing else is decided for it either: its existing pods
  // are left alone (never deleted for this) until the template is fixed.
  const violations = jobTemplateViolations(job, kind, input.allowedTemplates ?? DEFAULT_ALLOWED_TEMPLATES);
  const finishedOrSuspended = hasCondition(status, "Failed") || hasCondition(status, "Succeeded") || rp.suspend;
  if (violations.length > 0 && !finishedOrSuspended) {
    const msg = `${kind.kind} ${jm.namespace}/${jm.name}: the policy (reconciler.allowedTemplates) does not allow its template; no pods or Services are created: ${describeViolations(violations)}`;
    out.problems.push(`${where}: ${msg}`);
    if (setTemplateRefused(status, msg, now)) out.events.push({ type: "Warning", reason: REASON_TEMPLATE_REFUSED, message: msg });
    if (!isEqual(old, status)) out.status = { ...status, lastReconcileTime: metaTime(now) };
    return out;
  }
  if (violations.length === 0 && hasCondition(status, REASON_TEMPLATE_REFUSED)) {
    // Fixed: the condition turns False (kept, as Kubernetes conditions are, with when it changed) and the
    // rest of the decision creates what the job lacks.
    const msg = `${kind.kind} ${jm.namespace}/${jm.name}: its template is now allowed by the policy (reconciler.allowedTemplates).`;
    if (setCondition(status, condition(REASON_TEMPLATE_REFUSED, "False", REASON_TEMPLATE_ALLOWED, msg, now))) out.events.push({ type: "Normal", reason: REASON_TEMPLATE_ALLOWED, message: msg });
  }
  const inFlight = input.inFlight ?? { creates: new Set<string>(), deletes: new Set<string>() };
  const name = String(jm.name);
  const set = (type: string, st: Condition["status"], reason: string, message: string): boolean => setCondition(status, condition(type, st, reason, message, now));
  const event = (type: JobEvent["type"], reason: string, message: string): void => {
    if (!out.events.some((e) => e.reason === reason && e.message === message)) out.events.push({ type, reason, message });
  };
  const del = (o: KubeObject, kindOf: "Pod" | "Service", reason: string, restart = false): void => {
    const om = meta(o);
    if (om.deletionTimestamp || inFlight.deletes.has(`${kindOf}/${om.name}`)) return;
    if (out.deletes.some((d) => d.kind === kindOf && d.name === om.name)) return;
    out.deletes.push({ verb: "delete", kind: kindOf, namespace: String(om.namespace ?? jm.namespace), name: String(om.name), uid: String(om.uid), job: jobId, jobKind: kind, jobUid: String(jm.uid), reason, ...(restart ? { restart: true } : {}) });
  };
  const finish = (): Decision => {
    if (hasCondition(status, "Failed") || hasCondition(status, "Succeeded")) {
      // A job finished by this pass gets no new pods or Services (they would only be cleaned up again).
      out.creates = [];
      delete out.requeueAfterMs;
    }
    if (!isEqual(old, status)) out.status = { ...status, lastReconcileTime: metaTime(now) };
    return out;
  };

  if (!(status.conditions ?? []).some((c) => c.type === "Created")) set("Created", "True", "JobCreated", `${kind.kind} ${name} is created.`);
  let map = replicaStatusMap(status, kind);
  const store = (m: Record<string, ReplicaStatus>): void => {
    map = m;
    status.replicaStatuses = kind.framework === "caffe2" ? (m.Worker ?? { active: 0, succeeded: 0, failed: 0 }) : m;
  };

  // 2. Finished.
  if (hasCondition(status, "Succeeded") || hasCondition(status, "Failed")) {
    // A job this controller failed for its backoff limit or deadline (step 4) loses every pod and Service: what
    // an earlier pass's deletion budget left (`capControllerDeletes`) is deleted now, pass after pass.
    const failed = (status.conditions ?? []).find((c) => c.type === "Failed" && c.status === "True");
    if (failed?.reason === "JobFailed" && FAILURES_THAT_DELETE.some((f) => failed.message?.endsWith(f))) {
      for (const p of input.pods) del(p, "Pod", failed.message!);
      for (const s of input.services) del(s, "Service", failed.message!);
    }
    if (hasCondition(status, "Succeeded")) {
      const next: Record<string, ReplicaStatus> = {};
      for (const [t, r] of Object.entries(map)) next[t] = { ...r, succeeded: (r.succeeded ?? 0) + (r.active ?? 0), active: 0 };
      if (!isEqual(next, map)) store(next);
    }
    return finish();
  }

  const pods = input.pods;
  const services = input.services;
  // 3. Suspended.
  if (rp.suspend) {
    for (const p of pods) del(p, "Pod", "the job is suspended");
    for (const s of services) del(s, "Service", "the job is suspended");
    const next: Record<string, ReplicaStatus> = {};
    for (const [t, r] of Object.entries(map)) next[t] = { ...r, active: 0 };
    if (!isEqual(next, map)) store(next);
    const msg = `${kind.kind} ${name} is suspended.`;
    if (hasCondition(status, "Running")) set("Running", "False", "JobSuspended", msg);
    if (!hasCondition(status, "Suspended") && set("Suspended", "True", "JobSuspended", msg)) event("Normal", "JobSuspended", msg);
    return finish();
  }
  if (hasCondition(status, "Suspended")) {
    const msg = `${kind.kind} ${name} is resumed.`;
    set("Suspended", "False", "JobResumed", msg);
    status.startTime = metaTime(now);
    event("Normal", "JobResumed", msg);
  }

  // 4. Backoff limit and active deadline.
  const replicas = reps;
  const typeOf = (o: KubeObject): string | undefined => meta(o).labels?.[labelScheme(kind).replicaTypeLabel];
  const active = pods.filter((p) => !meta(p).deletionTimestamp && phaseOf(p) !== "Succeeded" && phaseOf(p) !== "Failed").length;
  const failedPods = pods.filter((p) => phaseOf(p) === "Failed").length;
  const total = replicas.reduce((n, r) => n + r.replicas, 0);
  const restarts = restartsOf(job);
  let failure: string | undefined;
  if (rp.backoffLimit !== undefined) {
    const newFailure = failedPods > totalFailed(map);
    const exceeds = newFailure && active !== total && restarts + 1 > rp.backoffLimit;
    let sum = 0;
    for (const r of replicas) {
      if (r.restartPolicy === "Never") continue;
      for (const p of pods) {
        if (typeOf(p) !== r.rt || phaseOf(p) !== "Running") continue;
        const s = (p as PodShape).status;
        for (const c of [...(s?.initContainerStatuses ?? []), ...(s?.containerStatuses ?? [])]) sum += typeof c.restartCount === "number" ? c.restartCount : 0;
      }
    }
    const past = rp.backoffLimit === 0 ? sum > 0 : sum >= rp.backoffLimit;
    if (exceeds || past) failure = `Job ${name} has failed because ${FAILURES_THAT_DELETE[0]}`;
  }
  const start = status.startTime ? Date.parse(status.startTime) : NaN;
  if (!failure && rp.activeDeadlineSeconds !== undefined && !Number.isNaN(start)) {
    const left = start + rp.activeDeadlineSeconds * 1000 - now.getTime();
    if (left <= 0) failure = `Job ${name} has failed because ${FAILURES_THAT_DELETE[1]}`;
    else out.requeueAfterMs = left;
  }
  if (failure) {
    status.completionTime ??= metaTime(now);
    for (const p of pods) del(p, "Pod", failure);
    for (const s of services) del(s, "Service", failure);
    event("Normal", "JobFailed", failure);
    set("Failed", "True", "JobFailed", failure);
    delete out.requeueAfterMs;
    return finish();
  }

  // 5. Pods and Services per replica type.
  const scheme = labelScheme(kind);
  const counts: Record<string, ReplicaStatus> = {};
  let restarted = 0;
  // One cluster spec per job, not per pod (the host list of N replicas built once, not N times).
  const memo = input.memo ?? new ClusterSpecMemo();
  let deferredCreates = 0;
  const roomToCreate = (): boolean => {
    if (out.creates.length < MAX_CREATES_PER_DECISION) return true;
    deferredCreates++;
    return false;
  };
  for (const r of replicas) {
    const rs: ReplicaStatus = { active: 0, succeeded: 0, failed: 0 };
    counts[r.type] = rs;
    const own = pods.filter((p) => typeOf(p) === r.rt);
    for (const [index, slot] of slices(own, r.replicas, scheme.replicaIndexLabel, out.problems, `${where}: pod`)) {
      if (slot.length > 1) {
        out.problems.push(`${where}: ${slot.length} pods for ${r.rt} ${index}: ${slot.map((p) => meta(p).name).join(", ")}; left alone`);
        continue;
      }
      if (slot.length === 0) {
        const podName = replicaObjectName(job, kind, r.rt, index);
        if (inFlight.creates.has(`Pod/${podName}`)) continue;
        if (!roomToCreate()) continue;
        const { body, overwroteRestartPolicy } = podFor(job, kind, r, index, input.clusterDomain ?? "", memo);
        out.creates.push({ verb: "create", kind: "Pod", namespace: String(jm.namespace), name: podName, job: jobId, jobKind: kind, jobUid: String(jm.uid), replicaType: r.type, index, reason: `${r.rt} ${index} has no pod`, body });
        if (overwroteRestartPolicy) event("Warning", "SetPodTemplateRestartPolicy", "Restart policy in pod template will be overwritten by restart policy in replica spec");
        continue;
      }
      const pod = slot[0]!;
      if (index >= r.replicas) del(pod, "Pod", `scale-down: ${r.rt} ${index} is beyond the ${r.replicas} replicas`);
      if (phaseOf(pod) === "Failed" && !meta(pod).deletionTimestamp && !inFlight.deletes.has(`Pod/${meta(pod).name}`)) {
        const code = exitCodeOf(pod, kind);
        if (r.restartPolicy === "OnFailure" || r.restartPolicy === "Always" || (r.restartPolicy === "ExitCode" && isRetryableExitCode(code))) {
          const msg = `job ${name} is restarting because ${r.type} replica(s) failed.`;
          const before = out.deletes.length;
          del(pod, "Pod", `restart (${r.restartPolicy}, exit code ${code})`, true);
          if (out.deletes.length > before) restarted++;
          event("Warning", "JobRestarting", msg);
          set("Restarting", "True", "JobRestarting", msg);
        } else if (r.restartPolicy === "ExitCode") {
          const msg = `job "${name}" is failing because "${r.type}" replica(s) failed.`;
          event("Warning", "JobFailed", msg);
          // DECIDE: upstream sets no completionTime on this path, and TTL then never applies ("completion time is nil").
          if (set("Failed", "True", "JobFailed", msg)) status.completionTime ??= metaTime(now);
        }
      }
      // Upstream core/status.go UpdateJobReplicaStatuses.
      const phase = phaseOf(pod);
      if (phase === "Running") {
        if (meta(pod).deletionTimestamp) rs.failed++;
        else rs.active++;
      } else if (phase === "Succeeded") rs.succeeded++;
      else if (phase === "Failed") rs.failed++;
    }
    const ownServices = services.filter((s) => meta(s).labels?.[scheme.replicaTypeLabel] === r.rt);
    for (const [index, slot] of slices(ownServices, r.replicas, scheme.replicaIndexLabel, out.problems, `${where}: service`)) {
      if (slot.length > 1) {
        out.problems.push(`${where}: ${slot.length} services for ${r.rt} ${index}; left alone`);
        continue;
      }
      if (slot.length === 0) {
        const svcName = replicaObjectName(job, kind, r.rt, index);
        if (inFlight.creates.has(`Service/${svcName}`)) continue;
        if (!roomToCreate()) continue;
        out.creates.push({ verb: "create", kind: "Service", namespace: String(jm.namespace), name: svcName, job: jobId, jobKind: kind, jobUid: String(jm.uid), replicaType: r.type, index, reason: `${r.rt} ${index} has no service`, body: serviceFor(job, kind, r, index) });
        continue;
      }
      if (index >= r.replicas) del(slot[0]!, "Service", `scale-down: ${r.rt} ${index} is beyond the ${r.replicas} replicas`);
    }
  }
  if (restarted > 0) out.restarts = restarts + restarted;
  if (deferredCreates > 0) out.problems.push(`${where}: ${deferredCreates} creates wait for the next pass (at most ${MAX_CREATES_PER_DECISION} per decision)`);
  store(counts);

  // 6. The job's conditions (the common UpdateJobStatus).
  status.startTime ??= metaTime(now);
  if (rp.activeDeadlineSeconds !== undefined && out.requeueAfterMs === undefined) out.requeueAfterMs = rp.activeDeadlineSeconds * 1000;
  const lead = replicas.find((r) => r.rt === "chief" || r.rt === "master");
  const worker = replicas.find((r) => r.rt === "worker");
  const deciding = lead ? [lead] : worker ? [worker] : replicas;
  const succeeded = deciding.every((r) => r.replicas - (counts[r.type]?.succeeded ?? 0) <= 0);
  if (succeeded) {
    const msg = `${kind.kind} ${jm.namespace}/${name} successfully completed.`;
    status.completionTime ??= metaTime(now);
    if (set("Succeeded", "True", "JobSucceeded", msg)) event("Normal", "JobSucceeded", msg);
    return finish();
  }
  if (deciding.some((r) => (counts[r.type]?.active ?? 0) > 0)) set("Running", "True", "JobRunning", `${kind.kind} ${jm.namespace}/${name} is running.`);
  for (const r of replicas) {
    const c = counts[r.type]!;
    if (c.failed > 0 && r.replicas > c.succeeded + c.active) {
      if (r.restartPolicy !== "Never") {
        const msg = `${kind.kind} ${name} is restarting because ${c.failed} ${r.type} replica(s) failed.`;
        if (set("Restarting", "True", "JobRestarting", msg)) event("Warning", "JobRestarting", msg);
      } else {
        const msg = `${kind.kind} ${name} is failed because ${c.failed} ${r.type} replica(s) failed.`;
        if (set("Failed", "True", "JobFailed", msg)) {
          status.completionTime ??= metaTime(now);
          event("Normal", "JobFailed", msg);
        }
      }
    }
  }
  return finish();
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
