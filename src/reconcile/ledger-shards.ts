/**
 * @module
 * How the device ledger is laid out in ConfigMaps, pure: one index (totals, namespaces, the shard list with
 * each shard's checksum) and N shards holding the nodes, the pending GPU pods and the per-job usage.
 *
 * - Items go to shard `fnv1a(key) mod N` (node name, `namespace/name` of a pending pod, job key), N a power of
 *   two chosen so every shard stays under the byte budget (ConfigMaps stop at 1 MiB): adding a node moves no
 *   other node, so a pass rewrites only the shards whose content changed.
 * - Each shard and the index carry the SHA-256 of their canonical JSON (keys sorted at every level). A shard
 *   whose text does not match its checksum, or whose checksum is not the one the index recorded (a pass killed
 *   between writing shards and the index), is corrupt: the ledger is rebuilt from cluster state, and the
 *   GPU-seconds of the jobs in that shard start again from zero, said in a warning.
 */
import { createHash } from "node:crypto";
import { LEDGER_VERSION, type Ledger, type NodeEntry, type PendingGpuPod, type ResourceTotals, type Usage } from "./ledger.js";

export const LEDGER_INDEX_NAME = "quartermaster-ledger";
export const shardName = (i: number): string => `${LEDGER_INDEX_NAME}-${i}`;
/** Keys of the ConfigMaps' `data`. */
export const INDEX_KEY = "index.json";
export const SHARD_KEY = "shard.json";
export const CHECKSUM_KEY = "sha256";
const MAX_SHARDS = 4096;

export interface LedgerIndex {
  version: number;
  generatedAt: string;
  shards: Array<{ name: string; sha256: string }>;
  totals: Record<string, ResourceTotals>;
  namespaces: Record<string, Record<string, Usage>>;
  counts: { nodes: number; staleNodes: number; podsHoldingDevices: number; pendingGpuPods: number; jobs: number };
}

/** A shard has no timestamp of its own, so one whose content did not change keeps its bytes and is not rewritten. */
export interface LedgerShard {
  version: number;
  shard: number;
  of: number;
  nodes: NodeEntry[];
  pending: PendingGpuPod[];
  jobs: Record<string, Record<string, Usage>>;
}

/** A ConfigMap's worth: the text stored and its checksum. */
export interface StoredText {
  name: string;
  text: string;
  sha256: string;
}

/**
 * JSON with object keys sorted at every level, so equal ledgers have equal bytes and checksums. Hand-written:
 * the ledger holds only strings, finite numbers, booleans, arrays and plain objects, for which this is the
 * whole of RFC 8785 that matters, and it avoids a dependency on the hot path of every pass.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

type Item = { key: string; size: number } & ({ node: NodeEntry } | { pending: PendingGpuPod } | { job: [string, Record<string, Usage>] });

function stored(name: string, value: unknown): StoredText {
  const text = canonicalJson(value);
  return { name, text, sha256: sha256(text) };
}

/** Splits a ledger into its index and shards, every shard's text within `budget` bytes where possible. */
export function shardLedger(ledger: Ledger, budget: number): { index: StoredText; shards: StoredText[] } {
  const items: Item[] = [
    ...ledger.nodes.map((node) => ({ key: `node/${node.name}`, size: canonicalJson(node).length + 1, node })),
    ...ledger.pending.map((pending) => ({ key: `pending/${pending.namespace}/${pending.name}`, size: canonicalJson(pending).length + 1, pending })),
    ...Object.entries(ledger.jobs).map((job) => ({ key: `job/${job[0]}`, size: canonicalJson(job).length + 1, job })),
  ];
  const overhead = 256;
  const total = items.reduce((n, i) => n + i.size, 0);
  // Aim at 60 % of the budget so hashing's unevenness rarely forces a second try.
  let count = 1;
  while (count < MAX_SHARDS && total / count > (budget - overhead) * 0.6) count *= 2;
  for (;;) {
    const buckets = Array.from({ length: count }, () => ({ size: overhead, items: [] as Item[] }));
    for (const item of items) {
      const b = buckets[fnv1a(item.key) & (count - 1)]!;
      b.size += item.size;
      b.items.push(item);
    }
    if (count < MAX_SHARDS && buckets.some((b) => b.size > budget)) {
      count *= 2;
      continue;
    }
    const shards = buckets.map((b, i) => {
      const shard: LedgerShard = {
        version: LEDGER_VERSION,
        shard: i,
        of: count,
        nodes: b.items.flatMap((x) => ("node" in x ? [x.node] : [])),
        pending: b.items.flatMap((x) => ("pending" in x ? [x.pending] : [])),
        jobs: Object.fromEntries(b.items.flatMap((x) => ("job" in x ? [x.job] : []))),
      };
      return stored(shardName(i), shard);
    });
    const index: LedgerIndex = {
      version: LEDGER_VERSION,
      generatedAt: ledger.generatedAt,
      shards: shards.map((s) => ({ name: s.name, sha256: s.sha256 })),
      totals: ledger.totals,
      namespaces: ledger.namespaces,
      counts: {
        nodes: ledger.nodes.length,
        staleNodes: ledger.nodes.filter((n) => n.stale).length,
        podsHoldingDevices: ledger.nodes.reduce((n, node) => n + Object.keys(node.pods).length, 0),
        pendingGpuPods: ledger.pending.length,
        jobs: Object.keys(ledger.jobs).length,
      },
    };
    return { index: stored(LEDGER_INDEX_NAME, index), shards };
  }
}

export interface ReadLedger {
  /** The ledger as stored, without the parts of corrupt or missing shards; undefined when the index is unusable. */
  ledger?: Ledger;
  index?: LedgerIndex;
  /** Names of the shards (or the index) that are missing or fail their checksum. */
  corrupt: string[];
  problems: string[];
}

function parse<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/**
 * Reads a stored ledger back: `index` and `shards` are what the ConfigMaps hold (text and the checksum stored
 * beside it), undefined when absent. Every problem is reported; nothing throws.
 */
export function assembleLedger(index: { text: string; sha256?: string } | undefined, shards: ReadonlyMap<string, { text: string; sha256?: string }>): ReadLedger {
  if (!index) return { corrupt: [], problems: ["no ledger yet"] };
  const idx = parse<LedgerIndex>(index.text);
  if (sha256(index.text) !== index.sha256 || !idx || idx.version !== LEDGER_VERSION || !Array.isArray(idx.shards)) {
    return { corrupt: [LEDGER_INDEX_NAME], problems: [`ledger index ${LEDGER_INDEX_NAME} is corrupt (checksum or format): rebuilding from cluster state`] };
  }
  const out: ReadLedger = { index: idx, corrupt: [], problems: [] };
  const ledger: Ledger = { version: idx.version, generatedAt: idx.generatedAt, nodes: [], pending: [], totals: idx.totals ?? {}, namespaces: idx.namespaces ?? {}, jobs: {} };
  for (const { name, sha256: want } of idx.shards) {
    const s = shards.get(name);
    const why = !s ? "missing" : sha256(s.text) !== s.sha256 ? "checksum mismatch" : s.sha256 !== want ? "not the shard the index recorded" : undefined;
    const shard = !why ? parse<LedgerShard>(s!.text) : undefined;
    if (why || !shard || !Array.isArray(shard.nodes)) {
      out.corrupt.push(name);
      out.problems.push(`ledger shard ${name} is ${why ?? "unreadable"}: rebuilt from cluster state (GPU-seconds of its jobs restart from zero)`);
      continue;
    }
    ledger.nodes.push(...shard.nodes);
    ledger.pending.push(...(shard.pending ?? []));
    Object.assign(ledger.jobs, shard.jobs ?? {});
  }
  ledger.nodes.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  out.ledger = ledger;
  return out;
}

/** A ledger ConfigMap as read from the cluster. */
export interface StoredConfigMap {
  name: string;
  uid: string;
  resourceVersion: string;
  /** The stored text (`index.json` or `shard.json`) and the checksum stored beside it. */
  text?: string;
  sha256?: string;
}

export type LedgerWrite =
  | { verb: "create" | "replace"; name: string; key: string; text: string; sha256: string; resourceVersion?: string }
  | { verb: "delete"; name: string; uid: string };

/**
 * What to write: every shard whose stored text differs (by checksum of what is actually stored, so a corrupted
 * shard is rewritten even when the index still records the right sum), then the index (every pass: it carries the
 * time), then the deletion of shards beyond the new count. Replaces carry the resourceVersion read.
 */
export function planLedgerWrites(next: { index: StoredText; shards: StoredText[] }, stored: ReadonlyMap<string, StoredConfigMap>): LedgerWrite[] {
  const out: LedgerWrite[] = [];
  const put = (s: StoredText, key: string, always: boolean): void => {
    const have = stored.get(s.name);
    if (!have) out.push({ verb: "create", name: s.name, key, text: s.text, sha256: s.sha256 });
    else if (always || have.text === undefined || sha256(have.text) !== s.sha256 || have.sha256 !== s.sha256) {
      out.push({ verb: "replace", name: s.name, key, text: s.text, sha256: s.sha256, resourceVersion: have.resourceVersion });
    }
  };
  for (const s of next.shards) put(s, SHARD_KEY, false);
  put(next.index, INDEX_KEY, true);
  const keep = new Set([next.index.name, ...next.shards.map((s) => s.name)]);
  for (const cm of [...stored.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) if (!keep.has(cm.name)) out.push({ verb: "delete", name: cm.name, uid: cm.uid });
  return out;
}

/** Reads the ledger back from its ConfigMaps as listed. */
export function readStored(stored: ReadonlyMap<string, StoredConfigMap>): ReadLedger {
  const index = stored.get(LEDGER_INDEX_NAME);
  const shards = new Map<string, { text: string; sha256?: string }>();
  for (const cm of stored.values()) if (cm.name !== LEDGER_INDEX_NAME && cm.text !== undefined) shards.set(cm.name, { text: cm.text, sha256: cm.sha256 });
  return assembleLedger(index?.text === undefined ? (index ? { text: "", sha256: index.sha256 } : undefined) : { text: index.text, sha256: index.sha256 }, shards);
}
