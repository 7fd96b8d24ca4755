/**
 * @module
 * The GPU device ledger, pure: nodes, their Leases, pods and the previous ledger in; who holds which devices
 * where out. Modelled on the kubelet's device manager (github.com/kubernetes/kubernetes,
 * pkg/kubelet/cm/devicemanager/manager.go) but built from API objects:
 *
 * - Per node and device resource (the policy's GPU patterns): `capacity` and `allocatable` from the node's
 *   status, `allocated` = the effective requests of pods bound to the node whose phase is neither Succeeded
 *   nor Failed (keyed by pod uid: a recreated pod is a new holder), `free` = allocatable − allocated, never
 *   below 0, and 0 on a stale node.
 * - Flags: over-committed (allocated > allocatable); inactive resource (the node lists it with zero
 *   allocatable — the kubelet's mark of a device plugin gone — or pods hold it where the node no longer offers
 *   it); stale node, whose devices count as unavailable: its Lease in `kube-node-lease` not renewed within the
 *   grace period (`reconciler.leaseGracePeriodSeconds`), or, when it has no Lease (a kubelet without the
 *   NodeLease feature, or one not yet created), its Ready condition's `lastHeartbeatTime` older than the grace
 *   period (no Lease and no heartbeat at all: stale); GPU pods unscheduled longer than a threshold, with the
 *   scheduler's reason.
 * - Allocations per namespace and per job, and GPU-seconds accrued between passes: only for pods holding the
 *   resource in both passes (by uid), for the time between the two ledgers, at the current count. Totals
 *   carry over from the previous ledger, so they are cumulative.
 * - GPUs of Dynamic Resource Allocation (ResourceSlices and ResourceClaims, read in src/ledger/dra-usage.ts,
 *   whose module comment gives the rules) count under the resource name of their device class, next to the
 *   device plugin's: a resource entry (and its totals) carries `dra: {allocated, capacity}` when DRA devices
 *   are part of it, and only then, so a cluster without DRA gets the ledger it always had. Where a node lists
 *   the same resource in `status.allocatable`, capacity and allocatable are the larger of the two counts
 *   (never their sum: the same GPUs advertised both ways); allocated is the pods' container requests plus the
 *   claims' allocated devices (claims made for an extended-resource request counted by the request alone).
 *   A pod holding claims is charged for their devices like for its requests (holdings, usage, GPU-seconds).
 */
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { isGpuResource } from "../core/gpu.js";
import { labelSchemes, type LabelScheme } from "../kinds/index.js";
import type { Policy } from "../policy/types.js";
import { parseQuantity, toNumber } from "../core/quantity.js";
import { effectivePodGpus } from "../core/gpu.js";
import { pendingPodDraGpus, readDra, type DraLedger } from "./dra-usage.js";
import { kueueLedger, nodeLabelsOf, type KueueLedger, type KueueNode, type KueueObjects } from "./kueue-quota.js";

export const LEDGER_VERSION = 1;

// Every object below is built with its keys in sorted order, so `JSON.stringify` of a ledger is its canonical
// JSON (the shards' checksums are over those bytes; a test holds the builder to it). Arrays are sorted too.

/** The part of a resource's figures that Dynamic Resource Allocation gives (devices of ResourceSlices, allocated by ResourceClaims). */
export interface DraFigures {
  allocated: number;
  capacity: number;
}

export interface ResourceEntry {
  allocatable: number;
  allocated: number;
  capacity: number;
  /** Present when DRA devices are part of this resource on the node: how many of the figures are DRA's. */
  dra?: DraFigures;
  free: number;
  inactive: boolean;
  overCommitted: boolean;
}

export interface PodHolding {
  /** `<namespace>/<job name>` when the pod belongs to a training job. */
  job?: string;
  name: string;
  namespace: string;
  resources: Record<string, number>;
  uid: string;
}

export interface NodeEntry {
  /** A stale node's last Lease renewal (absent on a healthy node: it would change every pass). */
  leaseRenewTime?: string;
  /** The node object is gone but pods are still bound to it. */
  missing?: boolean;
  name: string;
  /** Pods holding devices on this node, sorted by uid. */
  pods: PodHolding[];
  resources: Record<string, ResourceEntry>;
  stale: boolean;
  /** Why the node is stale: "no Lease", or the age of its last renewal. */
  staleReason?: string;
}

export interface PendingGpuPod {
  createdAt: string;
  job?: string;
  message?: string;
  name: string;
  namespace: string;
  pendingSeconds: number;
  reason: string;
  resources: Record<string, number>;
  uid: string;
}

export interface Usage {
  allocated: number;
  gpuSeconds: number;
  /**
   * A job's usage only: the time `gpuSeconds` was accrued to, when later than the ledger's `generatedAt` is not
   * where it stands. The same pods have held `allocated` since, so at time t the job's total is
   * `gpuSeconds + allocated × (t − since)` ({@link gpuSecondsAt}). Kept while the job's holdings do not change,
   * so its shard's text does not either: a pass over a steady cluster rewrites no shard.
   */
  since?: string;
}

/** A usage's GPU-seconds at `at` (ISO time), accruing from its `since` when it has one. */
export function gpuSecondsAt(u: Usage, at: string): number {
  if (u.since === undefined) return u.gpuSeconds;
  const ms = Date.parse(at) - Date.parse(u.since);
  return Number.isFinite(ms) && ms > 0 ? u.gpuSeconds + (u.allocated * ms) / 1000 : u.gpuSeconds;
}

/** The ledger with every job's GPU-seconds brought to `generatedAt` (no `since`): what a reader shows. */
export function settledUsage(ledger: Ledger): Ledger {
  const jobs = Object.fromEntries(
    Object.entries(ledger.jobs).map(([k, per]) => [
      k,
      Object.fromEntries(Object.entries(per).map(([r, u]) => [r, { allocated: u.allocated, gpuSeconds: gpuSecondsAt(u, ledger.generatedAt) }])),
    ]),
  );
  return { ...ledger, jobs };
}

export interface ResourceTotals {
  allocatable: number;
  allocated: number;
  capacity: number;
  /** Present when DRA devices are part of this resource somewhere: the DRA part of the figures. */
  dra?: DraFigures;
  free: number;
  /** Allocatable on stale nodes: counted as unavailable. */
  unavailable: number;
}

/**
 * The most one node offers, for the webhooks (kept in the index, which they read): a pod asking for more of a
 * resource than any one node has can never be scheduled (rule `no-node-shape`), and a DRA request for `All`
 * devices of a class is counted as the largest node's devices of that class (src/core/dra.ts `DraCapacity`).
 */
export interface LargestNode {
  /** Per GPU resource, the largest allocatable of one node that is not stale. */
  resources: Record<string, number>;
  /** Per DeviceClass (named by its driver, as the policy's `gpu.deviceClasses` are), the most GPU devices one node's ResourceSlices publish. */
  deviceClasses: Record<string, number>;
}

export interface Ledger {
  generatedAt: string;
  jobs: Record<string, Record<string, Usage>>;
  /** Per Kueue ResourceFlavor (src/ledger/kueue-quota.ts); present only where Kueue's API is served. */
  kueue?: KueueLedger;
  /** Absent from ledgers written before it (and from a ledger read back without its index's). */
  largest?: LargestNode;
  namespaces: Record<string, Record<string, Usage>>;
  nodes: NodeEntry[];
  pending: PendingGpuPod[];
  totals: Record<string, ResourceTotals>;
  version: number;
}

export interface LedgerInput {
  nodes: readonly KubeObject[];
  /** Leases of `kube-node-lease`, named like their nodes. */
  nodeLeases: readonly KubeObject[];
  pods: readonly KubeObject[];
  /** `<namespace>/<name>` of the training jobs that exist now: job totals are kept while the job exists or holds devices. */
  jobs: ReadonlySet<string>;
  /** `<namespace>/<name>` of the TrainJobs that exist: their JobSet pods are charged to them (`jobset-name`). */
  trainJobs?: ReadonlySet<string>;
  /** ResourceSlices (`resource.k8s.io/v1`); absent or empty on a cluster without DRA. */
  resourceSlices?: readonly KubeObject[];
  /** ResourceClaims of the namespaces in scope; absent or empty on a cluster without DRA. */
  resourceClaims?: readonly KubeObject[];
  /** The ledger of the previous pass, if it could be read. */
  previous?: Ledger;
  /**
   * Kueue's ResourceFlavors and ClusterQueues, when its API is served (absent: no Kueue section). The nodes then
   * carry the labels the flavors' nodeLabels name.
   */
  kueue?: KueueObjects;
}

interface PodShape {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    ownerReferences?: Array<{ controller?: boolean; kind?: string; name?: string; uid?: string }>;
  };
  spec?: V1PodSpec;
  status?: { phase?: string; conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }> };
}

interface NodeShape {
  metadata?: { name?: string };
  status?: { capacity?: Record<string, string>; allocatable?: Record<string, string>; conditions?: Array<{ type?: string; lastHeartbeatTime?: string }> };
}

/**
 * Why the node is stale, or undefined when it is not (see the module comment). It names the time of the last
 * renewal or heartbeat, not an age: the reason stays the same pass after pass, and so does the node's shard.
 */
export function staleness(node: NodeShape, leaseRenewTime: string | undefined, hasLease: boolean, nowMs: number, graceSeconds: number): string | undefined {
  const graceMs = graceSeconds * 1000;
  const renewMs = leaseRenewTime ? Date.parse(leaseRenewTime) : NaN;
  if (hasLease && Number.isFinite(renewMs)) {
    return nowMs - renewMs > graceMs ? `Lease last renewed at ${leaseRenewTime} (grace ${graceSeconds}s)` : undefined;
  }
  const beat = node.status?.conditions?.find((c) => c?.type === "Ready")?.lastHeartbeatTime;
  const beatMs = typeof beat === "string" ? Date.parse(beat) : NaN;
  const lease = hasLease ? "Lease in kube-node-lease without a renewTime" : "no Lease in kube-node-lease";
  if (!Number.isFinite(beatMs)) return `${lease} and no Ready heartbeat`;
  return nowMs - beatMs > graceMs ? `${lease}; last Ready heartbeat at ${beat} (grace ${graceSeconds}s)` : undefined;
}

/** Whole devices of a node status map (`"8"`); unparsable values count as 0. */
function amount(v: string | undefined): number {
  const q = v === undefined ? undefined : parseQuantity(v);
  return q ? Math.max(0, Math.floor(toNumber(q))) : 0;
}

/**
 * The job a pod belongs to: its controller when that is a configured job kind, else the key label of a label
 * scheme of the kinds registry (Kubeflow's job-name, caffe2-operator's caffe2_job_key), else, for a scheme whose
 * pods are another controller's (JobSet's jobset-name), the job it names when that job exists.
 * `seen` remembers the key per controller uid: a job's pods share one string instead of building their own.
 */
function jobOf(pod: PodShape, ch: Pick<Charging, "jobKinds" | "jobKeys" | "trainJobs" | "schemes">): string | undefined {
  const kinds = ch.jobKinds;
  const seen = ch.jobKeys;
  const m = pod.metadata ?? {};
  const owner = m.ownerReferences?.find((r) => r.controller === true);
  if (owner?.name && owner.kind && kinds.has(owner.kind)) {
    const cacheKey = owner.uid ?? `${m.namespace}/${owner.name}`;
    let key = seen.get(cacheKey);
    if (key === undefined) seen.set(cacheKey, (key = `${m.namespace}/${owner.name}`));
    return key;
  }
  return m.labels ? jobOfLabels(m.labels, String(m.namespace), ch) : undefined;
}

/** The job a pod's labels name, by the label schemes (see {@link jobOf}). */
function jobOfLabels(labels: Record<string, string>, namespace: string, ch: Pick<Charging, "trainJobs" | "schemes">): string | undefined {
  // A claimed scheme's key label names the job (caffe2-operator's `caffe2_job_key: <namespace>-<name>`, read back).
  for (const s of ch.schemes) {
    const value = s.claimed ? labels[s.key.label] : undefined;
    const job = value ? (s.jobOfKey ? s.jobOfKey(namespace, value) : `${namespace}/${value}`) : undefined;
    if (job) return job;
  }
  // A JobSet's pod (its controller a batch Job): the TrainJob its `jobset-name` names, when that TrainJob exists
  // (the Trainer names the JobSet it owns after the TrainJob; a JobSet of no TrainJob is no training job's).
  if (!ch.trainJobs?.size) return undefined;
  for (const s of ch.schemes) {
    const value = s.claimed ? undefined : labels[s.key.label];
    if (value && ch.trainJobs.has(`${namespace}/${value}`)) return `${namespace}/${value}`;
  }
  return undefined;
}

function nonZero(m: Map<string, number>): Record<string, number> | undefined {
  if (m.size === 1) {
    for (const [k, v] of m) return v > 0 ? { [k]: v } : undefined;
  }
  const keys = [...m.keys()].filter((k) => m.get(k)! > 0).sort();
  if (keys.length === 0) return undefined;
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = m.get(k)!;
  return out;
}

const emptyResource = (capacity: number, allocatable: number): ResourceEntry => ({
  allocatable,
  allocated: 0,
  capacity,
  free: 0,
  inactive: false,
  overCommitted: false,
});

function addUsage(into: Map<string, Record<string, Usage>>, key: string, resource: string, allocated: number, seconds: number): void {
  let per = into.get(key);
  if (!per) into.set(key, (per = {}));
  const u = (per[resource] ??= { allocated: 0, gpuSeconds: 0 });
  u.allocated += allocated;
  u.gpuSeconds += seconds;
}

/** Object keys sorted, so the ledger (and its checksums) do not depend on the order objects were listed in. */
function sortedRecord<T>(r: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** How long ago the previous ledger was written, in seconds (0 without one): GPU-seconds accrue over it. */
function secondsSince(previous: Ledger | undefined, nowMs: number): number {
  const prevMs = previous ? Date.parse(previous.generatedAt) : NaN;
  return Number.isFinite(prevMs) && nowMs > prevMs ? (nowMs - prevMs) / 1000 : 0;
}

/** Each node Lease's last renewal, by node name (the key present with `undefined`: a Lease never renewed). */
function leaseRenewals(leases: LedgerInput["nodeLeases"]): Map<string, string | undefined> {
  const renewals = new Map<string, string | undefined>();
  for (const l of leases) {
    const name = (l.metadata as { name?: string } | undefined)?.name;
    if (name) renewals.set(name, (l.spec as { renewTime?: string } | undefined)?.renewTime);
  }
  return renewals;
}

/** A ledger entry per Node, with its GPU resources' capacity and allocatable and whether it is stale. */
function nodeEntries(input: LedgerInput, nowMs: number, policy: Policy, dra: DraLedger): Map<string, NodeEntry> {
  const renewals = leaseRenewals(input.nodeLeases);
  const nodes = new Map<string, NodeEntry>();
  for (const n of input.nodes as readonly NodeShape[]) {
    const name = n.metadata?.name;
    if (!name) continue;
    const renew = renewals.get(name);
    const staleReason = staleness(n, renew, renewals.has(name), nowMs, policy.reconciler.leaseGracePeriodSeconds);
    // The renewal is recorded only on a stale node, where it explains why: on a healthy one it moves every 10 s,
    // and would rewrite the node's shard every pass for nothing (a converged pass writes the index alone).
    const entry: NodeEntry = {
      ...(renew && staleReason ? { leaseRenewTime: renew } : {}),
      name,
      pods: [],
      resources: {},
      stale: staleReason !== undefined,
      ...(staleReason ? { staleReason } : {}),
    };
    const capacity = n.status?.capacity ?? {};
    const allocatable = n.status?.allocatable ?? {};
    for (const r of new Set([...Object.keys(capacity), ...Object.keys(allocatable)])) {
      if (isGpuResource(r, policy.gpu.resources)) entry.resources[r] = emptyResource(amount(capacity[r]), amount(allocatable[r]));
    }
    // DRA devices: the larger of the node's own count and the slices', never the sum (see the module comment).
    for (const [r, n] of dra.capacity.get(name) ?? []) {
      const e = (entry.resources[r] ??= emptyResource(0, 0));
      e.capacity = Math.max(e.capacity, n);
      e.allocatable = Math.max(e.allocatable, n);
      e.dra = { allocated: 0, capacity: n };
    }
    nodes.set(name, entry);
  }
  return nodes;
}

/** A GPU pod not yet on a node, listed once it has waited longer than `pendingGpuPodSeconds`. */
function pendingEntry(pod: PodShape, held: Record<string, number>, job: string | undefined, nowMs: number, policy: Policy): PendingGpuPod | undefined {
  const m = pod.metadata ?? {};
  const created = m.creationTimestamp ? Date.parse(m.creationTimestamp) : NaN;
  const seconds = Number.isFinite(created) ? Math.floor((nowMs - created) / 1000) : 0;
  if (seconds <= policy.reconciler.pendingGpuPodSeconds) return undefined;
  const cond = pod.status?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False");
  return {
    createdAt: m.creationTimestamp!,
    ...(job ? { job } : {}),
    ...(cond?.message ? { message: cond.message } : {}),
    name: m.name!,
    namespace: m.namespace!,
    pendingSeconds: seconds,
    reason: cond?.reason ?? "NotYetScheduled",
    resources: held,
    uid: m.uid!,
  };
}

/** What one pass over the pods adds up: per node, per namespace and per job, and the pods still pending. */
interface PodAccounts {
  nodes: Map<string, NodeEntry>;
  namespaces: Map<string, Record<string, Usage>>;
  jobs: Map<string, Record<string, Usage>>;
  pending: PendingGpuPod[];
  /** `<job>\0<resource>` of the jobs with a holder that did not hold the resource at the previous ledger. */
  newHolders: Set<string>;
}

/** What charging one pod needs, built once per ledger. */
interface Charging {
  acc: PodAccounts;
  policy: Policy;
  nowMs: number;
  /** Seconds since the previous ledger. */
  elapsed: number;
  /** The previous ledger's holdings by pod uid: a pod accrues GPU-seconds for what it already held then. */
  prevHoldings: Map<string, PodHolding>;
  jobKinds: ReadonlySet<string>;
  jobKeys: Map<string, string>;
  /** `<namespace>/<name>` of the TrainJobs that exist (the jobs of trainjob-shaped kinds), when any kind is. */
  trainJobs?: ReadonlySet<string>;
  /** The label schemes of the policy's kinds registry, in its order (Kubeflow's, caffe2-operator's, JobSet's, ...). */
  schemes: readonly LabelScheme[];
  dra: DraLedger;
}

/** Every running pod that holds GPUs, charged to its node, namespace and job (GPU-seconds since the last ledger). */
function accountPods(input: LedgerInput, acc: PodAccounts, nowMs: number, policy: Policy, dra: DraLedger): void {
  const prevHoldings = new Map<string, PodHolding>();
  for (const n of input.previous?.nodes ?? []) for (const h of n.pods) prevHoldings.set(h.uid, h);
  const ch: Charging = {
    acc,
    policy,
    nowMs,
    elapsed: secondsSince(input.previous, nowMs),
    prevHoldings,
    jobKinds: new Set(policy.jobKinds.map((k) => k.kind)),
    jobKeys: new Map(),
    schemes: labelSchemes(policy.kindShapes),
    ...(input.trainJobs ? { trainJobs: input.trainJobs } : {}),
    dra,
  };
  for (const pod of input.pods as readonly PodShape[]) chargePod(ch, pod);
}

/**
 * The pod's GPUs: its containers' requests, and the devices of its claims: allocated ones once bound (counted on
 * the node from the claims, see addDraAllocations), as written while pending.
 */
function podGpus(ch: Charging, pod: PodShape, uid: string, nodeName: string | undefined): { requested: Map<string, number>; all: Map<string, number> } {
  const requested = effectivePodGpus(pod.spec ?? ({} as V1PodSpec), ch.policy.gpu);
  let claimed: Map<string, number> | undefined;
  if (nodeName) claimed = ch.dra.byPod.get(uid);
  else if (ch.dra.claimSpecs.size > 0) claimed = pendingPodDraGpus(pod as KubeObject, ch.dra, ch.policy.gpu.deviceClasses);
  if (!claimed || claimed.size === 0) return { requested, all: requested };
  const all = new Map(requested);
  for (const [r, n] of claimed) all.set(r, (all.get(r) ?? 0) + n);
  return { requested, all };
}

function chargePod(ch: Charging, pod: PodShape): void {
  const m = pod.metadata ?? {};
  const phase = pod.status?.phase;
  if (!m.uid || !m.name || !m.namespace || phase === "Succeeded" || phase === "Failed") return;
  const nodeName = pod.spec?.nodeName;
  const { requested, all } = podGpus(ch, pod, m.uid, nodeName);
  const held = nonZero(all);
  if (!held) return;
  const job = jobOf(pod, ch);
  if (!nodeName) {
    const entry = pendingEntry(pod, held, job, ch.nowMs, ch.policy);
    if (entry) ch.acc.pending.push(entry);
    return;
  }
  let node = ch.acc.nodes.get(nodeName);
  if (!node)
    ch.acc.nodes.set(nodeName, (node = { missing: true, name: nodeName, pods: [], resources: {}, stale: true, staleReason: "the Node object does not exist" }));
  // Two literals rather than a spread: one shape each, and this line runs for every pod of the cluster.
  node.pods.push(
    job === undefined
      ? { name: m.name, namespace: m.namespace, resources: held, uid: m.uid }
      : { job, name: m.name, namespace: m.namespace, resources: held, uid: m.uid },
  );
  chargeHolding(ch, node, { namespace: m.namespace, uid: m.uid, job, held, requested });
}

/**
 * A bound pod's devices charged to its node, namespace and job: GPU-seconds for what it already held at the
 * previous ledger; a job's holder that did not hold as many then is noted (`newHolders`).
 */
function chargeHolding(
  ch: Charging,
  node: NodeEntry,
  pod: { namespace: string; uid: string; job: string | undefined; held: Record<string, number>; requested: ReadonlyMap<string, number> },
): void {
  const before = ch.prevHoldings.get(pod.uid);
  for (const r in pod.held) {
    const n = pod.held[r]!;
    const e = (node.resources[r] ??= emptyResource(0, 0));
    e.allocated += pod.requested.get(r) ?? 0;
    const seconds = before?.resources[r] ? ch.elapsed * n : 0;
    addUsage(ch.acc.namespaces, pod.namespace, r, n, seconds);
    if (!pod.job) continue;
    addUsage(ch.acc.jobs, pod.job, r, n, seconds);
    if (before?.resources[r] !== n) ch.acc.newHolders.add(`${pod.job}\0${r}`);
  }
}

/** The claims' allocated devices, on their nodes (a node the API no longer lists is added as missing). */
function addDraAllocations(nodes: Map<string, NodeEntry>, dra: DraLedger): void {
  for (const [nodeName, per] of dra.allocated) {
    let node = nodes.get(nodeName);
    if (!node)
      nodes.set(nodeName, (node = { missing: true, name: nodeName, pods: [], resources: {}, stale: true, staleReason: "the Node object does not exist" }));
    for (const [r, n] of per) {
      const e = (node.resources[r] ??= emptyResource(0, 0));
      e.allocated += n;
      e.dra = { allocated: (e.dra?.allocated ?? 0) + n, capacity: e.dra?.capacity ?? 0 };
    }
  }
}

/** Each node's resources settled (free, over-committed, inactive) and summed into the cluster's totals. */
function settleNodes(nodes: Iterable<NodeEntry>): Record<string, ResourceTotals> {
  const totals: Record<string, ResourceTotals> = {};
  for (const node of nodes) {
    for (const [r, e] of Object.entries(node.resources)) {
      e.overCommitted = e.allocated > e.allocatable;
      // Every entry is either listed by the node or held by its pods: zero allocatable means the kubelet marked
      // the resource gone (capacity 0 or unhealthy devices), or pods hold what the node does not offer.
      e.inactive = e.allocatable === 0;
      e.free = node.stale ? 0 : Math.max(0, e.allocatable - e.allocated);
      const t = (totals[r] ??= { allocatable: 0, allocated: 0, capacity: 0, free: 0, unavailable: 0 });
      t.capacity += e.capacity;
      t.allocatable += e.allocatable;
      if (node.stale) t.unavailable += e.allocatable;
      t.allocated += e.allocated;
      t.free += e.free;
      if (e.dra) {
        t.dra = { allocated: (t.dra?.allocated ?? 0) + e.dra.allocated, capacity: (t.dra?.capacity ?? 0) + e.dra.capacity };
        // Rebuilt with the keys in sorted order (canonical JSON).
        const { allocatable, allocated, capacity, dra, free, inactive, overCommitted } = e;
        node.resources[r] = { allocatable, allocated, capacity, dra, free, inactive, overCommitted };
      }
    }
    node.resources = sortedRecord(node.resources);
    node.pods.sort((a, b) => (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
  }
  for (const [r, t] of Object.entries(totals)) {
    if (!t.dra) continue;
    const { allocatable, allocated, capacity, dra, free, unavailable } = t;
    totals[r] = { allocatable, allocated, capacity, dra, free, unavailable };
  }
  return sortedRecord(totals);
}

/** The most one healthy node offers per GPU resource, and the most devices per DeviceClass ({@link LargestNode}). */
export function largestNode(nodes: Iterable<NodeEntry>, classCapacity: ReadonlyMap<string, number>): LargestNode {
  const resources: Record<string, number> = {};
  for (const node of nodes) {
    if (node.stale) continue;
    for (const [r, e] of Object.entries(node.resources)) resources[r] = Math.max(resources[r] ?? 0, Math.floor(e.allocatable));
  }
  return { deviceClasses: sortedRecord(Object.fromEntries(classCapacity)), resources: sortedRecord(resources) };
}

export function buildLedger(input: LedgerInput, now: Date, policy: Policy): Ledger {
  const nowMs = now.getTime();
  const previous = input.previous;
  const dra = readDra(input.resourceSlices ?? [], input.resourceClaims ?? [], input.pods, policy.gpu.deviceClasses);
  const acc: PodAccounts = { nodes: nodeEntries(input, nowMs, policy, dra), namespaces: new Map(), jobs: new Map(), pending: [], newHolders: new Set() };
  // A namespace's GPU-seconds carry over whether or not it still holds devices.
  for (const [ns, per] of Object.entries(previous?.namespaces ?? {}))
    for (const [r, u] of Object.entries(per)) addUsage(acc.namespaces, ns, r, 0, u.gpuSeconds);
  accountPods(input, acc, nowMs, policy, dra);
  addDraAllocations(acc.nodes, dra);
  // Job totals carry over while the job exists or still holds devices.
  for (const [key, per] of Object.entries(previous?.jobs ?? {})) {
    if (!input.jobs.has(key) && !acc.jobs.has(key)) continue;
    for (const [r, u] of Object.entries(per)) addUsage(acc.jobs, key, r, 0, gpuSecondsAt(u, previous!.generatedAt));
  }
  stampJobs(acc, previous, now.toISOString());
  const totals = settleNodes(acc.nodes.values());
  const largest = largestNode(acc.nodes.values(), dra.classCapacity);
  const kueue = input.kueue ? kueueLedger(input.kueue, kueueNodes(input.nodes, acc.nodes), policy.gpu.resources) : undefined;
  const usage = (m: Map<string, Record<string, Usage>>) => Object.fromEntries([...m.keys()].sort().map((k) => [k, sortedRecord(m.get(k)!)]));
  const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  return {
    generatedAt: now.toISOString(),
    jobs: usage(acc.jobs),
    ...(kueue ? { kueue } : {}),
    largest,
    namespaces: usage(acc.namespaces),
    nodes: [...acc.nodes.values()].sort(byName),
    pending: acc.pending.sort((a, b) => (a.namespace === b.namespace ? byName(a, b) : a.namespace < b.namespace ? -1 : 1)),
    totals,
    version: LEDGER_VERSION,
  };
}

/**
 * Every job usage with devices held gets its `since` ({@link Usage}): a job whose holders of a resource all held
 * it at the previous ledger, and as many (`allocated` unchanged), accrued exactly `allocated × elapsed` since, so
 * its previous entry is kept as it was (equal in value to the one just computed, and its shard's text unchanged);
 * any other is settled now (`since` = now). An entry holding nothing accrues nothing and needs no `since`.
 */
function stampJobs(acc: PodAccounts, previous: Ledger | undefined, now: string): void {
  for (const [key, per] of acc.jobs) {
    const before = previous?.jobs[key];
    for (const [r, u] of Object.entries(per)) {
      if (u.allocated === 0) continue;
      const b = before?.[r];
      const steady = b !== undefined && b.allocated === u.allocated && !acc.newHolders.has(`${key}\0${r}`);
      per[r] = steady
        ? { allocated: b.allocated, gpuSeconds: b.gpuSeconds, since: b.since ?? previous!.generatedAt }
        : { allocated: u.allocated, gpuSeconds: u.gpuSeconds, since: now };
    }
  }
}

/** The listed nodes with their labels and the ledger's figures, for the Kueue section (a node the API no longer lists has no labels: left out). */
function kueueNodes(nodes: readonly KubeObject[], entries: ReadonlyMap<string, NodeEntry>): KueueNode[] {
  return nodes.flatMap((n) => {
    const name = (n.metadata as { name?: string } | undefined)?.name;
    const e = name ? entries.get(name) : undefined;
    if (!name || !e) return [];
    const allocatable: Record<string, number> = {};
    const allocated: Record<string, number> = {};
    for (const [r, f] of Object.entries(e.resources)) {
      allocatable[r] = f.allocatable;
      allocated[r] = f.allocated;
    }
    return [{ name, labels: nodeLabelsOf(n), allocatable, allocated }];
  });
}

/** The cluster's GPUs of one resource in all, for the validating webhook's capacity check. */
export function totalAllocatable(ledger: Pick<Ledger, "totals">, resource: string): number | undefined {
  return ledger.totals[resource]?.allocatable;
}
