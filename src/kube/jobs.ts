/**
 * @module
 * Reading training jobs from the apiserver for the admission path: a plain GET (`rest.ts`, which keeps
 * @kubernetes/client-node and its ~70 MiB out of the webhook process), or client-node's CustomObjectsApi
 * for a kubeconfig only client-node handles. The client is set up on first use, and `warm()` lets the
 * server do that right after it starts listening. Answers are cached for a short TTL
 * and concurrent reads of the same job share one request (as LimitRanger's live lookups do), so a
 * job's replicas created together cost one GET. `fresh` bypasses the cache (and refreshes it), for
 * decisions that must see the job as it is now (`/scale`).
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import type { JobReader } from "../membership/types.js";
import { kubeClient, statusOf } from "./client.js";
import { restClient } from "./rest.js";

export interface JobReaderOptions {
  /** Path of a kubeconfig; default: in-cluster service account, else $KUBECONFIG / ~/.kube/config. */
  kubeconfig?: string;
  ttlMs: number;
  /** Upper bound on cached jobs (oldest dropped first). */
  maxEntries?: number;
  now?: () => number;
  /** Told how each admission-path lookup through this reader was answered (the lookup histogram). */
  observe?: JobReader["observeLookup"];
}

export interface WarmJobReader extends JobReader {
  /** Loads the client now; resolves when it is ready (or failed, which later reads report). */
  warm(): Promise<void>;
}

interface Entry {
  at: number;
  value: Promise<KubeObject | undefined>;
  /** Set once `value` has resolved. */
  settled?: { job: KubeObject | undefined };
}

type GetObject = (kind: ObjectKind, namespace: string, name: string) => Promise<KubeObject | undefined>;

/**
 * The job's API path (names and namespaces are DNS labels, so nothing to escape; encoded all the same). Namespace
 * "": a cluster-scoped object (a TrainJob's ClusterTrainingRuntime, `readRuntime` in src/membership/lookup.ts).
 */
export function jobPath(kind: ObjectKind, namespace: string, name: string): string {
  const ns = namespace === "" ? "" : `/namespaces/${encodeURIComponent(namespace)}`;
  return `/apis/${kind.group}/${kind.version}${ns}/${kind.plural}/${encodeURIComponent(name)}`;
}

async function connect(kubeconfig: string | undefined): Promise<GetObject> {
  const rest = await restClient(kubeconfig);
  if (rest) return async (kind, namespace, name) => (await rest.get(jobPath(kind, namespace, name))) as KubeObject | undefined;
  return connectClientNode(kubeconfig);
}

/** The same read through client-node, for a kubeconfig `rest.ts` does not cover (an exec plugin, say). */
async function connectClientNode(kubeconfig: string | undefined): Promise<GetObject> {
  const { k8s, kc } = await kubeClient(kubeconfig);
  const api = kc.makeApiClient(k8s.CustomObjectsApi);
  return async (kind, namespace, name) => {
    try {
      const at = { group: kind.group, version: kind.version, plural: kind.plural, name };
      return (await (namespace === "" ? api.getClusterCustomObject(at) : api.getNamespacedCustomObject({ ...at, namespace }))) as KubeObject;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  };
}

/** A cached, single-flight job reader over `getObject` (the apiserver's unless a test passes its own). */
export function cachedJobReader(getObject: () => Promise<GetObject>, opts: JobReaderOptions): WarmJobReader {
  const now = opts.now ?? Date.now;
  const max = opts.maxEntries ?? 10_000;
  const cache = new Map<string, Entry>();
  let client: Promise<GetObject> | undefined;
  const load = (): Promise<GetObject> => {
    client ??= getObject().catch((err: unknown) => {
      client = undefined; // retry on the next read
      throw err;
    });
    return client;
  };
  return {
    ...(opts.observe ? { observeLookup: opts.observe } : {}),
    async warm() {
      await load().then(
        () => undefined,
        () => undefined,
      );
    },
    peek(kind, namespace, name) {
      const hit = cache.get(`${kind.group}/${kind.kind}/${namespace}/${name}`);
      return hit?.settled && now() - hit.at < opts.ttlMs ? hit.settled.job : null;
    },
    get(kind, namespace, name) {
      const key = `${kind.group}/${kind.kind}/${namespace}/${name}`;
      const hit = cache.get(key);
      if (hit && now() - hit.at < opts.ttlMs) return hit.value;
      return fetch(key, kind, namespace, name);
    },
    // Never shares a read already in flight (it may have started before the change being checked).
    fresh(kind, namespace, name) {
      return fetch(`${kind.group}/${kind.kind}/${namespace}/${name}`, kind, namespace, name);
    },
  };

  /** One GET, cached under `key` from now on (failures are not). */
  function fetch(key: string, kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined> {
    const value = load().then((get) => get(kind, namespace, name));
    const entry: Entry = { at: now(), value };
    cache.delete(key);
    cache.set(key, entry);
    value.then(
      (job) => (entry.settled = { job }),
      () => cache.get(key) === entry && cache.delete(key), // failures are not cached
    );
    if (cache.size > max) cache.delete(cache.keys().next().value!);
    return value;
  }
}

export function createJobReader(opts: JobReaderOptions): WarmJobReader {
  return cachedJobReader(() => connect(opts.kubeconfig), opts);
}
