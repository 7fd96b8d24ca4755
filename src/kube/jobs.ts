/**
 * @module
 * Reading training jobs from the apiserver for the admission path: a plain GET (`rest.ts`, which keeps
 * @kubernetes/client-node and its ~70 MiB out of the webhook process), or client-node's CustomObjectsApi
 * for a kubeconfig only client-node handles. The client is set up on first use, and `warm()` lets the
 * server do that right after it starts listening. Answers are cached for a short TTL
 * and concurrent reads of the same job share one request (as LimitRanger's live lookups do), so a
 * job's replicas created together cost one GET. `fresh` bypasses the cache (and refreshes it), for
 * decisions that must see the job as it is now (`/scale`, a TrainJob's runtime on CREATE): with a copy at hand it
 * reads the object's metadata alone first, and answers the copy when its uid and resourceVersion are the object's
 * now (issue 46), else reads it whole.
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import type { JobReader } from "../membership/types.js";
import { kubeClient, statusOf } from "./client.js";
import { restClient, type RestClient } from "./rest.js";

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
  /** The object the entry before this one held, while this one is in flight: what a `fresh` read may find unchanged. */
  known?: KubeObject;
}

/** One object by API path; undefined when it does not exist. */
export type GetObject = ((kind: ObjectKind, namespace: string, name: string) => Promise<KubeObject | undefined>) & {
  /**
   * The object's metadata alone (the apiserver's PartialObjectMetadata: uid and resourceVersion), for a `fresh` read
   * to tell a cached copy is still the object as it is now without reading it whole. Absent: `fresh` reads it whole.
   */
  metadata?: (kind: ObjectKind, namespace: string, name: string) => Promise<KubeObject | undefined>;
};

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
  if (rest) return restGetObject(rest);
  return connectClientNode(kubeconfig);
}

/** Objects read through `rest.ts`, whole or their metadata alone. */
export function restGetObject(rest: Pick<RestClient, "get" | "getMetadata">): GetObject {
  const get = async (kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined> =>
    (await rest.get(jobPath(kind, namespace, name))) as KubeObject | undefined;
  const metadata = async (kind: ObjectKind, namespace: string, name: string): Promise<KubeObject | undefined> =>
    (await rest.getMetadata(jobPath(kind, namespace, name))) as KubeObject | undefined;
  return Object.assign(get, { metadata });
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
    // Never shares a read already in flight (it may have started before the change being checked). With a copy at
    // hand (settled, however old) and a client that reads metadata alone, that is read first: the same uid and
    // resourceVersion are the very object as it is now (the apiserver changes the resourceVersion on every write),
    // so the copy is answered; else the object is read whole. Issue 46: a 1.5 MiB runtime read and parsed whole on
    // every TrainJob CREATE held the event loop every tenant's reviews share.
    fresh(kind, namespace, name) {
      return fetch(`${kind.group}/${kind.kind}/${namespace}/${name}`, kind, namespace, name, (get, known) => {
        const version = known && versionOf(known);
        if (!get.metadata || !version) return get(kind, namespace, name);
        return get
          .metadata(kind, namespace, name)
          .then((meta) => (meta === undefined ? undefined : versionOf(meta) === version ? known : get(kind, namespace, name)));
      });
    },
  };

  /**
   * One read (a GET unless `read` says otherwise, which is told the object last read, if any), cached under `key`
   * from now on (failures are not).
   */
  function fetch(
    key: string,
    kind: ObjectKind,
    namespace: string,
    name: string,
    read: (get: GetObject, known: KubeObject | undefined) => Promise<KubeObject | undefined> = (get) => get(kind, namespace, name),
  ): Promise<KubeObject | undefined> {
    const before = cache.get(key);
    const known = before?.settled ? before.settled.job : before?.known;
    const value = load().then((get) => read(get, known));
    const entry: Entry = { at: now(), value, ...(known ? { known } : {}) };
    cache.delete(key);
    cache.set(key, entry);
    value.then(
      (job) => {
        entry.settled = { job };
        delete entry.known;
      },
      () => cache.get(key) === entry && cache.delete(key), // failures are not cached
    );
    if (cache.size > max) cache.delete(cache.keys().next().value!);
    return value;
  }
}

/** An object's uid and resourceVersion, together; undefined when it lacks either (then it cannot be told unchanged). */
function versionOf(o: KubeObject): string | undefined {
  const m = o.metadata as { uid?: unknown; resourceVersion?: unknown } | undefined;
  return typeof m?.uid === "string" && m.uid !== "" && typeof m.resourceVersion === "string" && m.resourceVersion !== ""
    ? `${m.uid}/${m.resourceVersion}`
    : undefined;
}

export function createJobReader(opts: JobReaderOptions): WarmJobReader {
  return cachedJobReader(() => connect(opts.kubeconfig), opts);
}
