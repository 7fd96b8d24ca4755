/**
 * @module
 * The reconciler's window on the cluster, through @kubernetes/client-node (imported on first use) and, for
 * the LISTs of many objects, plain JSON over `./rest.ts`: paged LISTs (500 a page, as Gatekeeper's audit does), deletes with a uid precondition, strategic-merge
 * patches, ConfigMap writes with a resourceVersion precondition and Events. Counts its API
 * calls for the pass summary. Errors keep their HTTP status in `code`.
 */
import type { V1ContainerStatus, V1ObjectMeta, V1PodCondition, V1PodSpec, V1PodStatus } from "@kubernetes/client-node";
import { asKubeObject, asV1Lease, asV1Namespace, asV1Node, asV1Pod, asV1Service } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import type { NamespaceInfo } from "../core/scope.js";
import { RECONCILER_FIELD_MANAGER } from "../core/keys.js";
import type { KueueObjects } from "../ledger/kueue-quota.js";
import { KUEUE_GROUP, KUEUE_VERSION } from "../kueue/queues.js";
import { kubeClient, statusOf, type KubeClientOptions } from "./client.js";
import { restClient, type RestClient } from "./rest.js";
import { deepFreeze } from "../core/object.js";

export const PAGE_SIZE = 500;
/**
 * The page of a LIST of jobs: a job may be as large as etcd takes (1.5 MiB by default, `--max-request-bytes`),
 * and a page's objects are all parsed before the first is trimmed, so a page of 25 is at most ~40 MiB of JSON
 * (500 were 750 MiB: a restart past the manifests' 1 GiB limit). 10,000 jobs: 400 requests.
 */
export const JOB_PAGE_SIZE = 25;

export interface ClusterReader {
  /** Every namespace, trimmed to name and labels (the scope is decided from them). */
  listNamespaces(): Promise<NamespaceInfo[]>;
  /**
   * Every object of a job kind in the cluster, each as `project` keeps it (`./projection.ts`; default: whole);
   * undefined when the kind's CRD is not installed.
   */
  listJobs(kind: JobKind, project?: (o: object) => KubeObject): Promise<KubeObject[] | undefined>;
  /** A job read fresh from the apiserver (no cache), or undefined when it is gone. */
  getJob(kind: JobKind, namespace: string, name: string): Promise<KubeObject | undefined>;
  /**
   * Pods across namespaces (all of them without a selector), trimmed to the fields the reconciler reads.
   * `whole`, when given, sees each pod as listed (plain JSON) before it is trimmed: how a pass keeps more of
   * some (the PolicyReports' audit, `./pass.ts`) without a second LIST.
   */
  listPods(labelSelector?: string, whole?: (pod: KubeObject) => void): Promise<KubeObject[]>;
  /** Services across namespaces, trimmed to their metadata. */
  listServices(labelSelector?: string): Promise<KubeObject[]>;
  /**
   * Nodes, trimmed to name, status capacity/allocatable and the Ready condition's heartbeat, and of their labels
   * only those named in `keepLabels` (the Kueue flavors' nodeLabels; none by default).
   */
  listNodes(keepLabels?: ReadonlySet<string>): Promise<KubeObject[]>;
  /** The Leases of `kube-node-lease` (one per node, renewed by its kubelet). */
  listNodeLeases(): Promise<KubeObject[]>;
  /** ConfigMaps of a namespace carrying `labelSelector`. */
  listConfigMaps(namespace: string, labelSelector: string): Promise<KubeObject[]>;
  /**
   * ResourceSlices (`resource.k8s.io/v1`, cluster-scoped), trimmed to what the device ledger reads; `[]` on a
   * cluster without the API (404). Optional: a reader without it has no DRA.
   */
  listResourceSlices?(): Promise<KubeObject[]>;
  /** ResourceClaims of every namespace (`resource.k8s.io/v1`), trimmed; `[]` on a cluster without the API (404). */
  listResourceClaims?(): Promise<KubeObject[]>;
  /**
   * Kueue's ResourceFlavors and ClusterQueues (`kueue.x-k8s.io/v1beta2`, cluster-scoped), for the ledger's
   * section per flavor; undefined when Kueue is not installed (404). Optional: a reader without it has no Kueue.
   */
  listKueue?(): Promise<KueueObjects | undefined>;
}

export interface ClusterWriter {
  /** Deletes with a uid precondition and Background propagation. Resolves "deleted", "gone" (404) or "changed" (409). */
  delete(target: {
    kind: "Pod" | "Service" | "Job" | "ConfigMap";
    jobKind?: JobKind;
    namespace: string;
    name: string;
    uid: string;
  }): Promise<"deleted" | "gone" | "changed">;
  /**
   * A strategic-merge patch of a Pod or Service. Resolves "patched", "gone" (404) or "invalid" (422: the uid
   * precondition in the patch failed, or the result was refused, e.g. a second controller).
   */
  patch(target: { kind: "Pod" | "Service"; namespace: string; name: string }, patch: string): Promise<"patched" | "gone" | "invalid">;
  /** Creates or replaces a ConfigMap; a replace carries the resourceVersion read. Resolves "written" or "conflict" (409). */
  putConfigMap(namespace: string, body: KubeObject, resourceVersion?: string): Promise<"written" | "conflict">;
  createEvent(namespace: string, body: KubeObject): Promise<void>;
}

export interface ClusterCreator {
  /** Creates a Service; resolves "created", or "exists" (409 AlreadyExists counts as done). */
  createService(namespace: string, body: KubeObject): Promise<"created" | "exists">;
}

/** The writes of Quartermaster's job controller (src/run/job-controller.ts), for kinds without an operator. */
export interface ClusterController {
  /** Creates a Pod; resolves "created", or "exists" (409 AlreadyExists). */
  createPod(namespace: string, body: KubeObject): Promise<"created" | "exists">;
  /**
   * A JSON merge patch of the job's status subresource (`{status, metadata: {resourceVersion}}`: the
   * resourceVersion read is the precondition). Resolves "patched", "conflict" (409) or "gone" (404).
   */
  patchJobStatus(
    kind: JobKind,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    resourceVersion?: string,
  ): Promise<"patched" | "conflict" | "gone">;
  /** A JSON merge patch of the job's annotations, with the resourceVersion read as precondition. */
  patchJobAnnotations(
    kind: JobKind,
    namespace: string,
    name: string,
    annotations: Record<string, string>,
    resourceVersion?: string,
  ): Promise<"patched" | "conflict" | "gone">;
}

export interface Cluster extends ClusterReader, ClusterWriter, ClusterCreator, ClusterController {
  readonly calls: number;
}

/** Pods trimmed to what the planner and the ledger read: a 100,000-pod cluster then fits in memory comfortably. */
/** The metadata the planners read (identity, labels, owners, timestamps); the rest is dropped. */
function slimMeta(m: V1ObjectMeta, managedFields?: readonly Record<string, unknown>[], parts?: SharedParts): Record<string, unknown> {
  // One object literal: spreading this result into another and adding a key costs ~250 bytes an object in V8.
  return {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    ...(m.labels ? { labels: m.labels } : {}),
    ...(m.ownerReferences ? { ownerReferences: parts ? shared(parts, "owners", m.ownerReferences) : m.ownerReferences } : {}),
    ...(m.creationTimestamp ? { creationTimestamp: iso(m.creationTimestamp) } : {}),
    ...(m.deletionTimestamp ? { deletionTimestamp: iso(m.deletionTimestamp) } : {}),
    ...(managedFields ? { managedFields } : {}),
  };
}

/** Services trimmed to their metadata: the planners read nothing else of them. */
export function slimService(o: object): KubeObject {
  const s = asV1Service(o);
  return { apiVersion: "v1", kind: "Service", metadata: slimMeta(s.metadata ?? {}) };
}

/**
 * The parts of trimmed pods that repeat from pod to pod (the managedFields kept, the owner references, the
 * containers, their statuses, the scheduling condition), by their text: equal parts share one frozen copy. One
 * map per LIST, or per informer (which bounds it). 50,000 pods of 5,000 PyTorchJobs, parsed from JSON and
 * trimmed: 1,688 bytes of heap a pod unshared, 935 shared. The planners never write to what they read.
 */
export type SharedParts = Map<string, unknown>;

/** `value`, or the frozen copy of an equal one seen before under the same `tag`. */
function shared<T>(parts: SharedParts, tag: string, value: T): T {
  const text = `${tag}${JSON.stringify(value)}`;
  const seen = parts.get(text);
  if (seen !== undefined) return seen as T;
  parts.set(text, deepFreeze(value));
  return value;
}

/**
 * Of a pod's managedFields, only who owns which of its ownerReferences (manager, operation, subresource and the
 * `f:metadata.f:ownerReferences` keys): the Service planner reads whether the reconciler set the job's
 * controller reference (`src/reconcile/services.ts`). Every other field and the timestamps are dropped, and
 * equal results are shared through `cache`: +1.6 MiB of heap for 100,000 pods of 1,600 jobs (unshared: +67 MiB).
 */
function slimOwnerFields(managed: unknown, cache: SharedParts): readonly Record<string, unknown>[] | undefined {
  if (!Array.isArray(managed)) return undefined;
  const out: Record<string, unknown>[] = [];
  for (const entry of managed as unknown[]) {
    const e = (entry ?? {}) as {
      manager?: unknown;
      operation?: unknown;
      subresource?: unknown;
      fieldsV1?: { "f:metadata"?: { "f:ownerReferences"?: unknown } };
    };
    const refs = e.fieldsV1?.["f:metadata"]?.["f:ownerReferences"];
    if (!refs || typeof refs !== "object") continue;
    const keys: Record<string, object> = {};
    for (const k of Object.keys(refs)) if (k.startsWith("k:")) keys[k] = {};
    out.push({
      manager: e.manager,
      operation: e.operation,
      ...(e.subresource ? { subresource: e.subresource } : {}),
      fieldsV1: { "f:metadata": { "f:ownerReferences": keys } },
    });
  }
  return out.length === 0 ? undefined : shared(cache, "managed", out);
}

function containerStatus(c: V1ContainerStatus | undefined): Record<string, unknown> {
  const code = c?.state?.terminated?.exitCode;
  return { name: c?.name, restartCount: c?.restartCount ?? 0, ...(typeof code === "number" ? { state: { terminated: { exitCode: code } } } : {}) };
}

/** The pod's claims, for the device ledger (Dynamic Resource Allocation). */
function podClaims(spec: Partial<V1PodSpec>): Record<string, unknown> {
  return spec.resourceClaims?.length ? { resourceClaims: plain(spec.resourceClaims) } : {};
}

/** Which claims were made for the pod's templates and for its extended-resource requests. */
function podClaimStatus(status: V1PodStatus | undefined): Record<string, unknown> {
  return {
    ...(status?.resourceClaimStatuses?.length ? { resourceClaimStatuses: plain(status.resourceClaimStatuses) } : {}),
    ...(status?.extendedResourceClaimStatus ? { extendedResourceClaimStatus: plain(status.extendedResourceClaimStatus) } : {}),
  };
}

/**
 * Where an unbound pod may go (nodeSelector, required node affinity, tolerations): what the resident reconciler's
 * verdict on a pending job reads (src/run/blocked.ts, kube-scheduler's filters in src/explain/nodes.ts). Dropped
 * once the pod is bound, shared between a job's pods: a few hundred bytes per placement, not per pod.
 */
function podPlacement(spec: Partial<V1PodSpec>, cache: SharedParts): Record<string, unknown> {
  if (spec.nodeName) return {};
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  const placement = {
    ...(spec.nodeSelector ? { nodeSelector: spec.nodeSelector } : {}),
    ...(required ? { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: required } } } : {}),
    ...(spec.tolerations?.length ? { tolerations: spec.tolerations } : {}),
  };
  return Object.keys(placement).length === 0 ? {} : shared(cache, "placement", plain(placement));
}

export function slimPod(o: object, cache: SharedParts = new Map()): KubeObject {
  const p = asV1Pod(o);
  const spec: Partial<V1PodSpec> = p.spec ?? {};
  const owners = slimOwnerFields(p.metadata?.managedFields, cache);
  const container = (c: { name?: string; resources?: unknown; ports?: unknown; restartPolicy?: string }): Record<string, unknown> => ({
    name: c.name,
    ...(c.resources ? { resources: c.resources } : {}),
    ...(c.ports ? { ports: c.ports } : {}),
    ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: slimMeta(p.metadata ?? {}, owners, cache),
    spec: {
      ...(spec.nodeName ? { nodeName: spec.nodeName } : {}),
      containers: shared(cache, "containers", (spec.containers ?? []).map(container)),
      ...(spec.initContainers ? { initContainers: shared(cache, "init", spec.initContainers.map(container)) } : {}),
      ...podClaims(spec),
      ...podPlacement(spec, cache),
    },
    status: {
      ...(p.status?.phase ? { phase: p.status.phase } : {}),
      ...podClaimStatus(p.status),
      // The job controller reads restart counts and the default container's exit code.
      ...(p.status?.containerStatuses ? { containerStatuses: shared(cache, "statuses", p.status.containerStatuses.map(containerStatus)) } : {}),
      ...(p.status?.initContainerStatuses ? { initContainerStatuses: shared(cache, "initStatuses", p.status.initContainerStatuses.map(containerStatus)) } : {}),
      ...(p.status?.conditions
        ? {
            conditions: shared(
              cache,
              "conditions",
              p.status.conditions
                .filter((c: V1PodCondition) => c.type === "PodScheduled")
                .map((c: V1PodCondition) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message })),
            ),
          }
        : {}),
    },
  };
}

const plain = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;
const rec = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

/** A ResourceSlice trimmed to driver, node, pool and its devices' names and attributes (src/ledger/dra-usage.ts). */
export function slimResourceSlice(o: object): KubeObject {
  const x = rec(plain(o));
  const spec = rec(x.spec);
  const devices = Array.isArray(spec.devices) ? spec.devices.map(rec) : [];
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceSlice",
    metadata: { name: rec(x.metadata).name },
    spec: {
      driver: spec.driver,
      ...(spec.nodeName !== undefined ? { nodeName: spec.nodeName } : {}),
      pool: spec.pool,
      devices: devices.map((d) => ({ name: d.name, ...(d.attributes !== undefined ? { attributes: d.attributes } : {}) })),
    },
  };
}

/** A ResourceClaim trimmed to its spec's requests and its allocation's results, node selector and holders. */
export function slimResourceClaim(o: object): KubeObject {
  const x = rec(plain(o));
  const m = rec(x.metadata);
  const status = rec(x.status);
  const allocation = rec(status.allocation);
  return {
    apiVersion: "resource.k8s.io/v1",
    kind: "ResourceClaim",
    metadata: { name: m.name, namespace: m.namespace, uid: m.uid, ...(m.annotations !== undefined ? { annotations: m.annotations } : {}) },
    spec: rec(x.spec),
    status: {
      ...(status.allocation !== undefined
        ? {
            allocation: {
              devices: { results: rec(allocation.devices).results ?? [] },
              ...(allocation.nodeSelector !== undefined ? { nodeSelector: allocation.nodeSelector } : {}),
            },
          }
        : {}),
      ...(status.reservedFor !== undefined ? { reservedFor: status.reservedFor } : {}),
    },
  };
}

export function slimNode(o: object, keepLabels?: ReadonlySet<string>): KubeObject {
  const n = asV1Node(o);
  const ready = (n.status?.conditions ?? []).find((c) => c?.type === "Ready");
  const conditions = ready
    ? { conditions: [{ type: "Ready", status: ready.status, ...(ready.lastHeartbeatTime ? { lastHeartbeatTime: iso(ready.lastHeartbeatTime) } : {}) }] }
    : {};
  // Only the labels asked for: a node's dozens of labels, at thousands of nodes, would be megabytes kept for nothing.
  const all = n.metadata?.labels;
  const kept = keepLabels?.size && all ? Object.entries(all).filter(([k]) => keepLabels.has(k)) : [];
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: n.metadata?.name, uid: n.metadata?.uid, ...(kept.length > 0 ? { labels: Object.fromEntries(kept) } : {}) },
    status: { capacity: n.status?.capacity ?? {}, allocatable: n.status?.allocatable ?? {}, ...conditions },
  };
}

export function slimNamespace(o: object): NamespaceInfo {
  const ns = asV1Namespace(o);
  return { name: String(ns.metadata?.name), ...(ns.metadata?.labels ? { labels: ns.metadata.labels } : {}) };
}

/** client-node hands timestamps back as Date objects (sometimes strings, despite the types): always ISO text here. */
function iso(t: unknown): string {
  return t instanceof Date ? t.toISOString() : String(t);
}

type Page = { items?: object[]; metadata?: { resourceVersion?: string; _continue?: string; continue?: string } };

/**
 * One page of a LIST of `path` as plain JSON through `rest` (./rest.ts), from `cont` (undefined: the first):
 * how the reconciler reads the collections of many objects (pods, Services, nodes, Leases), here and in the
 * resident reconciler's informers.
 */
export const plainListPage =
  (rest: RestClient, path: string, labelSelector?: string) =>
  async (cont: string | undefined): Promise<Page> => {
    const q = new URLSearchParams({ limit: String(PAGE_SIZE), ...(labelSelector ? { labelSelector } : {}), ...(cont ? { continue: cont } : {}) });
    return (await rest.get(`${path}?${q}`)) ?? {};
  };

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** What the cluster's calls share: client-node's APIs, the plain-JSON client where the kubeconfig allows, the call count. */
interface ClusterConn {
  k8s: ClientModule;
  core: InstanceType<ClientModule["CoreV1Api"]>;
  custom: InstanceType<ClientModule["CustomObjectsApi"]>;
  coordination: InstanceType<ClientModule["CoordinationV1Api"]>;
  rest: RestClient | undefined;
  calls: number;
}

export async function connectCluster(kubeconfig?: string, opts: KubeClientOptions = {}): Promise<Cluster> {
  const { k8s, kc } = await kubeClient(kubeconfig, opts);
  // The LISTs of many objects (pods, Services, nodes, their Leases) are read as plain JSON where the kubeconfig
  // allows (./rest.ts): client-node turns every page into typed models first (Date fields, a class per
  // nested object), which took longer than the LIST itself at a few thousand pods (bench/scale.ts). Where it
  // does not (an exec plugin, say), client-node reads them.
  const rest = await restClient(kubeconfig, opts).catch(() => undefined);
  const conn: ClusterConn = {
    k8s,
    core: kc.makeApiClient(k8s.CoreV1Api),
    custom: kc.makeApiClient(k8s.CustomObjectsApi),
    coordination: kc.makeApiClient(k8s.CoordinationV1Api),
    rest,
    calls: 0,
  };
  return {
    get calls() {
      return conn.calls;
    },
    ...clusterReads(conn),
    ...clusterWrites(conn),
  };
}

/** Every page of a LIST, each item passed through `shape` as it arrives; a call counted per page. */
async function paged(conn: ClusterConn, fetchPage: (cont: string | undefined) => Promise<Page>, shape: (item: object) => KubeObject): Promise<KubeObject[]> {
  const out: KubeObject[] = [];
  let cont: string | undefined;
  do {
    conn.calls++;
    const page = await fetchPage(cont);
    for (const item of page.items ?? []) out.push(shape(item));
    cont = page.metadata?._continue ?? page.metadata?.continue;
  } while (cont);
  return out;
}

// client-node returns typed objects with Date fields; the planner reads raw JSON, so round-trip to it.
const raw = (x: unknown): KubeObject => JSON.parse(JSON.stringify(x)) as KubeObject;

/** `fn`'s answer, or `absent` when the API is not served (404). */
async function unlessNotServed<T, A>(fn: () => Promise<T>, absent: A): Promise<T | A> {
  try {
    return await fn();
  } catch (err) {
    if (statusOf(err) === 404) return absent;
    throw err;
  }
}

/** Every object of a cluster-scoped LIST of a custom resource (or of one across namespaces). */
const customList =
  (conn: ClusterConn, group: string, version: string, plural: string, limit = PAGE_SIZE) =>
  async (cont: string | undefined): Promise<Page> =>
    (await conn.custom.listClusterCustomObject({ group, version, plural, limit, _continue: cont })) as Page;

function clusterReads(conn: ClusterConn): ClusterReader {
  const { core, custom, coordination, rest } = conn;
  const plainPage = (path: string, labelSelector?: string) => plainListPage(rest!, path, labelSelector);
  // Dynamic Resource Allocation (`resource.k8s.io/v1`): a cluster without the API has no DRA, not an error.
  const draList = (plural: string, shape: (o: object) => KubeObject): Promise<KubeObject[]> =>
    unlessNotServed(() => paged(conn, customList(conn, "resource.k8s.io", "v1", plural), (item) => shape(item)), []);
  return {
    listJobs: (kind, project = asKubeObject) =>
      unlessNotServed(() => paged(conn, customList(conn, kind.group, kind.version, kind.plural, JOB_PAGE_SIZE), project), undefined),
    async getJob(kind, namespace, name) {
      conn.calls++;
      return unlessNotServed(
        async () => (await custom.getNamespacedCustomObject({ group: kind.group, version: kind.version, plural: kind.plural, namespace, name })) as KubeObject,
        undefined,
      );
    },
    async listPods(labelSelector, whole) {
      const owners: SharedParts = new Map();
      return paged(
        conn,
        rest
          ? plainPage("/api/v1/pods", labelSelector)
          : async (cont) => await core.listPodForAllNamespaces({ labelSelector, limit: PAGE_SIZE, _continue: cont }),
        (p) => {
          whole?.(rest ? asKubeObject(p) : raw(p));
          return slimPod(p, owners);
        },
      );
    },
    async listServices(labelSelector) {
      return paged(
        conn,
        rest
          ? plainPage("/api/v1/services", labelSelector)
          : async (cont) => await core.listServiceForAllNamespaces({ labelSelector, limit: PAGE_SIZE, _continue: cont }),
        slimService,
      );
    },
    async listNamespaces() {
      const out: NamespaceInfo[] = [];
      let cont: string | undefined;
      do {
        conn.calls++;
        const page = (await core.listNamespace({ limit: PAGE_SIZE, _continue: cont })) as Page;
        for (const item of page.items ?? []) out.push(slimNamespace(item));
        cont = page.metadata?._continue ?? page.metadata?.continue;
      } while (cont);
      return out;
    },
    async listNodes(keepLabels) {
      return paged(conn, rest ? plainPage("/api/v1/nodes") : async (cont) => await core.listNode({ limit: PAGE_SIZE, _continue: cont }), (o) =>
        slimNode(o, keepLabels),
      );
    },
    async listNodeLeases() {
      return paged(
        conn,
        rest
          ? plainPage("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
          : async (cont) => await coordination.listNamespacedLease({ namespace: "kube-node-lease", limit: PAGE_SIZE, _continue: cont }),
        slimNodeLease,
      );
    },
    listResourceSlices: () => draList("resourceslices", slimResourceSlice),
    listResourceClaims: () => draList("resourceclaims", slimResourceClaim),
    listKueue: () => listKueue(conn),
    async listConfigMaps(namespace, labelSelector) {
      return paged(conn, async (cont) => await core.listNamespacedConfigMap({ namespace, labelSelector, limit: PAGE_SIZE, _continue: cont }), raw);
    },
  };
}

/** A node's Lease trimmed to its name and renewTime. */
function slimNodeLease(item: object): KubeObject {
  const l = asV1Lease(item);
  return { metadata: { name: l.metadata?.name }, spec: { ...(l.spec?.renewTime ? { renewTime: iso(l.spec.renewTime) } : {}) } };
}

/** Kueue's API: a 404 of the first list means Kueue is not installed (no section, no error). */
async function listKueue(conn: ClusterConn): Promise<KueueObjects | undefined> {
  const list = (plural: string) => paged(conn, customList(conn, KUEUE_GROUP, KUEUE_VERSION, plural), raw);
  return unlessNotServed(async () => {
    const [resourceFlavors, clusterQueues] = await Promise.all([list("resourceflavors"), list("clusterqueues")]);
    return { resourceFlavors, clusterQueues };
  }, undefined);
}

/** A merge patch of a job (or its status), 409 and 404 answered, not thrown. */
async function patchJob(
  conn: ClusterConn,
  status: boolean,
  target: { kind: JobKind; namespace: string; name: string },
  body: object,
): Promise<"patched" | "conflict" | "gone"> {
  conn.calls++;
  const { kind, namespace, name } = target;
  const mergePatch = conn.k8s.setHeaderOptions("Content-Type", conn.k8s.PatchStrategy.MergePatch);
  const request = { group: kind.group, version: kind.version, plural: kind.plural, namespace, name, body };
  try {
    if (status) await conn.custom.patchNamespacedCustomObjectStatus(request, mergePatch);
    else await conn.custom.patchNamespacedCustomObject(request, mergePatch);
    return "patched";
  } catch (err) {
    if (statusOf(err) === 409) return "conflict";
    if (statusOf(err) === 404) return "gone";
    throw err;
  }
}

/** A create answered "created", or "exists" on 409 (AlreadyExists counts as done). */
async function created(conn: ClusterConn, create: () => Promise<unknown>): Promise<"created" | "exists"> {
  conn.calls++;
  try {
    await create();
    return "created";
  } catch (err) {
    if (statusOf(err) === 409) return "exists";
    throw err;
  }
}

function clusterWrites(conn: ClusterConn): ClusterWriter & ClusterCreator & ClusterController {
  const { core } = conn;
  return {
    createService: (namespace, body) => created(conn, () => core.createNamespacedService({ namespace, body: body, fieldManager: RECONCILER_FIELD_MANAGER })),
    createPod: (namespace, body) => created(conn, () => core.createNamespacedPod({ namespace, body: body })),
    patchJobStatus: (kind, namespace, name, status, resourceVersion) =>
      patchJob(conn, true, { kind, namespace, name }, { ...(resourceVersion ? { metadata: { resourceVersion } } : {}), status }),
    patchJobAnnotations: (kind, namespace, name, annotations, resourceVersion) =>
      patchJob(conn, false, { kind, namespace, name }, { metadata: { ...(resourceVersion ? { resourceVersion } : {}), annotations } }),
    patch: (t, patch) => patchObject(conn, t, patch),
    putConfigMap: (namespace, body, resourceVersion) => putConfigMap(conn, namespace, body, resourceVersion),
    async createEvent(namespace, body) {
      conn.calls++;
      await core.createNamespacedEvent({ namespace, body: body as never });
    },
    delete: (t) => deleteObject(conn, t),
  };
}

async function patchObject(
  conn: ClusterConn,
  t: { kind: "Pod" | "Service"; namespace: string; name: string },
  patch: string,
): Promise<"patched" | "gone" | "invalid"> {
  conn.calls++;
  const { core } = conn;
  const strategicMerge = conn.k8s.setHeaderOptions("Content-Type", conn.k8s.PatchStrategy.StrategicMergePatch);
  const body = JSON.parse(patch) as object;
  try {
    // The field manager records in the pod's managedFields that the reconciler set its controller reference.
    const fieldManager = RECONCILER_FIELD_MANAGER;
    if (t.kind === "Pod") await core.patchNamespacedPod({ name: t.name, namespace: t.namespace, body, fieldManager }, strategicMerge);
    else await core.patchNamespacedService({ name: t.name, namespace: t.namespace, body, fieldManager }, strategicMerge);
    return "patched";
  } catch (err) {
    if (statusOf(err) === 404) return "gone";
    if (statusOf(err) === 422) return "invalid";
    throw err;
  }
}

async function putConfigMap(conn: ClusterConn, namespace: string, body: KubeObject, resourceVersion?: string): Promise<"written" | "conflict"> {
  conn.calls++;
  const { core } = conn;
  const name = String((body.metadata as { name?: string }).name);
  try {
    if (resourceVersion === undefined) await core.createNamespacedConfigMap({ namespace, body: body });
    else await core.replaceNamespacedConfigMap({ name, namespace, body: { ...body, metadata: { ...(body.metadata as object), resourceVersion } } });
    return "written";
  } catch (err) {
    if (statusOf(err) === 409) return "conflict";
    throw err;
  }
}

async function deleteObject(conn: ClusterConn, t: Parameters<ClusterWriter["delete"]>[0]): Promise<"deleted" | "gone" | "changed"> {
  conn.calls++;
  const { core, custom } = conn;
  const body = { preconditions: { uid: t.uid }, propagationPolicy: "Background" };
  try {
    if (t.kind === "Pod") await core.deleteNamespacedPod({ name: t.name, namespace: t.namespace, body });
    else if (t.kind === "Service") await core.deleteNamespacedService({ name: t.name, namespace: t.namespace, body });
    else if (t.kind === "ConfigMap") await core.deleteNamespacedConfigMap({ name: t.name, namespace: t.namespace, body });
    else {
      const k = t.jobKind!;
      await custom.deleteNamespacedCustomObject({ group: k.group, version: k.version, plural: k.plural, namespace: t.namespace, name: t.name, body });
    }
    return "deleted";
  } catch (err) {
    if (statusOf(err) === 404) return "gone";
    if (statusOf(err) === 409) return "changed";
    throw err;
  }
}
