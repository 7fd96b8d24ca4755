/**
 * @module
 * The evidence of a verdict (./types.ts) as the resident reconciler holds it (issue 49, "the same verdict where
 * users look"): the job and its pods from its informers (src/run/watch.ts), the nodes from its node informer
 * (src/run/blocked.ts), and each node's free GPUs counted from the cached pods bound to it, as the device ledger
 * counts them. No read per job. What its caches do not hold is named in `unread`, and the verdict gives the
 * reasons that rest on it only in the forms the pods and the job still show:
 *
 * - Kueue's Workload and queues (`kueue`), unless the caller's Kueue caches (src/run/blocked-kueue.ts) give them:
 *   without them, a job suspended for a queue is `queued`, never `inadmissible` or a `phantom-reservation`;
 * - Events and PolicyReports (`events`, `policy-reports`): no `refused` and no `warned`; `controller-error`
 *   only from the job's own conditions, unless the job's Events were read for it (`read`);
 * - ResourceClaims and ResourceSlices (`dra`): `dra-unsatisfiable` only from kube-scheduler's PodScheduled message;
 * - the controllers' Deployments (`controllers`): `no-controller` only for a job with no pods and no status
 *   after the grace period, unless its controller's state was read for it (`read`).
 *
 * Node staleness is the Node's Ready condition (kube-controller-manager's node-lifecycle-controller turns it
 * Unknown once the node's Lease lapses), not the Leases themselves. Pure.
 */
import { effectivePodGpus, isGpuResource, type GpuCatalog } from "../core/gpu.js";
import { asV1PodSpec } from "../core/boundary.js";
import type { KubeObject } from "../core/kube.js";
import { objectOr } from "../core/object.js";
import type { NodeEntry, ResourceEntry } from "../ledger/compute.js";
import type { KnownKind } from "./kinds.js";
import { nameOf } from "./read.js";
import type { ExplainEvidence, ExplainSettings, KindFacts, Unread } from "./types.js";

/** What the resident reconciler's caches do not hold. */
export const UNREAD_FROM_CACHES: readonly Unread[] = ["kueue", "events", "policy-reports", "dra", "controllers"];

const holds = (pod: KubeObject): boolean => {
  const phase = objectOr(pod.status).phase;
  return phase !== "Succeeded" && phase !== "Failed";
};

/**
 * Each node's GPUs as the device ledger counts them (src/ledger/compute.ts): allocatable, and allocated the
 * effective requests of the pods bound to it that are neither Succeeded nor Failed; one entry per node, the
 * GPU resources its allocatable lists. Extended resources only (DRA's devices are not in the caches).
 */
export function nodeEntriesFromCaches(nodes: readonly KubeObject[], pods: Iterable<KubeObject>, gpu: GpuCatalog): NodeEntry[] {
  const held = new Map<string, Map<string, number>>();
  for (const pod of pods) {
    const node = objectOr(pod.spec).nodeName;
    if (typeof node !== "string" || node === "" || !holds(pod)) continue;
    const gpus = effectivePodGpus(asV1PodSpec(objectOr(pod.spec)), gpu);
    if (gpus.size === 0) continue;
    let per = held.get(node);
    if (!per) held.set(node, (per = new Map<string, number>()));
    for (const [r, n] of gpus) per.set(r, (per.get(r) ?? 0) + n);
  }
  return nodes.map((n) => {
    const name = nameOf(n);
    const allocatable = objectOr(objectOr(n.status).allocatable);
    const resources: Record<string, ResourceEntry> = {};
    for (const [r, v] of Object.entries(allocatable)) {
      if (!isGpuResource(r, gpu.resources)) continue;
      const a = Number(v);
      const count = Number.isFinite(a) ? a : 0;
      const used = held.get(name)?.get(r) ?? 0;
      resources[r] = {
        allocatable: count,
        allocated: used,
        capacity: count,
        free: Math.max(0, count - used),
        inactive: count === 0,
        overCommitted: used > count,
      };
    }
    return { name, pods: [], resources, stale: false };
  });
}

export interface CachedJob {
  kind: KnownKind;
  job: KubeObject;
  /** The pods the job controls (the pods informer's index by controller uid). */
  pods: KubeObject[];
  /** Kueue's Workload and queues of the job, when the caches hold them (absent: not known, judged without). */
  kueue?: { kueueServed: boolean; workload?: KubeObject; localQueue?: KubeObject; clusterQueue?: KubeObject };
  /** Read for this job beyond the caches (src/run/blocked-follow-up.ts): its Events, its controller's state; each when read. */
  read?: { events?: KubeObject[]; controller?: KindFacts["controller"] };
}

/** What the caches leave unread for this job, less what was given besides. */
function unreadOf(c: CachedJob): readonly Unread[] {
  const given = new Set<Unread>([
    ...(c.kueue ? (["kueue"] as const) : []),
    ...(c.read?.events ? (["events"] as const) : []),
    ...(c.read?.controller ? (["controllers"] as const) : []),
  ]);
  return given.size === 0 ? UNREAD_FROM_CACHES : UNREAD_FROM_CACHES.filter((u) => !given.has(u));
}

/** The evidence of one cached job: nothing read, everything from the caches; `unread` says what is missing. */
export function cachedEvidence(
  c: CachedJob,
  nodes: KubeObject[],
  ledger: { generatedAt: string; nodes: NodeEntry[] },
  settings: ExplainSettings,
): ExplainEvidence {
  const meta = objectOr(c.job.metadata);
  const { kind } = c;
  return {
    ref: { namespace: String(meta.namespace ?? ""), name: String(meta.name ?? "") },
    job: c.job,
    kind: {
      kind: kind.kind,
      group: kind.group,
      version: kind.version,
      plural: kind.plural,
      finishedConditions: kind.finishedConditions,
      ...(kind.jobKind ? { jobKind: kind.jobKind } : {}),
      // Its informer lists it: served.
      served: true,
      controller: c.read?.controller ?? { name: kind.deployment ?? kind.controllerName, state: "unknown" },
    },
    pods: c.pods,
    events: c.read?.events ?? [],
    policyResults: [],
    kueueServed: false,
    ...c.kueue,
    nodes,
    ledger,
    claims: [],
    slices: [],
    settings,
    unread: unreadOf(c),
  };
}
