/**
 * @module
 * The device ledger per Kueue ResourceFlavor, pure (issue 33). Kueue (sigs.k8s.io/kueue v0.19.2, API
 * `kueue.x-k8s.io/v1beta2`) admits jobs against quotas it keeps per ResourceFlavor; nothing in Kueue relates
 * those quotas to the GPUs the flavor's nodes really have. For each flavor this puts side by side:
 *
 * - `quota`: the nominal quota of each GPU resource, summed over the ClusterQueues whose `spec.resourceGroups[]
 *   .flavors[]` name the flavor (kueue `apis/kueue/v1beta2/clusterqueue_types.go` FlavorQuotas), each
 *   ClusterQueue's own figures in `quotas` with its borrowing and lending limits; `borrowingLimit` is their
 *   sum over the ClusterQueues of a cohort, and `unlimitedBorrowing` says some ClusterQueue of a cohort has
 *   none (Kueue then lets it borrow whatever its cohort has unused);
 * - `physical`: allocatable GPUs on the nodes the flavor's `spec.nodeLabels` select (every label must match;
 *   a flavor without nodeLabels selects every node, as Kueue places its workloads anywhere), from the same
 *   node figures as the rest of the ledger;
 * - `inUse`: the ledger's allocated figure on those nodes (pods bound there, whoever admitted them);
 * - `kueueUsage` and `kueueReserved`: what Kueue itself counts for the flavor, ClusterQueue `status.flavorsUsage`
 *   (admitted workloads) and `status.flavorsReservation` (quota reserved, admission checks pending included),
 *   summed over the ClusterQueues.
 *
 * GPU resources are the policy's (`gpu.resources`, MIG resources included); a flavor's CPU or memory quota is
 * not part of the device ledger. A flavor a ClusterQueue names but that does not exist is listed `missing`
 * (Kueue keeps such a ClusterQueue inactive). Objects are read structurally: a field of the wrong shape counts
 * as absent, never throws.
 */
import { isObject } from "../core/object.js";
import type { KubeObject } from "../core/kube.js";
import { isGpuResource, type GpuPattern } from "../core/gpu.js";
import { parseQuantity, toNumber } from "../core/quantity.js";

/** One ClusterQueue's quota of one resource in one flavor. Keys in sorted order (canonical JSON). */
export interface KueueQuota {
  borrowingLimit?: number;
  clusterQueue: string;
  cohort?: string;
  lendingLimit?: number;
  nominalQuota: number;
}

export interface KueueFlavorResource {
  /** Sum of the borrowing limits of the ClusterQueues in a cohort (absent when none sets one). */
  borrowingLimit?: number;
  /** Allocated GPUs on the flavor's nodes (the ledger's figure). */
  inUse: number;
  /** Quota reserved by Kueue in this flavor (ClusterQueues' `status.flavorsReservation`). */
  kueueReserved: number;
  /** Quota used by admitted workloads (ClusterQueues' `status.flavorsUsage`). */
  kueueUsage: number;
  /** Allocatable GPUs on the nodes the flavor's nodeLabels select. */
  physical: number;
  /** Nominal quota summed over the ClusterQueues that list the flavor. */
  quota: number;
  quotas: KueueQuota[];
  /** Some ClusterQueue of a cohort sets no borrowing limit: it may borrow all its cohort has unused. */
  unlimitedBorrowing?: boolean;
}

export interface KueueFlavor {
  /** The ClusterQueues that list the flavor, sorted. */
  clusterQueues: string[];
  /** A ClusterQueue names the flavor but no ResourceFlavor of that name exists. */
  missing?: boolean;
  name: string;
  nodeLabels: Record<string, string>;
  /** How many nodes the nodeLabels select. */
  nodes: number;
  /** Per GPU resource (quota, nodes or usage name it). */
  resources: Record<string, KueueFlavorResource>;
}

/** The ledger's Kueue section: present only when Kueue's API is served. */
export interface KueueLedger {
  flavors: KueueFlavor[];
}

/** What the pass lists from Kueue. */
export interface KueueObjects {
  resourceFlavors: readonly KubeObject[];
  clusterQueues: readonly KubeObject[];
}

/** A node as the Kueue section reads it: its labels and its GPU figures by resource. */
export interface KueueNode {
  name: string;
  labels: Readonly<Record<string, string>>;
  allocatable: Readonly<Record<string, number>>;
  allocated: Readonly<Record<string, number>>;
}

type Obj = Record<string, unknown>;
const objOr = (v: unknown): Obj => (isObject(v) ? v : {});
const listOr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined);
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** A quantity (`"8"`, `8`, `"1k"`) as a number; undefined when absent or unparsable. */
function quantity(v: unknown): number | undefined {
  if (typeof v !== "string" && typeof v !== "number") return undefined;
  const q = parseQuantity(v);
  return q ? toNumber(q) : undefined;
}

/** A ResourceFlavor's name and `spec.nodeLabels` (string values only). */
export function flavorLabels(flavor: KubeObject): { name: string; nodeLabels: Record<string, string> } | undefined {
  const name = str(objOr(flavor.metadata).name);
  if (!name) return undefined;
  const labels = objOr(objOr(flavor.spec).nodeLabels);
  const nodeLabels: Record<string, string> = {};
  for (const k of Object.keys(labels).sort()) if (typeof labels[k] === "string") nodeLabels[k] = labels[k];
  return { name, nodeLabels };
}

/** The label keys every flavor's nodeLabels name: the only node labels the section needs (the pass keeps no others). */
export function flavorLabelKeys(flavors: readonly KubeObject[]): Set<string> {
  return new Set(flavors.flatMap((f) => Object.keys(flavorLabels(f)?.nodeLabels ?? {})));
}

/** One quota entry of a ClusterQueue's spec: flavor, resource and its figures. */
export interface ClusterQueueQuota extends KueueQuota {
  flavor: string;
  resource: string;
}

/** Every (flavor, resource) quota a ClusterQueue sets, over all its resource groups. */
export function clusterQueueQuotas(cq: KubeObject): ClusterQueueQuota[] {
  const name = str(objOr(cq.metadata).name);
  if (!name) return [];
  const spec = objOr(cq.spec);
  // `cohortName` in v1beta2; `cohort` in v1beta1 (read too, so an object served at either version is understood).
  const cohort = str(spec.cohortName) ?? str(spec.cohort);
  const out: ClusterQueueQuota[] = [];
  for (const group of listOr(spec.resourceGroups)) {
    for (const f of listOr(objOr(group).flavors)) {
      const flavor = str(objOr(f).name);
      if (!flavor) continue;
      for (const r of listOr(objOr(f).resources)) {
        const resource = str(objOr(r).name);
        if (!resource) continue;
        const borrowingLimit = quantity(objOr(r).borrowingLimit);
        const lendingLimit = quantity(objOr(r).lendingLimit);
        out.push({
          ...(borrowingLimit !== undefined ? { borrowingLimit } : {}),
          clusterQueue: name,
          ...(cohort ? { cohort } : {}),
          flavor,
          ...(lendingLimit !== undefined ? { lendingLimit } : {}),
          nominalQuota: quantity(objOr(r).nominalQuota) ?? 0,
          resource,
        });
      }
    }
  }
  return out;
}

/** Kueue's own count per flavor and resource, from a ClusterQueue's `status.<field>` (flavorsUsage or flavorsReservation). */
function statusTotals(cq: KubeObject, field: "flavorsUsage" | "flavorsReservation", into: Map<string, number>): void {
  for (const f of listOr(objOr(cq.status)[field])) {
    const flavor = str(objOr(f).name);
    if (!flavor) continue;
    for (const r of listOr(objOr(f).resources)) {
      const resource = str(objOr(r).name);
      const total = quantity(objOr(r).total);
      if (!resource || total === undefined) continue;
      const key = `${flavor}\0${resource}`;
      into.set(key, (into.get(key) ?? 0) + total);
    }
  }
}

/** Whether a node carries every label of `nodeLabels` with its value (no labels: every node). */
export function selectsNode(nodeLabels: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>>): boolean {
  for (const k in nodeLabels) if (labels[k] !== nodeLabels[k]) return false;
  return true;
}

const emptyResource = (): KueueFlavorResource => ({ inUse: 0, kueueReserved: 0, kueueUsage: 0, physical: 0, quota: 0, quotas: [] });

/** The flavors being built, by name; one a ClusterQueue names that does not exist is added as missing. */
class Flavors {
  readonly byName = new Map<string, KueueFlavor>();
  constructor(resourceFlavors: readonly KubeObject[]) {
    for (const f of resourceFlavors) {
      const read = flavorLabels(f);
      if (read) this.byName.set(read.name, { clusterQueues: [], name: read.name, nodeLabels: read.nodeLabels, nodes: 0, resources: {} });
    }
  }
  get(name: string): KueueFlavor {
    let f = this.byName.get(name);
    if (!f) this.byName.set(name, (f = { clusterQueues: [], missing: true, name, nodeLabels: {}, nodes: 0, resources: {} }));
    return f;
  }
  resource(flavor: string, resource: string): KueueFlavorResource {
    return (this.get(flavor).resources[resource] ??= emptyResource());
  }
}

/** A ClusterQueue's quotas of GPU resources, added to the flavors they name. */
function addQuotas(flavors: Flavors, cq: KubeObject, gpu: readonly GpuPattern[]): void {
  for (const q of clusterQueueQuotas(cq)) {
    const f = flavors.get(q.flavor);
    if (!f.clusterQueues.includes(q.clusterQueue)) f.clusterQueues.push(q.clusterQueue);
    if (!isGpuResource(q.resource, gpu)) continue;
    const r = flavors.resource(q.flavor, q.resource);
    const { flavor: _f, resource: _r, ...quota } = q;
    r.quotas.push(quota);
    r.quota += q.nominalQuota;
    if (q.cohort === undefined) continue;
    if (q.borrowingLimit === undefined) r.unlimitedBorrowing = true;
    else r.borrowingLimit = (r.borrowingLimit ?? 0) + q.borrowingLimit;
  }
}

/** The nodes a flavor's nodeLabels select: counted, their allocatable and allocated GPUs added. */
function addNodes(f: KueueFlavor, nodes: readonly KueueNode[]): void {
  for (const node of nodes) {
    if (!selectsNode(f.nodeLabels, node.labels)) continue;
    f.nodes++;
    for (const [resource, n] of Object.entries(node.allocatable)) if (n > 0 || f.resources[resource]) (f.resources[resource] ??= emptyResource()).physical += n;
    for (const [resource, n] of Object.entries(node.allocated)) if (n > 0) (f.resources[resource] ??= emptyResource()).inUse += n;
  }
}

/** The Kueue section of the ledger: per flavor, quota beside the GPUs of its nodes (see the module comment). */
export function kueueLedger(kueue: KueueObjects, nodes: readonly KueueNode[], gpu: readonly GpuPattern[]): KueueLedger {
  const flavors = new Flavors(kueue.resourceFlavors);
  const usage = new Map<string, number>();
  const reserved = new Map<string, number>();
  for (const cq of kueue.clusterQueues) {
    addQuotas(flavors, cq, gpu);
    statusTotals(cq, "flavorsUsage", usage);
    statusTotals(cq, "flavorsReservation", reserved);
  }
  for (const [totals, field] of [
    [usage, "kueueUsage"],
    [reserved, "kueueReserved"],
  ] as const) {
    for (const [key, n] of totals) {
      const [flavor, resource] = key.split("\0") as [string, string];
      if (isGpuResource(resource, gpu)) flavors.resource(flavor, resource)[field] = n;
    }
  }
  for (const f of flavors.byName.values()) if (!f.missing) addNodes(f, nodes);
  return { flavors: [...flavors.byName.values()].sort((a, b) => cmp(a.name, b.name)).map(canonicalFlavor) };
}

/** The flavor with its keys (and those of its resources) in sorted order, and its lists sorted. */
function canonicalFlavor(f: KueueFlavor): KueueFlavor {
  const resources: Record<string, KueueFlavorResource> = {};
  for (const name of Object.keys(f.resources).sort()) {
    const r = f.resources[name]!;
    resources[name] = {
      ...(r.borrowingLimit !== undefined ? { borrowingLimit: r.borrowingLimit } : {}),
      inUse: r.inUse,
      kueueReserved: r.kueueReserved,
      kueueUsage: r.kueueUsage,
      physical: r.physical,
      quota: r.quota,
      quotas: r.quotas.sort((a, b) => cmp(a.clusterQueue, b.clusterQueue)),
      ...(r.unlimitedBorrowing ? { unlimitedBorrowing: true } : {}),
    };
  }
  return {
    clusterQueues: f.clusterQueues.sort(),
    ...(f.missing ? { missing: true } : {}),
    name: f.name,
    nodeLabels: f.nodeLabels,
    nodes: f.nodes,
    resources,
  };
}

/** A node's labels (as listed; the pass keeps only the keys flavors name). */
export function nodeLabelsOf(node: KubeObject): Record<string, string> {
  const labels = objOr(objOr(node.metadata).labels);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(labels)) if (typeof v === "string") out[k] = v;
  return out;
}

/** Nodes as API objects (status.allocatable), for a reader without the ledger (doctor): nothing counted as in use. */
export function kueueNodesFromObjects(nodes: readonly KubeObject[], gpu: readonly GpuPattern[]): KueueNode[] {
  return nodes.flatMap((n) => {
    const name = str(objOr(n.metadata).name);
    if (!name) return [];
    const allocatable: Record<string, number> = {};
    for (const [r, v] of Object.entries(objOr(objOr(n.status).allocatable))) {
      if (!isGpuResource(r, gpu)) continue;
      const q = quantity(v);
      allocatable[r] = q === undefined ? 0 : Math.max(0, Math.floor(q));
    }
    return [{ name, labels: nodeLabelsOf(n), allocatable, allocated: {} }];
  });
}

/** A resource's figures as a table cell: `8`, `8 (+4 borrowable)`, `8 (+unlimited borrowing)`. */
export function describeQuota(r: Pick<KueueFlavorResource, "quota" | "borrowingLimit" | "unlimitedBorrowing">): string {
  if (r.unlimitedBorrowing) return `${r.quota} (+unlimited borrowing)`;
  return r.borrowingLimit ? `${r.quota} (+${r.borrowingLimit} borrowable)` : String(r.quota);
}
