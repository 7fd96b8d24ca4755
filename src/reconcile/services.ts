/**
 * @module
 * Per-replica headless Services, as the training operator v1.8.1 makes them (`pkg/controller.v1/common/service.go`
 * CreateNewService, `pkg/core/service.go` GetPortsFromJob), for the replica pods of a job the operator does not
 * serve. For a pod without its Service, one named like it (`GenGeneralName`: `<job>-<type>-<index>`):
 *
 * - `metadata.labels` = `spec.selector` = the operator's `GenLabels` (`operator-name`, `job-name`) plus
 *   `replica-type` and `replica-index`: not the pod's own labels (its template's labels and `job-role` are
 *   left out, as upstream does);
 * - `clusterIP: None`, one port `{name, port}` per port of the framework's default container, after the
 *   operator's in-memory defaulting (`defaulting_utils.go` setDefaultPort: the framework's port, e.g.
 *   `tfjob-port: 2222`, appended when that container has no port of that name); ports are keyed by name as
 *   upstream's map is (the last of a name wins), in the container's order (upstream's is a Go map's: random);
 * - owned by the job (controller, blockOwnerDeletion), so the garbage collector removes it with the job.
 *
 * None where upstream makes none: a replica type without a container named like the framework's default
 * ("failed to find the port"), an index at or beyond the type's `replicas` (upstream deletes that Service), a
 * pod named otherwise than `GenGeneralName`, a finished, suspended or deleting job, and a kind whose operator
 * creates no Services (the label scheme says so: caffe2-operator creates none).
 *
 * A job another controller serves gets none at all: the training operator owns its Services (it creates the
 * missing ones on each reconcile of the job) and Quartermaster must not write what the operator owns. Two pieces
 * of evidence, either one enough:
 *
 * 1. The pods (exact, and there from the first pod on). The operator creates every pod with the job's
 *    controller reference in the create itself (`pkg/controller.v1/common/pod.go` createNewPod →
 *    `CreatePodsWithControllerRef`, `pkg/controller.v1/control/pod_control.go` GetPodFromTemplate), and in the
 *    same reconcile creates the replica's Service (`ReconcilePods` then `ReconcileServices`,
 *    `pkg/controller.v1/common/job.go`). The pods the reconciler serves are orphans it adopts
 *    (`src/reconcile/claim.ts`): its adoption patch is sent with the field manager `quartermaster-reconciler`,
 *    so the apiserver records in the pod's managedFields that this manager set the job's key in
 *    `f:metadata.f:ownerReferences`. A job gets Services only when every pod it controls had that reference set
 *    by one of `SERVING_FIELD_MANAGERS` and by no other manager (or is adopted in this very pass). A pod whose
 *    reference another manager set — the operator at creation, whatever its manager's name (derived by the
 *    apiserver from the user agent, i.e. the binary's name: `manager` in upstream's image) — or with no record
 *    of who set it means a controller makes the job's pods, and with them its Services: act only when certain.
 *    A pod created by hand with the job's reference looks exactly like the operator's and gets none either.
 *    Kinds Quartermaster's own job controller runs (`controller: quartermaster`, Caffe2Job by default) never
 *    come here: it makes their pods and Services itself (`src/reconcile/plan.ts`). Should it ever want this
 *    planner to complete its pods' Services, it adds its field manager to `SERVING_FIELD_MANAGERS` (its pod
 *    creates would then carry it); until then its pods count as another controller's.
 * 2. The job's status: the operator writes its conditions (`Created` first) at the end of its first reconcile of
 *    the job; Quartermaster never writes job status. This covers a job whose pods the reconciler adopted before
 *    an operator started serving it.
 *
 * Status alone left a window: between the operator creating a new job's pods and writing its first status, a
 * pass could create a Service the operator was about to create (0 or 1 of 69 in the racing part of
 * test/conformance/coexistence.test.ts). The pods close it: the reconciler sees no pod of the job before the
 * operator's create, and each one it sees carries the operator's reference. A timer (a grace period on young
 * pods) would only narrow it, and delay the Services of pods the reconciler really serves. Still possible: orphans
 * made by hand for a new job, adopted by both the reconciler and an operator that has not yet written status;
 * both then create the same Service and one create fails with AlreadyExists (test/conformance/services.test.ts:
 * the same object). The check is applied after the label scheme's: a kind whose operator creates no Services
 * (Caffe2Job) still gets none.
 */
import type { KubeObject } from "../core/kube.js";
import { frameworkInfo } from "../kinds/frameworks.js";
import { replicaName } from "../mutate/frameworks.js";
import type { JobKind } from "../policy/types.js";
import { labelScheme } from "../kinds/index.js";
import { replicaSpecs, replicasOf, type ReplicaSpec } from "../membership/resolve.js";
import { controllerUid } from "./claim.js";
import { RECONCILER_FIELD_MANAGER } from "../core/keys.js";
import { finishedAt } from "./finished.js";
import type { Meta } from "./meta.js";

export interface CreateServiceAction {
  verb: "create";
  kind: "Service";
  namespace: string;
  name: string;
  job: string;
  reason: string;
  body: KubeObject;
}

/** The names of the Services of each namespace. */
export type ServiceNames = ReadonlyMap<string, ReadonlySet<string>>;

/**
 * Every Service's name by namespace, built once a pass (a per-job scan would be quadratic at scale; no
 * `namespace/name` strings are built, 100,000 of them a pass being garbage).
 */
export function serviceKeys(services: readonly KubeObject[]): ServiceNames {
  const out = new Map<string, Set<string>>();
  for (const s of services) {
    const m = (s.metadata ?? {}) as Meta;
    const ns = m.namespace ?? "";
    let names = out.get(ns);
    if (!names) out.set(ns, (names = new Set()));
    if (m.name) names.add(m.name);
  }
  return out;
}

/** Why the operator is known to serve the job (it wrote the job's status conditions), or undefined. */
export function servedByOperator(job: KubeObject): string | undefined {
  const conditions = (job.status as { conditions?: unknown } | undefined)?.conditions;
  if (!Array.isArray(conditions) || conditions.length === 0) return undefined;
  const types = conditions.map((c) => String((c as { type?: unknown } | null)?.type ?? "?"));
  return `the training operator serves the job (status conditions ${types.join(", ")}): its Services are the operator's`;
}

/**
 * The field managers whose setting of a pod's controller reference makes its job's Services Quartermaster's to
 * make: the reconciler's (it adopted the pod). Quartermaster's job controller adds its own here to opt in.
 */
export const SERVING_FIELD_MANAGERS: readonly string[] = [RECONCILER_FIELD_MANAGER];

/** The managers owning the ownerReference of `uid` in the object's managedFields (`f:metadata.f:ownerReferences`, keyed `k:{"uid":...}`). */
export function ownerRefManagers(o: KubeObject, uid: string): string[] {
  const key = `k:${JSON.stringify({ uid })}`;
  const managed = ((o.metadata ?? {}) as { managedFields?: unknown }).managedFields;
  const out: string[] = [];
  if (!Array.isArray(managed)) return out;
  for (const e of managed as Array<{ manager?: unknown; fieldsV1?: { "f:metadata"?: { "f:ownerReferences"?: unknown } } } | null>) {
    const refs = e?.fieldsV1?.["f:metadata"]?.["f:ownerReferences"];
    if (refs && typeof refs === "object" && key in refs) out.push(String(e?.manager ?? ""));
  }
  return out;
}

/**
 * Why another controller serves the job, known from its pods (header, evidence 1), or undefined: a pod it
 * controls whose controller reference was set by a manager not in `managers`, or with no record of who set it.
 * Pods without a controller reference (orphans adopted in this pass) are the reconciler's.
 */
export function servedByController(job: KubeObject, pods: readonly KubeObject[], managers: readonly string[] = SERVING_FIELD_MANAGERS): string | undefined {
  const uid = String(((job.metadata ?? {}) as Meta).uid ?? "");
  for (const pod of pods) {
    if (controllerUid(pod) !== uid) continue;
    const name = ((pod.metadata ?? {}) as Meta).name;
    const by = ownerRefManagers(pod, uid);
    if (by.length === 0)
      return `pod ${name} carries the job's controller reference with no record (managedFields) that Quartermaster set it: the job's controller makes its Services`;
    const other = by.find((m) => !managers.includes(m));
    if (other !== undefined)
      return `the controller reference of pod ${name} to the job was set by ${JSON.stringify(other)}, not by Quartermaster: the job's controller makes its Services`;
  }
  return undefined;
}

interface Port {
  name?: string;
  containerPort?: unknown;
}

/**
 * The Service ports upstream derives for a replica spec: the default container's ports after defaulting, one
 * per name; undefined when the spec has no container of the default name (upstream: "failed to find the port").
 */
export function servicePorts(spec: ReplicaSpec, kind: Pick<JobKind, "framework">): Array<{ name?: string; port: number }> | undefined {
  const info = frameworkInfo(kind.framework);
  const containers = (spec.template?.spec?.containers ?? []) as Array<{ name?: string; ports?: Port[] }>;
  const container = containers.find((c) => c.name === info.container);
  if (!container) return undefined;
  const declared = Array.isArray(container.ports) ? container.ports : [];
  const ports: Port[] = declared.some((p) => p?.name === info.portName) ? declared : [...declared, { name: info.portName, containerPort: info.port }];
  // Go's map[string]int32 keyed by name: one port per name, the last value of a name winning.
  const byName = new Map<string, number>();
  for (const p of ports) if (typeof p?.containerPort === "number") byName.set(p.name ?? "", p.containerPort);
  return [...byName].map(([name, port]) => (name ? { name, port } : { port }));
}

/**
 * `pods`: those the job controls and the orphans it adopts in this pass; `have`: the Services of the cluster
 * (`serviceKeys`), whoever owns them; `managers`: `SERVING_FIELD_MANAGERS` unless a caller opts others in.
 */
export function planReplicaServices(
  job: KubeObject,
  kind: JobKind,
  pods: readonly KubeObject[],
  have: ServiceNames,
  managers: readonly string[] = SERVING_FIELD_MANAGERS,
): CreateServiceAction[] {
  if (!servesReplicaServices(job, kind, pods, managers)) return [];
  const specs = replicaSpecs(job, kind);
  const out: CreateServiceAction[] = [];
  for (const pod of pods) {
    const pm = (pod.metadata ?? {}) as Meta;
    if (!pm.name || pm.deletionTimestamp || have.get(pm.namespace ?? "")?.has(pm.name)) continue;
    const replica = replicaOfPod(job, kind, specs, pm);
    if (replica) out.push(createService(job, kind, replica));
  }
  return out;
}

/**
 * Whether the job's Services are Quartermaster's to make now: its kind's label scheme has Services, the job is
 * not being deleted, not finished, not suspended, and served neither by the operator nor by another controller.
 */
function servesReplicaServices(job: KubeObject, kind: JobKind, pods: readonly KubeObject[], managers: readonly string[]): boolean {
  const jm = (job.metadata ?? {}) as Meta;
  if (!labelScheme(kind).services || jm.deletionTimestamp || finishedAt(job, kind).finished || servedByOperator(job)) return false;
  if (servedByController(job, pods, managers)) return false;
  return (job.spec as { runPolicy?: { suspend?: unknown } } | undefined)?.runPolicy?.suspend !== true;
}

/** A replica pod of the job, as the Service for it is made from. */
interface ReplicaPod {
  name: string;
  namespace: string | undefined;
  type: string;
  index: number;
  ports: Array<{ name?: string; port: number }>;
}

/**
 * The replica whose pod `pm` is: its type and index labels name a replica of the job's specs, its name is that
 * replica's, and the replica spec has ports upstream would serve. Undefined for any other pod.
 */
function replicaOfPod(job: KubeObject, kind: JobKind, specs: ReturnType<typeof replicaSpecs>, pm: Meta): ReplicaPod | undefined {
  const scheme = labelScheme(kind);
  const type = pm.labels?.[scheme.replicaTypeLabel];
  const spec = specs.find(([t]) => t.toLowerCase() === type)?.[1];
  const indexLabel = pm.labels?.[scheme.replicaIndexLabel] ?? "";
  const index = /^(0|[1-9][0-9]*)$/.test(indexLabel) ? Number(indexLabel) : -1;
  if (!pm.name || !spec || !type || index < 0 || index >= replicasOf(spec)) return undefined;
  if (pm.name !== replicaName(String(((job.metadata ?? {}) as Meta).name ?? ""), type, index)) return undefined;
  const ports = servicePorts(spec, kind);
  return ports ? { name: pm.name, namespace: pm.namespace, type, index, ports } : undefined;
}

/** The headless Service of a replica pod: named like it, selecting it by the job's and the replica's labels. */
function createService(job: KubeObject, kind: JobKind, { name, namespace, type, index, ports }: ReplicaPod): CreateServiceAction {
  const jm = (job.metadata ?? {}) as Meta;
  const scheme = labelScheme(kind);
  const labels = { ...scheme.selector(job), [scheme.replicaTypeLabel]: type, [scheme.replicaIndexLabel]: String(index) };
  return {
    verb: "create",
    kind: "Service",
    namespace: namespace ?? jm.namespace ?? "",
    name,
    job: `${kind.kind}/${jm.name}`,
    reason: `replica pod ${name} has no Service`,
    body: {
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name,
        namespace: namespace ?? jm.namespace,
        labels,
        ownerReferences: [
          { apiVersion: `${kind.group}/${kind.version}`, kind: kind.kind, name: jm.name, uid: jm.uid, controller: true, blockOwnerDeletion: true },
        ],
      },
      spec: { clusterIP: "None", selector: { ...labels }, ...(ports.length > 0 ? { ports } : {}) },
    },
  };
}
