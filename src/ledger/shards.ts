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
 *   GPU-seconds of the jobs in that shard start again from zero, said in a warning. A text whose checksum is
 *   right but whose shape is wrong (`schema.ts`, checked by generated ajv validators) is corrupt too: a
 *   pass reports it, rebuilds it and goes on.
 * - The ledger deletes only ConfigMaps of its own names: the numbered shards `quartermaster-ledger-<n>`, n below
 *   the shard maximum, that the current layout no longer uses. Anything else carrying its label is left alone.
 */
import type { ValidateFunction } from "ajv";
import { compiledValidator } from "../core/boundary.js";
import { createHash } from "node:crypto";
import generatedIndexValidator from "../generated/ledger-index-validator.js";
import generatedShardValidator from "../generated/ledger-shard-validator.js";
import { describeSchemaErrors } from "../core/schema.js";
import type { KueueLedger } from "./kueue-quota.js";
import { INDEX_KEY, LEDGER_INDEX_NAME, SHARD_KEY, shardName } from "./names.js";
import { LEDGER_VERSION, type LargestNode, type Ledger, type NodeEntry, type PendingGpuPod, type ResourceTotals, type Usage } from "./compute.js";

export { CHECKSUM_KEY, INDEX_KEY, LEDGER_INDEX_NAME, SHARD_KEY, shardName } from "./names.js";
/**
 * Most shards a ledger is split into (a power of two). The reconciler's RBAC names every ledger ConfigMap
 * (`resourceNames`: the index and shards 0 … MAX_LEDGER_SHARDS-1, manifests/base/reconciler-ledger-rbac.yaml,
 * generated from this), so it can write no other ConfigMap. 256 shards at the default 512 KiB budget hold
 * 128 MiB of ledger.
 */
export const MAX_LEDGER_SHARDS = 256;

/** The name of every ConfigMap the ledger may use: its index, then shards 0 … MAX_LEDGER_SHARDS-1. */
export function ledgerConfigMapNames(): string[] {
  return [LEDGER_INDEX_NAME, ...Array.from({ length: MAX_LEDGER_SHARDS }, (_, i) => shardName(i))];
}

/** Whether `name` is one of the ledger's ConfigMaps (the index or a shard below the maximum). */
export function isLedgerConfigMapName(name: string): boolean {
  if (name === LEDGER_INDEX_NAME) return true;
  const m = /^quartermaster-ledger-(0|[1-9][0-9]*)$/.exec(name);
  return m !== null && Number(m[1]) < MAX_LEDGER_SHARDS;
}

const validateIndex = compiledValidator<LedgerIndex>(generatedIndexValidator);
const validateShard = compiledValidator<LedgerShard>(generatedShardValidator);

/** Whether `name` is one of the ledger's own shard names (`quartermaster-ledger-<n>`, n < MAX_LEDGER_SHARDS). */
export function isShardName(name: string): boolean {
  return name !== LEDGER_INDEX_NAME && isLedgerConfigMapName(name);
}

/** The first shape error of a parsed ledger text, or undefined when it has the shape. */
function shapeError(validate: ValidateFunction, value: unknown): string | undefined {
  return validate(value) ? undefined : (describeSchemaErrors(validate.errors)[0] ?? "does not match the schema");
}

// Keys in sorted order, as in compute.ts: `JSON.stringify` gives the canonical bytes.
export interface LedgerIndex {
  /** `inactiveNodes` (nodes listing a GPU resource with zero allocatable) is absent from ledgers written before it. */
  counts: { inactiveNodes?: number; jobs: number; nodes: number; pendingGpuPods: number; podsHoldingDevices: number; staleNodes: number };
  generatedAt: string;
  /** Per Kueue ResourceFlavor, where Kueue's API is served (small: one entry per flavor, so kept in the index). */
  kueue?: KueueLedger;
  /** Absent from indexes written before it: readers then know no node shapes (the webhooks skip `no-node-shape`). */
  largest?: LargestNode;
  namespaces: Record<string, Record<string, Usage>>;
  shards: Array<{ name: string; sha256: string }>;
  totals: Record<string, ResourceTotals>;
  version: number;
}

/** A shard has no timestamp of its own, so one whose content did not change keeps its bytes and is not rewritten. */
export interface LedgerShard {
  jobs: Record<string, Record<string, Usage>>;
  nodes: NodeEntry[];
  of: number;
  pending: PendingGpuPod[];
  shard: number;
  version: number;
}

/** A ConfigMap's worth: the text stored and its checksum. */
export interface StoredText {
  name: string;
  text: string;
  sha256: string;
}

/**
 * JSON with object keys sorted at every level: the definition of the ledger's canonical form (equal ledgers,
 * equal bytes, equal checksums). The ledger's builders put keys in this order already, so the hot path uses
 * `JSON.stringify` (four times faster at 100,000 pods) and a test checks the two agree. Were they ever to
 * disagree, the cost would be a needless rewrite, never a wrong checksum: sums are over the bytes stored.
 * Hand-written: the ledger holds only strings, finite numbers, booleans, arrays and plain objects.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value)
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .sort();
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

/** One entry of a shard: its hash key, which list it goes in, and its JSON text. */
interface Item {
  key: string;
  list: "jobs" | "nodes" | "pending";
  json: string;
}

function stored(name: string, text: string): StoredText {
  return { name, text, sha256: sha256(text) };
}

/** Splits a ledger into its index and shards, every shard's text within `budget` bytes where possible. */
export function shardLedger(ledger: Ledger, budget: number): { index: StoredText; shards: StoredText[] } {
  // Each entry serialized once; shards are its texts joined, in the ledger's (sorted) order.
  const items: Item[] = [
    ...ledger.nodes.map((node): Item => ({ key: `node/${node.name}`, list: "nodes", json: JSON.stringify(node) })),
    ...ledger.pending.map((p): Item => ({ key: `pending/${p.namespace}/${p.name}`, list: "pending", json: JSON.stringify(p) })),
    ...Object.entries(ledger.jobs).map(([k, v]): Item => ({ key: `job/${k}`, list: "jobs", json: `${JSON.stringify(k)}:${JSON.stringify(v)}` })),
  ];
  const overhead = 256;
  const total = items.reduce((n, i) => n + i.json.length + 1, 0);
  // Aim at 60 % of the budget so hashing's unevenness rarely forces a second try.
  let count = 1;
  while (count < MAX_LEDGER_SHARDS && total / count > (budget - overhead) * 0.6) count *= 2;
  for (;;) {
    const buckets = Array.from({ length: count }, () => ({ size: overhead, items: [] as Item[] }));
    for (const item of items) {
      const b = buckets[fnv1a(item.key) & (count - 1)]!;
      b.size += item.json.length + 1;
      b.items.push(item);
    }
    if (count < MAX_LEDGER_SHARDS && buckets.some((b) => b.size > budget)) {
      count *= 2;
      continue;
    }
    const shards = buckets.map((b, i) => {
      const part = (list: Item["list"]) =>
        b.items
          .filter((x) => x.list === list)
          .map((x) => x.json)
          .join(",");
      // The LedgerShard's fields, in canonical order.
      const text = `{"jobs":{${part("jobs")}},"nodes":[${part("nodes")}],"of":${count},"pending":[${part("pending")}],"shard":${i},"version":${LEDGER_VERSION}}`;
      return stored(shardName(i), text);
    });
    const index: LedgerIndex = {
      counts: {
        inactiveNodes: ledger.nodes.filter((n) => Object.values(n.resources).some((r) => r.inactive)).length,
        jobs: Object.keys(ledger.jobs).length,
        nodes: ledger.nodes.length,
        pendingGpuPods: ledger.pending.length,
        podsHoldingDevices: ledger.nodes.reduce((n, node) => n + node.pods.length, 0),
        staleNodes: ledger.nodes.filter((n) => n.stale).length,
      },
      generatedAt: ledger.generatedAt,
      ...(ledger.kueue ? { kueue: ledger.kueue } : {}),
      ...(ledger.largest ? { largest: ledger.largest } : {}),
      namespaces: ledger.namespaces,
      shards: shards.map((s) => ({ name: s.name, sha256: s.sha256 })),
      totals: ledger.totals,
      version: LEDGER_VERSION,
    };
    return { index: stored(LEDGER_INDEX_NAME, JSON.stringify(index)), shards };
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

/** The index from its stored text and checksum, or why it cannot be trusted (checksum, JSON, shape). */
export function readIndex(index: { text: string; sha256?: string }): { index: LedgerIndex } | { why: string } {
  if (sha256(index.text) !== index.sha256) return { why: "checksum mismatch" };
  const idx = parse<LedgerIndex>(index.text);
  if (idx === undefined) return { why: "not JSON" };
  const shape = shapeError(validateIndex, idx);
  return shape === undefined ? { index: idx } : { why: `wrong shape: ${shape}` };
}

/**
 * Reads a stored ledger back: `index` and `shards` are what the ConfigMaps hold (text and the checksum stored
 * beside it), undefined when absent. Every problem is reported; nothing throws.
 */
export function assembleLedger(
  index: { text: string; sha256?: string } | undefined,
  shards: ReadonlyMap<string, { text: string; sha256?: string }>,
): ReadLedger {
  if (!index) return { corrupt: [], problems: ["no ledger yet"] };
  const read = readIndex(index);
  if ("why" in read) {
    return { corrupt: [LEDGER_INDEX_NAME], problems: [`ledger index ${LEDGER_INDEX_NAME} is corrupt (${read.why}): rebuilding from cluster state`] };
  }
  const idx = read.index;
  const out: ReadLedger = { index: idx, corrupt: [], problems: [] };
  const ledger: Ledger = {
    generatedAt: idx.generatedAt,
    jobs: {},
    ...(idx.kueue ? { kueue: idx.kueue } : {}),
    ...(idx.largest ? { largest: idx.largest } : {}),
    namespaces: idx.namespaces,
    nodes: [],
    pending: [],
    totals: idx.totals,
    version: idx.version,
  };
  for (const { name, sha256: want } of idx.shards) {
    const s = shards.get(name);
    let why = !s ? "missing" : sha256(s.text) !== s.sha256 ? "checksum mismatch" : s.sha256 !== want ? "not the shard the index recorded" : undefined;
    const shard = !why ? parse<LedgerShard>(s!.text) : undefined;
    if (!why) {
      const shape = shard === undefined ? "not JSON" : shapeError(validateShard, shard);
      if (shape !== undefined) why = `of the wrong shape (${shape})`;
    }
    if (why || !shard) {
      out.corrupt.push(name);
      out.problems.push(`ledger shard ${name} is ${why ?? "unreadable"}: rebuilt from cluster state (GPU-seconds of its jobs restart from zero)`);
      continue;
    }
    ledger.nodes.push(...shard.nodes);
    ledger.pending.push(...shard.pending);
    Object.assign(ledger.jobs, shard.jobs);
  }
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  ledger.nodes.sort((a, b) => cmp(a.name, b.name));
  ledger.pending.sort((a, b) => cmp(a.namespace, b.namespace) || cmp(a.name, b.name));
  ledger.jobs = Object.fromEntries(Object.entries(ledger.jobs).sort(([a], [b]) => cmp(a, b)));
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
  | {
      verb: "create" | "replace";
      name: string;
      key: string;
      text: string;
      sha256: string;
      resourceVersion?: string;
      /** A shard's replace: why, as the entries whose text changed ({@link shardChanges}). */
      changed?: string[];
    }
  | { verb: "delete"; name: string; uid: string };

/**
 * What to write: every shard whose stored text differs (by checksum of what is actually stored, so a corrupted
 * shard is rewritten even when the index still records the right sum), then the index (every pass: it carries the
 * time), then the deletion of the ledger's own shards beyond the new count (`isShardName`: nothing else carrying
 * the ledger's label is ever deleted). Replaces carry the resourceVersion read.
 */
export function planLedgerWrites(next: { index: StoredText; shards: StoredText[] }, stored: ReadonlyMap<string, StoredConfigMap>): LedgerWrite[] {
  const out: LedgerWrite[] = [];
  const put = (s: StoredText, key: string, always: boolean): void => {
    const have = stored.get(s.name);
    if (!have) out.push({ verb: "create", name: s.name, key, text: s.text, sha256: s.sha256 });
    else if (always || have.text === undefined || sha256(have.text) !== s.sha256 || have.sha256 !== s.sha256) {
      const changed = always ? undefined : shardChanges(have.text, s.text);
      out.push({ verb: "replace", name: s.name, key, text: s.text, sha256: s.sha256, resourceVersion: have.resourceVersion, ...(changed ? { changed } : {}) });
    }
  };
  for (const s of next.shards) put(s, SHARD_KEY, false);
  put(next.index, INDEX_KEY, true);
  const keep = new Set([next.index.name, ...next.shards.map((s) => s.name)]);
  for (const cm of [...stored.values()].sort((a, b) => (a.name < b.name ? -1 : 1)))
    if (!keep.has(cm.name) && isShardName(cm.name)) out.push({ verb: "delete", name: cm.name, uid: cm.uid });
  return out;
}

/** A shard's entries by key (`node/<name>`, `pending/<namespace>/<name>`, `job/<key>`, as `shardLedger` hashes them) and their text. */
function shardEntries(text: string | undefined): Map<string, string> | undefined {
  const shard = text === undefined ? undefined : parse<Partial<LedgerShard>>(text);
  if (!shard || typeof shard !== "object") return undefined;
  const out = new Map<string, string>();
  for (const n of Array.isArray(shard.nodes) ? shard.nodes : []) out.set(`node/${n?.name}`, JSON.stringify(n));
  for (const p of Array.isArray(shard.pending) ? shard.pending : []) out.set(`pending/${p?.namespace}/${p?.name}`, JSON.stringify(p));
  for (const [k, v] of Object.entries(shard.jobs ?? {})) out.set(`job/${k}`, JSON.stringify(v));
  return out;
}

/**
 * Why a shard is rewritten: the keys of the entries added, removed or changed between the stored text and the
 * new one, sorted; `["(unreadable)"]` when the stored text is no shard (corrupt), `[]` when only the layout
 * fields moved (`of`: the shard count changed). The pass names them in its summary, so a ledger that is
 * rewritten pass after pass says what keeps moving.
 */
export function shardChanges(before: string | undefined, after: string): string[] {
  const was = shardEntries(before);
  const now = shardEntries(after) ?? new Map<string, string>();
  if (!was) return ["(unreadable)"];
  const keys = new Set([...was.keys(), ...now.keys()]);
  return [...keys].filter((k) => was.get(k) !== now.get(k)).sort();
}

/** Reads the ledger back from its ConfigMaps as listed. */
export function readStored(stored: ReadonlyMap<string, StoredConfigMap>): ReadLedger {
  const index = stored.get(LEDGER_INDEX_NAME);
  const shards = new Map<string, { text: string; sha256?: string }>();
  for (const cm of stored.values()) if (cm.name !== LEDGER_INDEX_NAME && cm.text !== undefined) shards.set(cm.name, { text: cm.text, sha256: cm.sha256 });
  return assembleLedger(
    index?.text === undefined ? (index ? { text: "", sha256: index.sha256 } : undefined) : { text: index.text, sha256: index.sha256 },
    shards,
  );
}
