/**
 * @module
 * Kueue's queue objects as Quartermaster names them (sigs.k8s.io/kueue v0.19.2, API `kueue.x-k8s.io/v1beta2`), and
 * what the webhook read of a queued job's queue ({@link QueueRead}): one vocabulary for the admission reads
 * (src/admission/queue.ts), the decision on them (src/validate/queue-capacity.ts), the ledger's quotas
 * (src/ledger/kueue-quota.ts) and the API client. Pure.
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import { objectOr } from "../core/object.js";

/** Kueue's API group. */
export const KUEUE_GROUP = "kueue.x-k8s.io";
/** Kueue v0.19.2's storage version (kueue `apis/kueue/v1beta2`). */
export const KUEUE_VERSION = "v1beta2";

export const LOCAL_QUEUE: ObjectKind = { kind: "LocalQueue", group: KUEUE_GROUP, version: KUEUE_VERSION, plural: "localqueues" };
export const CLUSTER_QUEUE: ObjectKind = { kind: "ClusterQueue", group: KUEUE_GROUP, version: KUEUE_VERSION, plural: "clusterqueues" };
export const RESOURCE_FLAVOR: ObjectKind = { kind: "ResourceFlavor", group: KUEUE_GROUP, version: KUEUE_VERSION, plural: "resourceflavors" };

/** What was read for a queued job. */
export type QueueRead =
  /** Not queued (or not asked): nothing read. */
  | { kind: "none" }
  /** The LocalQueue or ClusterQueue does not exist, names none, or could not be read: never a refusal. */
  | { kind: "unavailable"; queue: string; reason: string }
  | {
      kind: "found";
      /** The LocalQueue's name. */
      queue: string;
      clusterQueue: KubeObject;
      /** The ResourceFlavors read, by name; undefined: it does not exist. */
      flavors: ReadonlyMap<string, KubeObject | undefined>;
      /** Flavors that could not be read (an error or the time bound, not an absence), one sentence each. */
      unread: readonly string[];
    };

export const NO_QUEUE: QueueRead = Object.freeze({ kind: "none" });

const arrayOr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** The names of the flavors of the ClusterQueue's resource groups that cover a GPU resource. */
export function flavorNamesFor(clusterQueue: KubeObject, isGpu: (resource: string) => boolean): string[] {
  const names = new Set<string>();
  for (const group of arrayOr(objectOr(clusterQueue.spec).resourceGroups)) {
    const covered = arrayOr(objectOr(group).coveredResources);
    if (!covered.some((r) => typeof r === "string" && isGpu(r))) continue;
    for (const f of arrayOr(objectOr(group).flavors)) {
      const name = objectOr(f).name;
      if (typeof name === "string" && name !== "") names.add(name);
    }
  }
  return [...names];
}
