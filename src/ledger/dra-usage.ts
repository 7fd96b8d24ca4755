/**
 * @module
 * GPUs of Dynamic Resource Allocation (`resource.k8s.io/v1`) for the device ledger, pure: ResourceSlices and
 * ResourceClaims in, devices per node and per pod out, named as the extended resources they stand for
 * (src/core/dra.ts), so the ledger shows DRA and device-plugin GPUs under one resource name, side by side.
 *
 * Capacity, from ResourceSlices:
 * - Only node-local pools count (`spec.nodeName` set); of each pool (driver + `spec.pool.name`) only the slices
 *   of its newest `spec.pool.generation` count: older ones are being replaced by the driver.
 * - A device of driver D counts as the policy device class named D (`gpu.deviceClasses`), under its
 *   `resourceName`. Where that resourceName holds `{profile}`, it counts as the partition resource of the
 *   device's string attribute `profile` (`any` without one). Where it does not, but the device has a string
 *   attribute `profile` and a `{profile}` class of the same vendor exists (the class name after its first
 *   label: `gpu.nvidia.com` and `mig.nvidia.com` are both `nvidia.com`), it counts as that class's partition
 *   resource: NVIDIA's driver publishes its MIG devices under driver `gpu.nvidia.com` with a `profile`.
 *   A driver that is no GPU class publishes no GPUs.
 * - No double counting: a node whose `status.allocatable` lists the same resource name keeps the larger of the
 *   two counts (a device plugin and a DRA driver advertising the same GPUs), never their sum (src/ledger/compute.ts).
 *
 * Allocation, from ResourceClaims:
 * - Each device of `status.allocation.devices.results` (`{driver, pool, device}`) whose device is a GPU counts
 *   once, on the node of its pool's slice (or, for a device no slice lists any more, the node named by
 *   `status.allocation.nodeSelector`), under the resource its slice gives it (without a slice: its driver's
 *   class, partitions as `any`). Allocated devices count whether or not a pod holds them yet: the scheduler
 *   sees them as taken.
 * - The pods holding a claim are those of `status.reservedFor` (`resource: pods`, by uid); a claim shared by
 *   several pods is charged (holdings, namespace and job usage, GPU-seconds) to the first of them by uid only,
 *   so usage sums to the devices allocated.
 * - Claims the scheduler made for an extended-resource request (named by a pod's
 *   `status.extendedResourceClaimStatus.resourceClaimName`, or annotated
 *   `resource.kubernetes.io/extended-resource-claim`) are left out: the pod's container request counts them.
 * - A pending pod's claims (by `spec.resourceClaims`, a template's generated claim through
 *   `status.resourceClaimStatuses`) count their GPU requests as written (src/core/dra.ts), `All` as the largest
 *   node's devices of the class.
 */
import { isObject } from "../core/object.js";
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../core/kube.js";
import { claimGpuRequests, claimReferences, extendedResourceClaimNames, type ClaimSpec, type GpuDeviceClass } from "../core/dra.js";

const listOf = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const text = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);

/** The annotation the scheduler puts on a claim it made for an extended-resource request. */
export const EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim";

/** What the ledger needs of the cluster's DRA objects. */
export interface DraLedger {
  /** Devices per node and resource, from the newest generation of node-local pools. */
  capacity: Map<string, Map<string, number>>;
  /** Devices allocated per node and resource, every claim counted once. */
  allocated: Map<string, Map<string, number>>;
  /** Devices charged to each pod (by uid), per resource. */
  byPod: Map<string, Map<string, number>>;
  /** The largest number of devices one node offers per device class (for `All` requests of pending pods). */
  classCapacity: Map<string, number>;
  /** Claims by `<namespace>/<name>`: their spec, for pending pods. */
  claimSpecs: Map<string, ClaimSpec | undefined>;
  /** Claims made for extended-resource requests, `<namespace>/<name>`. */
  extendedClaims: Set<string>;
}

/** The vendor of a device class or driver name: the name after its first label (`gpu.nvidia.com` → `nvidia.com`). */
const vendorOf = (name: string): string => name.slice(name.indexOf(".") + 1);

/** A device's string attribute `profile` (bare, or qualified by a domain: `<domain>/profile`). */
function profileOf(device: Record<string, unknown>): string | undefined {
  const attrs = isObject(device.attributes) ? device.attributes : {};
  for (const [k, v] of Object.entries(attrs)) {
    if ((k === "profile" || k.endsWith("/profile")) && isObject(v) && text(v.string)) return text(v.string);
  }
  return undefined;
}

/** The resource name a device of `driver` counts as (see the module comment), or undefined when it is no GPU. */
export function deviceResource(driver: string, profile: string | undefined, classes: readonly GpuDeviceClass[]): string | undefined {
  const cls = classes.find((c) => c.name === driver);
  if (!cls) return undefined;
  if (cls.resourceName.includes("{profile}")) return cls.resourceName.replace("{profile}", profile ?? "any");
  if (profile !== undefined) {
    const vendor = vendorOf(driver);
    const partitioned = classes.find((c) => c.resourceName.includes("{profile}") && vendorOf(c.name) === vendor);
    if (partitioned) return partitioned.resourceName.replace("{profile}", profile);
  }
  return cls.resourceName;
}

function bump<K>(m: Map<K, Map<string, number>>, key: K, resource: string, n: number): void {
  let per = m.get(key);
  if (!per) m.set(key, (per = new Map<string, number>()));
  per.set(resource, (per.get(resource) ?? 0) + n);
}

/** The node an allocation's `nodeSelector` names: `metadata.name` (matchFields) or `kubernetes.io/hostname`, one value. */
function selectedNode(selector: unknown): string | undefined {
  for (const term of listOf(isObject(selector) ? selector.nodeSelectorTerms : undefined)) {
    if (!isObject(term)) continue;
    for (const [list, key] of [
      [term.matchFields, "metadata.name"],
      [term.matchExpressions, "kubernetes.io/hostname"],
    ] as const) {
      for (const r of listOf(list)) {
        if (isObject(r) && r.key === key && r.operator === "In" && listOf(r.values).length === 1) return text(listOf(r.values)[0]);
      }
    }
  }
  return undefined;
}

interface Slice {
  driver: string;
  pool: string;
  generation: number;
  node: string;
  devices: Record<string, unknown>[];
}

function readSlice(o: KubeObject): Slice | undefined {
  const spec = isObject(o.spec) ? o.spec : {};
  const pool = isObject(spec.pool) ? spec.pool : {};
  const driver = text(spec.driver);
  const name = text(pool.name);
  const node = text(spec.nodeName);
  if (!driver || !name || !node) return undefined;
  const generation = typeof pool.generation === "number" && Number.isFinite(pool.generation) ? pool.generation : 0;
  return { driver, pool: name, generation, node, devices: listOf(spec.devices).filter(isObject) };
}

/** Where each device of the newest node-local pools is, and what it counts as. */
interface DeviceIndex {
  devices: Map<string, { node: string; resource: string | undefined }>;
  poolNode: Map<string, string>;
}

const poolKey = (driver: string, pool: string): string => `${driver}\u0000${pool}`;

/** Capacity per node and per class from the newest generation of each node-local pool, and the device index. */
function readSlices(slices: readonly KubeObject[], classes: readonly GpuDeviceClass[], out: DraLedger): DeviceIndex {
  const read = slices.map(readSlice).filter((s): s is Slice => s !== undefined);
  const newest = new Map<string, number>();
  for (const s of read) {
    const key = poolKey(s.driver, s.pool);
    if (s.generation > (newest.get(key) ?? -Infinity)) newest.set(key, s.generation);
  }
  const index: DeviceIndex = { devices: new Map(), poolNode: new Map() };
  const perClass = new Map<string, Map<string, number>>();
  for (const s of read) {
    const key = poolKey(s.driver, s.pool);
    if (s.generation !== newest.get(key)) continue;
    index.poolNode.set(key, s.node);
    for (const d of s.devices) {
      const name = text(d.name);
      if (!name) continue;
      const resource = deviceResource(s.driver, profileOf(d), classes);
      index.devices.set(`${key}\u0000${name}`, { node: s.node, resource });
      if (resource === undefined) continue;
      bump(out.capacity, s.node, resource, 1);
      bump(perClass, s.driver, s.node, 1);
    }
  }
  for (const [cls, perNode] of perClass) out.classCapacity.set(cls, Math.max(...perNode.values()));
  return index;
}

/** The GPU devices a claim's allocation holds, per resource, each counted on its node into `out.allocated`. */
function allocatedDevices(allocation: Record<string, unknown>, index: DeviceIndex, classes: readonly GpuDeviceClass[], out: DraLedger): Map<string, number> {
  const held = new Map<string, number>();
  const results = listOf(isObject(allocation.devices) ? allocation.devices.results : undefined).filter(isObject);
  const fallbackNode = selectedNode(allocation.nodeSelector);
  for (const r of results) {
    const driver = text(r.driver);
    const pool = text(r.pool);
    const device = text(r.device);
    if (!driver || !pool || !device) continue;
    const known = index.devices.get(`${poolKey(driver, pool)}\u0000${device}`);
    const resource = known ? known.resource : deviceResource(driver, undefined, classes);
    const node = known?.node ?? index.poolNode.get(poolKey(driver, pool)) ?? fallbackNode;
    if (resource === undefined || node === undefined) continue;
    bump(out.allocated, node, resource, 1);
    held.set(resource, (held.get(resource) ?? 0) + 1);
  }
  return held;
}

/** The uids of the pods a claim is reserved for, sorted. */
function reservedPods(status: Record<string, unknown>): string[] {
  return listOf(status.reservedFor)
    .filter(isObject)
    .filter((r) => r.resource === "pods" && (r.apiGroup === undefined || r.apiGroup === "") && text(r.uid))
    .map((r) => String(r.uid))
    .sort();
}

/** DRA's devices, allocations and holders, read from the listed ResourceSlices, ResourceClaims and pods. */
export function readDra(
  slices: readonly KubeObject[],
  claims: readonly KubeObject[],
  pods: readonly KubeObject[],
  classes: readonly GpuDeviceClass[],
): DraLedger {
  const out: DraLedger = {
    capacity: new Map(),
    allocated: new Map(),
    byPod: new Map(),
    classCapacity: new Map(),
    claimSpecs: new Map(),
    extendedClaims: new Set(),
  };
  if (slices.length === 0 && claims.length === 0) return out;
  const index = readSlices(slices, classes, out);
  // Claims made for extended-resource requests, named by their pods.
  for (const p of pods) {
    const m = (p.metadata ?? {}) as { namespace?: string };
    for (const c of extendedResourceClaimNames(p.status)) out.extendedClaims.add(`${m.namespace}/${c}`);
  }
  for (const c of claims) {
    const m = (c.metadata ?? {}) as { name?: string; namespace?: string; annotations?: Record<string, string> };
    const key = `${m.namespace}/${m.name}`;
    if (m.annotations?.[EXTENDED_RESOURCE_CLAIM_ANNOTATION] === "true") out.extendedClaims.add(key);
    out.claimSpecs.set(key, isObject(c.spec) ? c.spec : undefined);
    const status = isObject(c.status) ? c.status : {};
    if (out.extendedClaims.has(key) || !isObject(status.allocation)) continue;
    const held = allocatedDevices(status.allocation, index, classes, out);
    const holder = reservedPods(status)[0];
    if (holder !== undefined) for (const [resource, n] of held) bump(out.byPod, holder, resource, n);
  }
  return out;
}

/** The GPUs a pod not yet on a node asks for through its claims (as written), per resource; extended-resource claims left out. */
export function pendingPodDraGpus(pod: KubeObject, dra: DraLedger, classes: readonly GpuDeviceClass[]): Map<string, number> {
  const out = new Map<string, number>();
  const m = (pod.metadata ?? {}) as { namespace?: string };
  const statuses = new Map<string, string>();
  const status = isObject(pod.status) ? pod.status : {};
  for (const s of listOf(status.resourceClaimStatuses)) {
    if (isObject(s) && text(s.name) && text(s.resourceClaimName)) statuses.set(String(s.name), String(s.resourceClaimName));
  }
  for (const ref of claimReferences(pod.spec as V1PodSpec | undefined)) {
    const name = ref.claim ?? statuses.get(ref.name);
    if (name === undefined) continue;
    const key = `${m.namespace}/${name}`;
    if (dra.extendedClaims.has(key) || !dra.claimSpecs.has(key)) continue;
    for (const g of claimGpuRequests(dra.claimSpecs.get(key), classes, dra.classCapacity)) {
      out.set(g.resourceName, (out.get(g.resourceName) ?? 0) + (g.count ?? 0));
    }
  }
  return out;
}
