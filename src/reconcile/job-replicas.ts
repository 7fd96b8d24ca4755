/**
 * @module
 * The job controller's replicas (`src/reconcile/job-controller.ts`): the replica types of a job with their
 * restart policies, and the objects made for them as upstream makes them (pod and Service names, labels, owner
 * reference, the pod's body, the headless Service), read back by index. Pure.
 */
import type { V1Container, V1EnvVar } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { LABEL_JOB_NAME, LABEL_JOB_ROLE, LABEL_OPERATOR_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE } from "../core/keys.js";
import { frameworkInfo } from "../kinds/frameworks.js";
import { clusterSpec, ClusterSpecMemo, isMasterRole, replicaObjectName as nameOfReplica } from "../mutate/frameworks.js";
import type { JobKind } from "../policy/types.js";
import { jobShape, labelScheme, operatorName } from "../kinds/index.js";
import { MAX_JOB_REPLICAS } from "../membership/ceiling.js";
import { replicaSpecs, replicasOf, type ReplicaSpec } from "../membership/resolve.js";
import { meta } from "./meta.js";

/** Exit code upstream uses when the default container has not terminated (`pod.go` ReconcilePods). */
export const NO_EXIT_CODE = 0xbeef;

export type RestartPolicy = "Always" | "OnFailure" | "Never" | "ExitCode";

/** Upstream's default restart policy per framework (training-operator `*_defaults.go`; caffe2: the template's, else Never). */
const DEFAULT_RESTART: Readonly<Partial<Record<string, RestartPolicy>>> = {
  tensorflow: "Never",
  pytorch: "OnFailure",
  mxnet: "Never",
  xgboost: "Never",
  paddle: "OnFailure",
  jax: "Never",
  caffe2: "Never",
  trainer: "Never",
};

export interface Replica {
  /** As the spec spells it (`Worker`). */
  type: string;
  /** Lower case, as in names and labels. */
  rt: string;
  spec: ReplicaSpec;
  replicas: number;
  restartPolicy: RestartPolicy;
}

const RESTART_POLICIES: readonly string[] = ["Always", "OnFailure", "Never", "ExitCode"];

export function readReplicas(job: KubeObject, kind: JobKind): Replica[] | { problems: string[] } {
  const problems: string[] = [];
  const out: Replica[] = [];
  for (const [type, spec] of replicaSpecs(job, kind)) {
    const n = spec.replicas;
    if (n !== undefined && (typeof n !== "number" || !Number.isInteger(n) || n < 0))
      problems.push(`replica type ${type}: replicas ${JSON.stringify(n)} is not a whole number ≥ 0`);
    if (!spec.template || typeof spec.template !== "object") problems.push(`replica type ${type} has no template`);
    const own = spec.restartPolicy;
    if (own !== undefined && !(RESTART_POLICIES as readonly unknown[]).includes(own))
      problems.push(`replica type ${type}: restartPolicy ${JSON.stringify(own)} is not one of Always, OnFailure, Never, ExitCode`);
    const fromTemplate = jobShape(kind).restartPolicyFromTemplate ? spec.template?.spec?.restartPolicy : undefined;
    const restartPolicy = (own ??
      (fromTemplate !== undefined && RESTART_POLICIES.includes(fromTemplate) ? fromTemplate : undefined) ??
      DEFAULT_RESTART[kind.framework] ??
      "Never") as RestartPolicy;
    out.push({ type, rt: type.toLowerCase(), spec, replicas: replicasOf(spec), restartPolicy });
  }
  if (out.length === 0) problems.push(`no replica specs (${jobShape(kind).specsHint})`);
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
  const fixed = labelScheme(kind).replicaLabels?.(job, index);
  if (fixed) return fixed;
  const operator = operatorName(kind);
  const labels: Record<string, string> = {
    ...(operator !== undefined ? { [LABEL_OPERATOR_NAME]: operator } : {}),
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

/** Which pod {@link podFor} builds: replica `index` of a replica type of a job. */
export interface PodInput {
  job: KubeObject;
  kind: JobKind;
  replica: Replica;
  index: number;
  clusterDomain: string;
  /** Where the job's cluster spec is built once for all its pods (default: none, built for this pod). */
  memo?: ClusterSpecMemo;
}

/**
 * The pod of replica `index` (upstream `createNewPod` and `GetPodFromTemplate`): the template's labels with
 * the controller's over them, its annotations and finalizers, its spec with the cluster-spec environment
 * appended (never overwriting a variable the container sets) and the restart policy from the replica spec
 * (`ExitCode` → `Never`, `core.SetRestartPolicy`), the job as controller. Also whether the template's own
 * restartPolicy was overwritten (upstream's Warning `SetPodTemplateRestartPolicy`).
 */
export function podFor(pod: PodInput): { body: KubeObject; overwroteRestartPolicy: boolean } {
  const { job, kind, replica: r, index, clusterDomain, memo } = pod;
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
  const info = frameworkInfo(kind.framework);
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

export interface PodShape {
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
    if (s.name === frameworkInfo(kind.framework).container && t && typeof t.exitCode === "number") code = t.exitCode;
  }
  // A Caffe2 template need not name its container `caffe2` (caffe2-operator never read exit codes): its single
  // container's code stands when no container has the default name.
  if (code === NO_EXIT_CODE && !jobShape(kind).namedContainer) {
    const statuses = (pod as PodShape).status?.containerStatuses ?? [];
    const t = statuses.length === 1 ? statuses[0]!.state?.terminated : undefined;
    if (t && typeof t.exitCode === "number") code = t.exitCode;
  }
  return code;
}

export const phaseOf = (pod: KubeObject): string | undefined => (pod as PodShape).status?.phase;

/**
 * Upstream `GetPodSlices`: objects by their replica-index label; unparseable indices are reported and skipped.
 * Sparse: the slots `0 .. replicas-1` (empty or not), then only the occupied slots beyond, in order, so an
 * index label of 4294967296 (or a replica count past the ceiling) never allocates (upstream's dense slice
 * threw a RangeError here and aborted the pass).
 */
export function slices(objects: readonly KubeObject[], replicas: number, indexLabel: string, problems: string[], what: string): Array<[number, KubeObject[]]> {
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
