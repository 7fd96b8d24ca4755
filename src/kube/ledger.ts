/**
 * @module
 * The device ledger's ConfigMaps in Quartermaster's namespace: read them (the reconciler, `quartermaster
 * ledger`, the webhook's capacity check, `doctor`) and write a pass's changes with resourceVersion
 * preconditions. The layout and checksums are decided in `src/ledger/shards.ts`.
 */
import type { KubeObject } from "../core/kube.js";
import {
  CHECKSUM_KEY,
  INDEX_KEY,
  LEDGER_INDEX_NAME,
  SHARD_KEY,
  isLedgerConfigMapName,
  readStored,
  type LedgerWrite,
  type ReadLedger,
  type StoredConfigMap,
} from "../ledger/shards.js";
import type { KubeClientOptions } from "./client.js";
import type { ClusterReader, ClusterWriter } from "./cluster.js";

export const LEDGER_LABEL = "quartermaster.dev/ledger";

export function toStored(cm: KubeObject): StoredConfigMap {
  const m = (cm.metadata ?? {}) as { name?: string; uid?: string; resourceVersion?: string };
  const data = (cm as { data?: Record<string, string> }).data ?? {};
  const text = m.name === LEDGER_INDEX_NAME ? data[INDEX_KEY] : data[SHARD_KEY];
  return {
    name: String(m.name),
    uid: String(m.uid),
    resourceVersion: String(m.resourceVersion),
    ...(text !== undefined ? { text } : {}),
    ...(data[CHECKSUM_KEY] ? { sha256: data[CHECKSUM_KEY] } : {}),
  };
}

/**
 * The ledger's ConfigMaps (index and shards), by name. A ConfigMap that carries the label under another name
 * is not the ledger's: it is left out, so a pass never rewrites or deletes it (RBAC would refuse anyway).
 */
export async function readLedgerConfigMaps(cluster: Pick<ClusterReader, "listConfigMaps">, namespace: string): Promise<Map<string, StoredConfigMap>> {
  const out = new Map<string, StoredConfigMap>();
  for (const cm of await cluster.listConfigMaps(namespace, LEDGER_LABEL)) {
    const s = toStored(cm);
    if (!isLedgerConfigMapName(s.name)) continue;
    out.set(s.name, s);
  }
  return out;
}

/** The ledger as stored in `namespace`, checksums verified (for `quartermaster ledger` and `doctor`). */
export async function readClusterLedger(kubeconfig: string | undefined, namespace: string, opts: KubeClientOptions = {}): Promise<ReadLedger> {
  const { connectCluster } = await import("./cluster.js");
  return readStored(await readLedgerConfigMaps(await connectCluster(kubeconfig, opts), namespace));
}

export interface LedgerWriteReport {
  written: string[];
  deleted: string[];
  failed: Array<{ name: string; error: string }>;
}

/**
 * Applies the writes in order. The index goes after the shards and only when every shard was written, so a
 * reader never sees an index naming shards that are not there; surplus shards go after the index.
 */
export async function applyLedgerWrites(
  cluster: Pick<ClusterWriter, "putConfigMap" | "delete">,
  namespace: string,
  writes: readonly LedgerWrite[],
): Promise<LedgerWriteReport> {
  const report: LedgerWriteReport = { written: [], deleted: [], failed: [] };
  for (const w of writes) {
    if (w.verb === "delete") {
      if (report.failed.length > 0) break;
      try {
        await cluster.delete({ kind: "ConfigMap", namespace, name: w.name, uid: w.uid });
        report.deleted.push(w.name);
      } catch (err) {
        report.failed.push({ name: w.name, error: err instanceof Error ? err.message : String(err) });
      }
      continue;
    }
    if (w.name === LEDGER_INDEX_NAME && report.failed.length > 0) {
      report.failed.push({ name: w.name, error: "not written: a shard write failed, the next pass rewrites the ledger" });
      break;
    }
    const body: KubeObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: w.name,
        namespace,
        labels: { [LEDGER_LABEL]: "true", "app.kubernetes.io/part-of": "quartermaster", "app.kubernetes.io/component": "ledger" },
      },
      data: { [w.key]: w.text, [CHECKSUM_KEY]: w.sha256 },
    };
    try {
      const r = await cluster.putConfigMap(namespace, body, w.verb === "replace" ? w.resourceVersion : undefined);
      if (r === "conflict") report.failed.push({ name: w.name, error: "changed since it was read (another writer): the next pass rewrites it" });
      else report.written.push(w.name);
    } catch (err) {
      report.failed.push({ name: w.name, error: err instanceof Error ? err.message : String(err) });
    }
  }
  return report;
}
