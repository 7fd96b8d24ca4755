/**
 * @module
 * Reading training jobs from the apiserver for the admission path: a plain GET (`rest.ts`, which keeps
 * @kubernetes/client-node and its ~70 MiB out of the webhook process), or client-node's CustomObjectsApi
 * for a kubeconfig only client-node handles. The client is set up on first use, and `warm()` lets the
 * server do that right after it starts listening. Answers are cached for a short TTL (`ttlMs`, the policy's
 * `clusterSpec.jobCacheTtlMs`) and concurrent reads of the same job share one request (as LimitRanger's live lookups
 * do), so a job's replicas created together cost one GET. A copy is never answered once it is `ttlMs` old (counted
 * from when its read began), so what a read answers is at most `ttlMs` stale.
 *
 * Refresh-ahead (issue 51, as Caffeine's refreshAfterWrite): a copy read past its refresh point (`refreshAfterMs`,
 * half the TTL by default) is still answered at once, and its job is re-read in the background, one read at a time
 * shared like any other; the new answer replaces the copy when it comes. A launch's pods then keep finding the job
 * in the cache instead of all waiting on one GET to the loaded apiserver each time the copy expires. A failed
 * re-read leaves the copy to its TTL (never past it), and the next read past the refresh point tries again. `peek`
 * starts these re-reads too, since admission answers most lookups through it; they do not queue in the read pool
 * (src/admission/read-pool.ts): no review waits on them, and there is at most one in flight per job.
 *
 * `fresh` bypasses the cache (and refreshes it), for
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
  /** How long an answer is reused, counted from when its read began; 0 reads every time. */
  ttlMs: number;
  /**
   * Age past which a read of a cached answer also re-reads the job in the background (refresh-ahead), so the copy is
   * replaced before it expires; default half of `ttlMs`, which leaves the re-read the other half to come back (a
   * launch's loaded apiserver took 0.47 s on average, issue 51) for at most twice the GETs of a job read all the time.
   * At or past `ttlMs`: no refresh-ahead.
   */
  refreshAfterMs?: number;
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
  /** When its read began on the monotonic clock (`began()`), for `fresh`'s `since`. */
  began: number;
  value: Promise<KubeObject | undefined>;
  /** Set once `value` has resolved. */
  settled?: { job: KubeObject | undefined };
  /**
   * The object the entry before this one held, while this one is in flight: what a `fresh` read may find unchanged.
   * Given by an older read that settles meanwhile, when there was none: else, under a launch's concurrent fresh reads
   * (a DRA pod's claims, src/admission/pod-job.ts), the key's entry is always one in flight without a copy, and every
   * fresh read reads the object whole (bench:dra-pods: 1.0 whole GET a review, none of metadata alone).
   */
  known?: KubeObject;
  /** The background re-read of this settled entry (refresh-ahead), while in flight: it replaces this entry once read. */
  next?: Entry;
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

/** A job as the cache files it (`key`) and reads it. */
interface Ref {
  key: string;
  kind: ObjectKind;
  namespace: string;
  name: string;
}

function refOf(kind: ObjectKind, namespace: string, name: string): Ref {
  return { key: `${kind.group}/${kind.kind}/${namespace}/${name}`, kind, namespace, name };
}

/** How a read reads: told the client and the object last read, if any. */
type Read = (get: GetObject, known: KubeObject | undefined) => Promise<KubeObject | undefined>;

/** The plain read: the whole object. */
const readWhole =
  (ref: Ref): Read =>
  (get) =>
    get(ref.kind, ref.namespace, ref.name);

/**
 * A `fresh` read with a copy at hand (settled, however old) and a client that reads metadata alone reads that first:
 * the same uid and resourceVersion are the very object as it is now (the apiserver changes the resourceVersion on
 * every write), so the copy is answered; else the object is read whole. Issue 46: a 1.5 MiB runtime read and parsed
 * whole on every TrainJob CREATE held the event loop every tenant's reviews share.
 */
const readUnlessUnchanged =
  (ref: Ref): Read =>
  (get, known) => {
    const version = known && versionOf(known);
    if (!get.metadata || !version) return get(ref.kind, ref.namespace, ref.name);
    return get
      .metadata(ref.kind, ref.namespace, ref.name)
      .then((meta) => (meta === undefined ? undefined : versionOf(meta) === version ? known : get(ref.kind, ref.namespace, ref.name)));
  };

/** A read's answer: its entry settles, and the key's newer read in flight with no copy gets it (`Entry.known`). */
function settle(entry: Entry, job: KubeObject | undefined, current: Entry | undefined): void {
  entry.settled = { job };
  delete entry.known;
  if (job && current && current !== entry && !current.settled && !current.known) current.known = job;
}

/** The client, set up on first use; one that failed to load is tried again on the next read. */
function lazyClient(getObject: () => Promise<GetObject>): () => Promise<GetObject> {
  let client: Promise<GetObject> | undefined;
  return () =>
    (client ??= getObject().catch((err: unknown) => {
      client = undefined;
      throw err;
    }));
}

/** A cached, single-flight job reader over `getObject` (the apiserver's unless a test passes its own). */
export function cachedJobReader(getObject: () => Promise<GetObject>, opts: JobReaderOptions): WarmJobReader {
  const now = opts.now ?? Date.now;
  const max = opts.maxEntries ?? 10_000;
  const refreshAfter = opts.refreshAfterMs ?? opts.ttlMs / 2;
  const cache = new Map<string, Entry>();
  const load = lazyClient(getObject);
  /** The key's entry and its age (Infinity: none). */
  const lookup = (key: string): { hit: Entry | undefined; age: number } => {
    const hit = cache.get(key);
    return { hit, age: hit ? now() - hit.at : Infinity };
  };
  return {
    ...(opts.observe ? { observeLookup: opts.observe } : {}),
    warm: () =>
      load().then(
        () => undefined,
        () => undefined,
      ),
    peek(kind, namespace, name) {
      const ref = refOf(kind, namespace, name);
      const { hit, age } = lookup(ref.key);
      if (!hit?.settled || age >= opts.ttlMs) return null;
      refreshAhead(ref, hit, age);
      return hit.settled.job;
    },
    refreshing(kind, namespace, name) {
      const { hit, age } = lookup(refOf(kind, namespace, name).key);
      return hit?.next !== undefined && age < opts.ttlMs;
    },
    get(kind, namespace, name) {
      const ref = refOf(kind, namespace, name);
      const { hit, age } = lookup(ref.key);
      if (hit && age < opts.ttlMs) {
        refreshAhead(ref, hit, age);
        return hit.value;
      }
      // Expired while its re-read was in flight: wait on that read rather than start another (single flight).
      if (hit?.next) return install(ref.key, hit.next).value;
      return fetch(ref, readWhole(ref));
    },
    // Never shares a read begun before the caller's `since` (it may have started before the change being checked), a
    // background re-read included; one begun after it, in flight or done, answers.
    fresh(kind, namespace, name, since) {
      const ref = refOf(kind, namespace, name);
      const current = since === undefined ? undefined : cache.get(ref.key);
      if (current && current.began > since!) return current.value;
      return fetch(ref, readUnlessUnchanged(ref));
    },
    began: () => performance.now(),
  };

  /** One read, cached from now on (failures are not); `read` is told the object last read, if any. */
  function fetch(ref: Ref, read: Read): Promise<KubeObject | undefined> {
    const before = cache.get(ref.key);
    const known = before?.settled ? before.settled.job : before?.known;
    return install(ref.key, begin(ref.key, known, read)).value;
  }

  /**
   * Refresh-ahead: a settled copy read at `age` past the refresh point, with no re-read of it in flight, has its job
   * re-read in the background. The re-read replaces the copy only if the copy is still the key's entry: a `fresh`
   * read begun since is newer, and an evicted key stays evicted. A failure just clears the way for the next try:
   * the copy keeps its own `at`, so it still expires on time.
   */
  function refreshAhead(ref: Ref, hit: Entry, age: number): void {
    if (!hit.settled || hit.next || age < refreshAfter) return;
    const next = begin(ref.key, hit.settled.job, readWhole(ref));
    hit.next = next;
    next.value.then(
      () => {
        delete hit.next;
        if (cache.get(ref.key) === hit) install(ref.key, next);
      },
      () => delete hit.next, // handled here: a background read's failure is no one's to report
    );
  }

  /**
   * An entry for a read begun now, not yet in the cache. `at` is when the read began, not when it answered: the
   * object may have changed any time after the request left, so the copy's age (and the TTL) count from then.
   */
  function begin(key: string, known: KubeObject | undefined, read: Read): Entry {
    const value = load().then((get) => read(get, known));
    const entry: Entry = { at: now(), began: performance.now(), value, ...(known ? { known } : {}) };
    value.then(
      (job) => settle(entry, job, cache.get(key)),
      () => cache.get(key) === entry && cache.delete(key), // failures are not cached
    );
    return entry;
  }

  /** Makes `entry` the key's (the newest, last to be evicted), dropping the oldest key past `maxEntries`. */
  function install(key: string, entry: Entry): Entry {
    cache.delete(key);
    cache.set(key, entry);
    if (cache.size > max) cache.delete(cache.keys().next().value!);
    return entry;
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
