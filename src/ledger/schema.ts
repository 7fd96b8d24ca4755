/**
 * @module
 * JSON Schemas of the device ledger as stored: the index ConfigMap's `index.json` and each shard's `shard.json`
 * (`src/ledger/shards.ts`). A stored text whose checksum is right but whose shape is not (edited by
 * hand, written by another version) is treated exactly like a corrupt one: reported and rebuilt, never trusted.
 * `src/generated/ledger-index-validator.ts` and `ledger-shard-validator.ts` are generated from these
 * (`npm run generate`). Extra keys are allowed; every key the reader uses must be there with its type.
 */
import { LEDGER_VERSION } from "./compute.js";

const num = { type: "number" } as const;
const int = { type: "integer", minimum: 0 } as const;
const str = { type: "string" } as const;
const bool = { type: "boolean" } as const;
const counts = { type: "object", additionalProperties: num } as const;

const USAGE = { type: "object", required: ["allocated", "gpuSeconds"], properties: { allocated: num, gpuSeconds: num, since: str } } as const;
/** `{ <namespace or job>: { <resource>: Usage } }` */
const USAGE_MAP = { type: "object", additionalProperties: { type: "object", additionalProperties: USAGE } } as const;

/** The DRA part of a resource's figures (optional: present only where DRA devices are, see compute.ts). */
const DRA_FIGURES = { type: "object", required: ["allocated", "capacity"], properties: { allocated: num, capacity: num } } as const;

const TOTALS = {
  type: "object",
  additionalProperties: {
    type: "object",
    required: ["allocatable", "allocated", "capacity", "free", "unavailable"],
    properties: { allocatable: num, allocated: num, capacity: num, dra: DRA_FIGURES, free: num, unavailable: num },
  },
} as const;

const RESOURCE_ENTRY = {
  type: "object",
  required: ["allocatable", "allocated", "capacity", "free", "inactive", "overCommitted"],
  properties: { allocatable: num, allocated: num, capacity: num, dra: DRA_FIGURES, free: num, inactive: bool, overCommitted: bool },
} as const;

const POD_HOLDING = {
  type: "object",
  required: ["name", "namespace", "resources", "uid"],
  properties: { job: str, name: str, namespace: str, resources: counts, uid: str },
} as const;

const NODE_ENTRY = {
  type: "object",
  required: ["name", "pods", "resources", "stale"],
  properties: {
    leaseRenewTime: str,
    missing: bool,
    name: str,
    pods: { type: "array", items: POD_HOLDING },
    resources: { type: "object", additionalProperties: RESOURCE_ENTRY },
    stale: bool,
    staleReason: str,
  },
} as const;

const PENDING = {
  type: "object",
  required: ["createdAt", "name", "namespace", "pendingSeconds", "reason", "resources", "uid"],
  properties: { createdAt: str, job: str, message: str, name: str, namespace: str, pendingSeconds: num, reason: str, resources: counts, uid: str },
} as const;

/** One ClusterQueue's quota of a resource in a flavor (src/ledger/kueue-quota.ts). */
const KUEUE_QUOTA = {
  type: "object",
  required: ["clusterQueue", "nominalQuota"],
  properties: { borrowingLimit: num, clusterQueue: str, cohort: str, lendingLimit: num, nominalQuota: num },
} as const;

const KUEUE_RESOURCE = {
  type: "object",
  required: ["inUse", "kueueReserved", "kueueUsage", "physical", "quota", "quotas"],
  properties: {
    borrowingLimit: num,
    inUse: num,
    kueueReserved: num,
    kueueUsage: num,
    physical: num,
    quota: num,
    quotas: { type: "array", items: KUEUE_QUOTA },
    unlimitedBorrowing: bool,
  },
} as const;

/** The Kueue section (optional: absent where Kueue's API is not served, and in ledgers written before it). */
const KUEUE = {
  type: "object",
  required: ["flavors"],
  properties: {
    flavors: {
      type: "array",
      items: {
        type: "object",
        required: ["clusterQueues", "name", "nodeLabels", "nodes", "resources"],
        properties: {
          clusterQueues: { type: "array", items: str },
          missing: bool,
          name: str,
          nodeLabels: { type: "object", additionalProperties: str },
          nodes: int,
          resources: { type: "object", additionalProperties: KUEUE_RESOURCE },
        },
      },
    },
  },
} as const;

/** The ledger's own ConfigMap names: the index and numbered shards (a shard number has at most four digits). */
export const SHARD_NAME_PATTERN = "^quartermaster-ledger-(0|[1-9][0-9]{0,3})$";

export const LEDGER_INDEX_SCHEMA = {
  type: "object",
  required: ["counts", "generatedAt", "namespaces", "shards", "totals", "version"],
  properties: {
    counts: {
      type: "object",
      required: ["jobs", "nodes", "pendingGpuPods", "podsHoldingDevices", "staleNodes"],
      // inactiveNodes is optional: ledgers written before it have none, and a webhook not yet upgraded
      // accepts an index that has it (no additionalProperties: false), so a rolling upgrade reads both.
      properties: { inactiveNodes: int, jobs: int, nodes: int, pendingGpuPods: int, podsHoldingDevices: int, staleNodes: int },
    },
    generatedAt: { type: "string", minLength: 1 },
    kueue: KUEUE,
    largest: {
      type: "object",
      required: ["deviceClasses", "resources"],
      properties: { deviceClasses: { type: "object", additionalProperties: int }, resources: { type: "object", additionalProperties: int } },
    },
    namespaces: USAGE_MAP,
    shards: {
      type: "array",
      items: {
        type: "object",
        required: ["name", "sha256"],
        properties: { name: { type: "string", pattern: SHARD_NAME_PATTERN }, sha256: { type: "string", pattern: "^[0-9a-f]{64}$" } },
      },
    },
    totals: TOTALS,
    version: { const: LEDGER_VERSION },
  },
} as const;

export const LEDGER_SHARD_SCHEMA = {
  type: "object",
  required: ["jobs", "nodes", "of", "pending", "shard", "version"],
  properties: {
    jobs: USAGE_MAP,
    nodes: { type: "array", items: NODE_ENTRY },
    of: { type: "integer", minimum: 1 },
    pending: { type: "array", items: PENDING },
    shard: int,
    version: { const: LEDGER_VERSION },
  },
} as const;
