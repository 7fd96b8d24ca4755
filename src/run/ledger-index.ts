/**
 * @module
 * What the device ledger's index gives the validating webhook, pure: the index in a ConfigMap's data (checksum and
 * shape checked, src/ledger/shards.ts), the cluster's capacity and the per-node shapes while the index is fresh.
 * Loaded by the reader (./capacity.ts) when a first index arrives, not when `serve` starts: the index's validator
 * and the ledger's model are ~100 KB of code a start would otherwise compile (~12 ms; bench/cold-start.ts).
 */
import type { DraCapacity } from "../core/dra.js";
import { CHECKSUM_KEY, INDEX_KEY, readIndex, type LedgerIndex } from "../ledger/shards.js";
import type { ClusterCapacity } from "../validate/job.js";

/** The index in a ledger index ConfigMap's data; undefined for a missing or corrupt one. */
export function indexOfData(data: Record<string, string> | undefined): LedgerIndex | undefined {
  const text = data?.[INDEX_KEY];
  if (text === undefined) return undefined;
  const read = readIndex({ text, sha256: data?.[CHECKSUM_KEY] });
  return "why" in read ? undefined : read.index;
}

/**
 * How old the ledger may be for what one node offers to be trusted: three of the reconciler's default passes
 * (every 5 minutes, manifests/base/reconciler.yaml). An older index still gives totals (the `capacity` rule, which
 * only refuses what the whole cluster could never hold), but its node shapes are not used: `no-node-shape` is
 * skipped (fail open) and a DRA request for `All` devices is unknown again (src/core/dra.ts).
 */
export const NODE_SHAPES_MAX_AGE_MS = 15 * 60_000;

/** Whether the index's node shapes can be trusted at `nowMs`. */
function shapesFresh(index: LedgerIndex, nowMs: number): boolean {
  const at = Date.parse(index.generatedAt);
  return index.largest !== undefined && Number.isFinite(at) && nowMs - at <= NODE_SHAPES_MAX_AGE_MS && at - nowMs <= NODE_SHAPES_MAX_AGE_MS;
}

/** The capacity an index gives: allocatable per resource over all nodes, and per node while the index is fresh. */
export function capacityOf(index: LedgerIndex, now: () => number = Date.now): ClusterCapacity {
  return {
    total: (resource) => index.totals[resource]?.allocatable,
    largestNode: (resource) => (shapesFresh(index, now()) ? (index.largest?.resources[resource] ?? 0) : undefined),
  };
}

/**
 * The most devices one node publishes per DeviceClass, while the index is fresh; undefined otherwise. One map per
 * index: the rules keep what they read of a claim per capacity object (`claimGpuRequests`, src/core/dra.ts), so a new
 * map per review would have them read every claim again.
 */
export function draCapacityOf(index: LedgerIndex, now: () => number = Date.now): DraCapacity | undefined {
  if (!shapesFresh(index, now())) return undefined;
  let map = draCapacities.get(index);
  if (!map) draCapacities.set(index, (map = new Map(Object.entries(index.largest?.deviceClasses ?? {}))));
  return map;
}

const draCapacities = new WeakMap<LedgerIndex, DraCapacity>();

/** The capacity an index ConfigMap's data gives. Undefined for a corrupt index. */
export function capacityOfIndex(data: Record<string, string> | undefined, now: () => number = Date.now): ClusterCapacity | undefined {
  const index = indexOfData(data);
  return index && capacityOf(index, now);
}
