/**
 * @module
 * Informers whose caches hold trimmed objects, for the resident reconciler (`src/run/watch.ts`).
 *
 * client-node's `makeInformer` keeps every object as the apiserver sent it and lists in one request: at 50,000
 * pods that is one response of hundreds of megabytes and a cache of full pods (managedFields, every env var and
 * volume). Here the same `ListWatch` (its relist on 410, its add/update/delete events, its cache) is fed trimmed
 * objects instead:
 *
 * - the LIST is paged (`limit` + `continue`, as client-go's reflector pages its initial list) and each page is
 *   trimmed before the next is read, so the full objects of one page at most are alive at once; or, for objects
 *   that may be large (`streamList`: jobs), a watch-list, so one object at most is;
 * - every watch event's object is trimmed before the cache sees it (a `Watch` subclass wraps the callback);
 * - the trimmed object keeps `metadata.resourceVersion`, which `ListWatch` reads to resume the watch and to tell
 *   an update from a repeat;
 * - an index by controller uid (optional): a job's pods or Services without scanning its namespace;
 * - `reread` and `retrim`, for a trim that depends on the namespace's scope (`./projection.ts`).
 *
 * Written here because client-node offers no transform hook (client-go's `SetTransform`); the cache and the
 * watch protocol stay client-node's.
 */
import type { KubeConfig, KubernetesListObject, KubernetesObject, ListWatch } from "@kubernetes/client-node";
import { RequestTimeoutError } from "../core/errors.js";
import { RESIDENT_REQUEST_TIMEOUT_MS, statusOf, type kubeClient } from "./client.js";

type ClientModule = Awaited<ReturnType<typeof kubeClient>>["k8s"];

/** One page of a LIST as client-node returns it (`_continue` in its models, `continue` on the wire). */
export interface ListPage {
  items?: object[];
  metadata?: { resourceVersion?: string; _continue?: string; continue?: string };
}

export interface TrimmedInformerOptions<T extends KubernetesObject> {
  /** The watch path, e.g. `/api/v1/pods`. */
  path: string;
  /** Reads one page of the LIST from `cont` (undefined: the first). */
  page: (cont: string | undefined) => Promise<ListPage>;
  /** What the cache keeps of an object (its resourceVersion is added back). */
  trim: (o: object) => T;
  /** Index the cached objects by their controller's uid (`byController`). */
  indexByController?: boolean;
  /** Called with `path` as a relist starts (the watch's resourceVersion expired, 410): not for the first LIST, nor a kind still gone. */
  onRelist?: (path: string) => void;
  /**
   * List as a watch-list (`sendInitialEvents`, Kubernetes 1.32+ by default): objects trimmed one by one as they
   * arrive instead of a page at a time, for objects that may be large (jobs); `page` where the server has none.
   */
  streamList?: boolean;
  /** Reads one page of the LIST of one namespace's objects (`reread`). */
  namespacePage?: (namespace: string, cont: string | undefined) => Promise<ListPage>;
  /** How long a watch may take to answer (its headers), in ms; default ./client.ts RESIDENT_REQUEST_TIMEOUT_MS, 0 for none. */
  firstResponseMs?: number;
}

export type TrimmedInformer<T extends KubernetesObject> = ListWatch<T> & {
  /** The path it lists and watches. */
  readonly watchPath: string;
  /** The cached objects whose controller reference has this uid. */
  byController(uid: string): T[];
  /**
   * Whether the cache holds a whole LIST (client-go's `HasSynced`): true once a LIST's items are in the cache,
   * and while a relist runs; false before the first, and after a 404 (the kind's CRD is gone) or a 403 (the LIST or
   * watch not granted) until a LIST succeeds or a watch opens again.
   */
  synced(): boolean;
  /**
   * Reads the objects of `namespace` again (a paged LIST, trimmed page by page) and puts in the cache those
   * whose cached object `stale` holds for, whatever their resourceVersion (ListWatch keeps an object of the
   * same version as it is); the objects put. Needs `namespacePage`. For a projection that depends on more
   * than the object (`./projection.ts`: a job whose namespace opted in, cached as its stub until now).
   */
  reread(namespace: string, stale: (cached: T) => boolean): Promise<T[]>;
  /** Trims the cached objects of `namespace` again (a namespace that opted out: its jobs to their stubs). */
  retrim(namespace: string): void;
};

/** A watch's timeout, at least (client-go's reflector: `minWatchTimeout` 5 min, times 1-2 at random). */
const WATCH_TIMEOUT_S = 300;

/** The annotation of the bookmark that ends a watch-list's initial events (k8s.io/apimachinery metav1.InitialEventsAnnotationKey). */
const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

const WATCHED_PHASES: ReadonlySet<string> = new Set(["ADDED", "MODIFIED", "DELETED"]);

const versionOf = (o: object): string | undefined => (o as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;

/** `trim(o)` with o's resourceVersion (which trimming functions drop: the planners never read it). */
function trimmed<T extends KubernetesObject>(o: object, trim: (o: object) => T): T {
  const t = trim(o);
  const rv = versionOf(o);
  if (rv !== undefined) t.metadata = { ...t.metadata, resourceVersion: rv };
  return t;
}

const controllerUid = (o: KubernetesObject): string | undefined => o.metadata?.ownerReferences?.find((r) => r.controller === true)?.uid;
const cacheKey = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}`;

/**
 * Whether the cache holds a whole LIST, as client-go's HasSynced: true once a LIST's items are in the cache
 * (ListWatch puts them there right before it opens the watch, so the watch's start says so, not the LIST's
 * return), and it stays true while a relist runs or after one failed for a passing reason: the cache keeps the
 * last LIST's objects, kept current by the watch until it broke. False again when the kind is gone or refused (a
 * 404 from a LIST or the watch: its CRD was removed; a 403: the Role lost its grant), until a LIST succeeds or a
 * watch opens again (resuming from the cache's resourceVersion, it brings the cache current): a cache that no
 * watch can keep current is not read as if it were.
 */
interface SyncState {
  hasSynced: boolean;
  gone: boolean;
  /** A LIST returned; the next watch's start puts its items in the cache. */
  fresh: boolean;
}

const noteGone = (state: SyncState, err: unknown): void => {
  const status = statusOf(err);
  if (status === 404 || status === 403) state.gone = true;
};

/** The deadline of a watch's first answer (and of a watch-list's events) in ms, or undefined for none. */
const deadlineMs = (opts: TrimmedInformerOptions<KubernetesObject>): number | undefined => {
  const ms = opts.firstResponseMs ?? RESIDENT_REQUEST_TIMEOUT_MS;
  return ms > 0 ? ms : undefined;
};

const timeoutError = (kc: KubeConfig, ms: number): RequestTimeoutError => new RequestTimeoutError(kc.getCurrentCluster()?.server ?? "(no server)", ms);

/** client-node's `Watch`, each watched object trimmed before the cache sees it, with bookmarks, a timeout and a deadline. */
function trimmingWatch<T extends KubernetesObject>(
  k8s: ClientModule,
  kc: KubeConfig,
  opts: TrimmedInformerOptions<T>,
  state: SyncState,
): InstanceType<ClientModule["Watch"]> {
  class TrimmingWatch extends k8s.Watch {
    override watch(
      path: string,
      queryParams: Record<string, string | number | boolean | undefined>,
      callback: (phase: string, apiObj: object, watchObj?: object) => void,
      done: (err: unknown) => void,
    ): Promise<AbortController> {
      if (state.fresh) [state.fresh, state.hasSynced, state.gone] = [false, true, false];
      // Bookmarks keep the resourceVersion current on a quiet watch, so a reconnect resumes instead of relisting.
      // A timeout of 5-10 minutes, as client-go's reflector asks: a watch that silently stopped delivering is
      // replaced (resuming from its resourceVersion) instead of leaving the cache behind for good.
      let late = false;
      let ended = false;
      const started = super.watch(
        path,
        { ...queryParams, allowWatchBookmarks: true, timeoutSeconds: Math.round(WATCH_TIMEOUT_S * (1 + Math.random())) },
        (phase, obj: object, wo?: object) => callback(phase, WATCHED_PHASES.has(phase) ? trimmed(obj, opts.trim) : obj, wo),
        (err: unknown) => {
          if (late) return;
          ended = true;
          // The watch says a refusal's status in `statusCode`; the callers, and noteGone, read `code`.
          const e = err === null || err === undefined ? err : withStatusCode(err);
          noteGone(state, e);
          done(e);
        },
      );
      // Open (a 200: client-node's watch resolves after its answer's status, having called `done` for any other):
      // the kind is served and readable again.
      void started.then(
        () => void (!ended && !late && (state.gone = false)),
        () => undefined,
      );
      const ms = deadlineMs(opts);
      if (ms === undefined) return started;
      return withDeadline(started, ms, () => {
        late = true;
        done(timeoutError(kc, ms));
      });
    }
  }
  return new TrimmingWatch(kc);
}

/**
 * client-node's Watch waits for the response with no deadline (its own timeout signal is overwritten in
 * @kubernetes/client-node src/watch.ts): a silent apiserver would stall an informer for good. Past the deadline
 * the watch ends through `expire` (which calls the watch's `done`: ListWatch's ERROR handlers restart it), never
 * by a rejection: ListWatch awaits this promise inside its own done handler, which nobody awaits, so a rejection
 * would be unhandled and end the process. A late answer is aborted and its own end ignored (its `done` would make
 * ListWatch stop the newer watch).
 */
function withDeadline(started: Promise<AbortController>, ms: number, expire: () => void): Promise<AbortController> {
  let late = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<AbortController>((resolve) => {
    timer = setTimeout(() => {
      late = true;
      expire();
      resolve(new AbortController());
    }, ms).unref();
  });
  void started.then(
    (c) => late && c.abort(),
    () => undefined,
  );
  return Promise.race([started, deadline]).finally(() => clearTimeout(timer));
}

type Listed<T> = { items: T[]; resourceVersion?: string };

/** The LIST page by page, each page trimmed before the next is read. */
async function pagedList<T extends KubernetesObject>(opts: TrimmedInformerOptions<T>): Promise<Listed<T>> {
  const items: T[] = [];
  let resourceVersion: string | undefined;
  let cont: string | undefined;
  do {
    const page = await opts.page(cont);
    resourceVersion ??= page.metadata?.resourceVersion;
    for (const o of page.items ?? []) items.push(trimmed(o, opts.trim));
    cont = page.metadata?._continue ?? page.metadata?.continue;
  } while (cont);
  return { items, ...(resourceVersion ? { resourceVersion } : {}) };
}

/**
 * The LIST as a watch-list (KEP-3157, client-go's reflector with WatchListClient): the apiserver sends every
 * object as an ADDED event, one line each, then a bookmark annotated `k8s.io/initial-events-end`, whose
 * resourceVersion the watch resumes from. Each object is trimmed as its line is parsed, so one object at a
 * time is alive whole, never a page of them.
 */
function streamList<T extends KubernetesObject>(k8s: ClientModule, kc: KubeConfig, opts: TrimmedInformerOptions<T>): Promise<Listed<T>> {
  return new Promise((resolve, reject) => {
    const items: T[] = [];
    let settled = false;
    let request: AbortController | undefined;
    const finish = (err: unknown, resourceVersion?: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request?.abort();
      if (err) reject(withStatusCode(err));
      else resolve({ items, ...(resourceVersion ? { resourceVersion } : {}) });
    };
    const query = {
      sendInitialEvents: true,
      resourceVersionMatch: "NotOlderThan",
      allowWatchBookmarks: true,
      timeoutSeconds: Math.round(WATCH_TIMEOUT_S * (1 + Math.random())),
    };
    // The same deadline as every watch's first answer (trimmingWatch), and then between two events until the
    // initial-events bookmark: a server that never answers, or stops half-way, fails the LIST (ListWatch's ERROR
    // handlers start it again) instead of holding the informer for the watch's whole timeout.
    const ms = deadlineMs(opts);
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      clearTimeout(timer);
      if (ms !== undefined && !settled) timer = setTimeout(() => finish(timeoutError(kc, ms)), ms).unref();
    };
    arm();
    const onEvent = (phase: string, obj: object): void => {
      if (settled) return;
      arm();
      const m = (obj as KubernetesObject).metadata;
      if (phase === "ADDED") items.push(trimmed(obj, opts.trim));
      else if (phase === "BOOKMARK" && m?.annotations?.[INITIAL_EVENTS_END] === "true") finish(undefined, m.resourceVersion);
      else if (phase === "ERROR") {
        const status = obj as { code?: number; message?: string };
        finish(Object.assign(new Error(`${opts.path}: ${status.message ?? "watch-list failed"}`), { code: status.code }));
      }
    };
    new k8s.Watch(kc)
      .watch(opts.path, query, onEvent, (err: unknown) => finish(err ?? new Error(`${opts.path}: the watch-list ended before its initial events did`)))
      .then(
        (c) => {
          request = c;
          if (settled) c.abort();
          else arm();
        },
        (err: unknown) => finish(err),
      );
  });
}

/**
 * client-node's Watch says the HTTP status in `statusCode`; the callers read `code` (./client.ts statusOf), as
 * for a LIST: a 404 is a kind not served, a 422 a server without watch-lists.
 */
function withStatusCode(err: unknown): Error {
  const code = (err as { statusCode?: unknown } | null)?.statusCode;
  return Object.assign(err instanceof Error ? err : new Error(String(err)), typeof code === "number" && statusOf(err) === undefined ? { code } : {});
}

/**
 * ListWatch's list function: a watch-list until the server refuses one (it has no WatchList: Kubernetes < 1.32,
 * or the feature gate off, and says so with 400 or 422, apimachinery's ValidateListOptions), else paged.
 */
function listFunction<T extends KubernetesObject>(
  k8s: ClientModule,
  kc: KubeConfig,
  opts: TrimmedInformerOptions<T>,
  state: SyncState,
): () => Promise<KubernetesListObject<T>> {
  let streaming = opts.streamList === true;
  return async () => {
    if (state.hasSynced && !state.gone) opts.onRelist?.(opts.path);
    let listed: Listed<T> | undefined;
    try {
      if (streaming) {
        listed = await streamList(k8s, kc, opts).catch((err: unknown) => {
          const code = statusOf(err);
          if (code !== 400 && code !== 422) throw err;
          streaming = false;
          return undefined;
        });
      }
      listed ??= await pagedList(opts);
    } catch (err) {
      noteGone(state, err);
      throw err;
    }
    state.fresh = true;
    const { items, resourceVersion } = listed;
    return { apiVersion: "v1", kind: "List", metadata: { ...(resourceVersion ? { resourceVersion } : {}) }, items };
  };
}

/** An index of the informer's cache by controller uid, kept by its events; `index` puts one object in it. */
function controllerIndex<T extends KubernetesObject>(informer: ListWatch<T>): { index: (o: T) => void; byController: (uid: string) => T[] } {
  // controller uid → cache keys, and each key's uid (an update may change the controller: adoption, release).
  const byUid = new Map<string, Set<string>>();
  const uidOf = new Map<string, string>();
  const unindex = (key: string): void => {
    const was = uidOf.get(key);
    if (was === undefined) return;
    uidOf.delete(key);
    const keys = byUid.get(was);
    keys?.delete(key);
    if (keys?.size === 0) byUid.delete(was);
  };
  const index = (o: T): void => {
    const key = cacheKey(o);
    unindex(key);
    const uid = controllerUid(o);
    if (uid === undefined) return;
    uidOf.set(key, uid);
    const keys = byUid.get(uid);
    if (keys) keys.add(key);
    else byUid.set(uid, new Set([key]));
  };
  // Registered first, so the index is current when any later handler of the same event runs.
  informer.on("add", index);
  informer.on("update", index);
  informer.on("delete", (o) => unindex(cacheKey(o)));
  const byController = (uid: string): T[] => {
    const out: T[] = [];
    for (const key of byUid.get(uid) ?? []) {
      const slash = key.indexOf("/");
      const o = informer.get(key.slice(slash + 1), key.slice(0, slash) || undefined);
      if (o) out.push(o);
    }
    return out;
  };
  return { index, byController };
}

/**
 * ListWatch's cache, by namespace then name. client-node's ListWatch (src/cache.ts) has no way to replace an
 * object by one of the same resourceVersion (its addOrUpdateObject keeps the one it has), which a projection
 * that changes with the namespace's scope needs; its map is reached here, and nowhere else, checked.
 */
function cacheOf<T extends KubernetesObject>(informer: ListWatch<T>): Map<string, Map<string, T>> {
  const objects: unknown = Reflect.get(informer, "objects");
  if (!(objects instanceof Map)) throw new Error("client-node's ListWatch keeps no `objects` map any more: see src/kube/informer.ts");
  return objects as Map<string, Map<string, T>>;
}

/** `reread` and `retrim` of a TrimmedInformer: objects put in the cache directly (and in the index, `index`). */
function projectionOps<T extends KubernetesObject>(
  informer: ListWatch<T>,
  opts: TrimmedInformerOptions<T>,
  index: ((o: T) => void) | undefined,
): Pick<TrimmedInformer<T>, "reread" | "retrim"> {
  const put = (o: T): void => {
    cacheOf(informer)
      .get(o.metadata?.namespace ?? "")
      ?.set(o.metadata?.name ?? "", o);
    index?.(o);
  };
  const reread = async (namespace: string, stale: (cached: T) => boolean): Promise<T[]> => {
    if (!opts.namespacePage) throw new Error(`${opts.path}: no namespacePage to read namespace ${namespace} again`);
    const out: T[] = [];
    let cont: string | undefined;
    do {
      const page = await opts.namespacePage(namespace, cont);
      for (const o of page.items ?? []) {
        const name = (o as KubernetesObject).metadata?.name;
        const cached = name === undefined ? undefined : informer.get(name, namespace);
        // Only what the cache still holds, stale: an object deleted meanwhile stays deleted, and one the
        // watch has brought since (trimmed as it is now) is as new as this read.
        if (cached === undefined || !stale(cached)) continue;
        const t = trimmed(o, opts.trim);
        put(t);
        out.push(t);
      }
      cont = page.metadata?._continue ?? page.metadata?.continue;
    } while (cont);
    return out;
  };
  const retrim = (namespace: string): void => {
    for (const o of [...(cacheOf(informer).get(namespace)?.values() ?? [])]) put(trimmed(o, opts.trim));
  };
  return { reread, retrim };
}

/** A `ListWatch` over `opts.path` that caches `opts.trim`'s objects; not started (call `start()`). */
export function trimmedInformer<T extends KubernetesObject>(k8s: ClientModule, kc: KubeConfig, opts: TrimmedInformerOptions<T>): TrimmedInformer<T> {
  const state: SyncState = { hasSynced: false, gone: false, fresh: false };
  const informer = new k8s.ListWatch<T>(opts.path, trimmingWatch(k8s, kc, opts, state), listFunction(k8s, kc, opts, state), false);
  const indexed = opts.indexByController ? controllerIndex(informer) : undefined;
  const { reread, retrim } = projectionOps(informer, opts, indexed?.index);
  // Without the index, byController finds nothing (as before: nothing was ever indexed).
  const byController = indexed?.byController ?? ((): T[] => []);
  return Object.assign(informer, { byController, watchPath: opts.path, synced: () => state.hasSynced && !state.gone, reread, retrim });
}

/**
 * A job trimmed for the cache: without `metadata.managedFields` and kubectl's last-applied copy (often the
 * larger half of a job object); the spec and status the planners read are kept whole.
 */
export function slimJob(o: object): KubernetesObject {
  const { metadata, ...rest } = o as KubernetesObject & Record<string, unknown>;
  if (!metadata) return { ...rest };
  const { managedFields: _managed, annotations, ...meta } = metadata;
  const kept = annotations ? Object.entries(annotations).filter(([k]) => k !== "kubectl.kubernetes.io/last-applied-configuration") : [];
  return { ...rest, metadata: { ...meta, ...(kept.length > 0 ? { annotations: Object.fromEntries(kept) } : {}) } };
}
