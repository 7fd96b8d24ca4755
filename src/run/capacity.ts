/**
 * @module
 * The validating webhook's view of cluster GPU capacity: the device ledger's index ConfigMap, read in the
 * background every `intervalMs` (one small GET; the webhook's RBAC allows reading just that ConfigMap), never
 * on the admission path. Until a first good read, and whenever the index fails its checksum, there is no
 * capacity and the check is skipped with a warning (so too for an index of the wrong shape); a failed refresh
 * keeps the last good answer.
 */
import type { Logger } from "pino";
import { errorMessage } from "../core/errors.js";
import { LEDGER_INDEX_NAME } from "../ledger/names.js";
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
  // ./ledger-index.ts, imported when a first index is read (not at start: see its comment).
  let decide: typeof import("./ledger-index.js") | undefined;
  const refresh = async (): Promise<void> => {
    try {
      read ??= await connect();
      const data = await read(LEDGER_INDEX_NAME);
      if (data === undefined) {
        capacity = reading = undefined;
        return;
      }
      decide ??= await import("./ledger-index.js");
      const index = decide.indexOfData(data);
      if (!index)
        opts.log.warn(
          { configMap: `${opts.namespace}/${LEDGER_INDEX_NAME}` },
          "device ledger index fails its checksum or shape; capacity check skipped until the reconciler rewrites it",
        );
      capacity = index && decide.capacityOf(index, now);
      reading = index && { index, readAt: now() };
    } catch (err) {
      opts.log.warn({ err: errorMessage(err) }, "could not read the device ledger; keeping the last capacity");
    }
  };
  const timer = setInterval(() => void refresh(), opts.intervalMs);
  timer.unref();
  return {
    current: () => capacity,
    draCapacity: () => (reading && decide ? decide.draCapacityOf(reading.index, now) : undefined),
    reading: () => reading,
    refresh,
    stop: () => clearInterval(timer),
  };
}
