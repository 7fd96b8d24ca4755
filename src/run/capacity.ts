/**
 * @module
 * The validating webhook's view of cluster GPU capacity: the device ledger's index ConfigMap, read in the
 * background every `intervalMs` (one small GET; the webhook's RBAC allows reading just that ConfigMap), never
 * on the admission path. Until a first good read, and whenever the index fails its checksum, there is no
 * capacity and the check is skipped with a warning (so too for an index of the wrong shape); a failed refresh
 * keeps the last good answer.
 */
import type { Logger } from "pino";
import type { DraCapacity } from "../core/dra.js";
import { errorMessage } from "../core/errors.js";
import { CHECKSUM_KEY, INDEX_KEY, LEDGER_INDEX_NAME, readIndex, type LedgerIndex } from "../ledger/shards.js";
import type { LedgerReading } from "../reconcile/metrics.js";
import type { CapacitySource, ClusterCapacity } from "../validate/job.js";
import { kubeClient, statusOf } from "../kube/client.js";
import { restClient } from "../kube/rest.js";

export interface LedgerCapacity extends CapacitySource {
  /** Reads the index now; resolves when done (errors are logged, not thrown). */
  refresh(): Promise<void>;
  stop(): void;
  /** The index last read and when, for the ledger's metrics; undefined while there is no good one. */
  reading(): LedgerReading | undefined;
}

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

export function ledgerCapacity(opts: { kubeconfig?: string; namespace: string; intervalMs: number; log: Logger; now?: () => number }): LedgerCapacity {
  const now = opts.now ?? Date.now;
  let capacity: ClusterCapacity | undefined;
  let reading: LedgerReading | undefined;
  let read: ((name: string) => Promise<Record<string, string> | undefined>) | undefined;
  const connect = async (): Promise<(name: string) => Promise<Record<string, string> | undefined>> => {
    // A plain GET keeps client-node out of the webhook process (see rest.ts); client-node only for a
    // kubeconfig rest.ts does not cover.
    const rest = await restClient(opts.kubeconfig);
    if (rest) {
      return async (name: string) => {
        const cm = (await rest.get(`/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/configmaps/${encodeURIComponent(name)}`)) as
          { data?: Record<string, string> } | undefined;
        return cm === undefined ? undefined : (cm.data ?? {});
      };
    }
    const { k8s, kc } = await kubeClient(opts.kubeconfig);
    const core = kc.makeApiClient(k8s.CoreV1Api);
    return async (name: string) => {
      try {
        return (await core.readNamespacedConfigMap({ name, namespace: opts.namespace })).data ?? {};
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    };
  };
  const refresh = async (): Promise<void> => {
    try {
      read ??= await connect();
      const data = await read(LEDGER_INDEX_NAME);
      const index = data === undefined ? undefined : indexOfData(data);
      if (data !== undefined && !index)
        opts.log.warn(
          { configMap: `${opts.namespace}/${LEDGER_INDEX_NAME}` },
          "device ledger index fails its checksum or shape; capacity check skipped until the reconciler rewrites it",
        );
      capacity = index && capacityOf(index, now);
      reading = index && { index, readAt: now() };
    } catch (err) {
      opts.log.warn({ err: errorMessage(err) }, "could not read the device ledger; keeping the last capacity");
    }
  };
  const timer = setInterval(() => void refresh(), opts.intervalMs);
  timer.unref();
  return {
    current: () => capacity,
    draCapacity: () => (reading ? draCapacityOf(reading.index, now) : undefined),
    reading: () => reading,
    refresh,
    stop: () => clearInterval(timer),
  };
}
