/**
 * @module
 * Informers whose caches hold trimmed objects, for the resident reconciler (`src/kube/watch.ts`).
 *
 * client-node's `makeInformer` keeps every object as the apiserver sent it and lists in one request: at 50,000
 * pods that is one response of hundreds of megabytes and a cache of full pods (managedFields, every env var and
 * volume). Here the same `ListWatch` (its relist on 410, its add/update/delete events, its cache) is fed trimmed
 * objects instead:
 *
 * - the LIST is paged (`limit` + `continue`, as client-go's reflector pages its initial list) and each page is
 *   trimmed before the next is read, so the full objects of one page at most are alive at once;
 * - every watch event's object is trimmed before the cache sees it (a `Watch` subclass wraps the callback);
 * - the trimmed object keeps `metadata.resourceVersion`, which `ListWatch` reads to resume the watch and to tell
 *   an update from a repeat;
 * - an index by controller uid (optional): a job's pods or Services without scanning its namespace.
 *
 * Written here because client-node offers no transform hook (client-go's `SetTransform`); the cache and the
 * watch protocol stay client-node's.
 */
import type { KubeConfig, KubernetesListObject, KubernetesObject, ListWatch } from "@kubernetes/client-node";
import type { kubeClient } from "./client.js";

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
  /** Called as each LIST starts, with its number (1: the first; more: a relist, after a 410 or a restart). */
  onList?: (n: number) => void;
}

export type TrimmedInformer<T extends KubernetesObject> = ListWatch<T> & {
  /** The path it lists and watches. */
  readonly watchPath: string;
  /** The cached objects whose controller reference has this uid. */
  byController(uid: string): T[];
  /**
   * Whether the cache holds a whole LIST (client-go's `HasSynced`): true once a LIST succeeded, false again
   * while the last one failed (a 404: the kind's CRD is gone). Kept current by the watch in between.
   */
  synced(): boolean;
  /**
   * Resolves with `synced()` once no LIST is in flight (at once when none is), or after `ms` at the latest: a
   * relist (the watch's resourceVersion expired, 410) is waited for; a failed LIST is not.
   */
  whenSynced(ms: number): Promise<boolean>;
};

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

/** A `ListWatch` over `opts.path` that caches `opts.trim`'s objects; not started (call `start()`). */
export function trimmedInformer<T extends KubernetesObject>(k8s: ClientModule, kc: KubeConfig, opts: TrimmedInformerOptions<T>): TrimmedInformer<T> {
  const { trim } = opts;
  // The LIST's state: `listing` from its start; `synced` once ListWatch has put its items in the cache, which it
  // does right before it opens the watch (so the watch's start says so, not the LIST's return); `failed` when
  // it threw. `whenSynced` waiters hear of every change.
  let state: "listing" | "synced" | "failed" = "listing";
  let fresh = false;
  let lists = 0;
  const waiters = new Set<() => void>();
  const enter = (next: typeof state): void => {
    state = next;
    for (const w of [...waiters]) w();
  };
  class TrimmingWatch extends k8s.Watch {
    override watch(
      path: string,
      queryParams: Record<string, string | number | boolean | undefined>,
      callback: (phase: string, apiObj: object, watchObj?: object) => void,
      done: (err: unknown) => void,
    ): Promise<AbortController> {
      if (fresh) {
        fresh = false;
        enter("synced");
      }
      // Bookmarks keep the resourceVersion current on a quiet watch, so a reconnect resumes instead of relisting.
      return super.watch(
        path,
        { ...queryParams, allowWatchBookmarks: true },
        (phase, obj: object, wo?: object) => callback(phase, WATCHED_PHASES.has(phase) ? trimmed(obj, trim) : obj, wo),
        done,
      );
    }
  }
  const list = async (): Promise<KubernetesListObject<T>> => {
    const items: T[] = [];
    let resourceVersion: string | undefined;
    let cont: string | undefined;
    enter("listing");
    opts.onList?.(++lists);
    try {
      do {
        const page = await opts.page(cont);
        resourceVersion ??= page.metadata?.resourceVersion;
        for (const o of page.items ?? []) items.push(trimmed(o, trim));
        cont = page.metadata?._continue ?? page.metadata?.continue;
      } while (cont);
    } catch (err) {
      enter("failed");
      throw err;
    }
    fresh = true;
    return { apiVersion: "v1", kind: "List", metadata: { ...(resourceVersion ? { resourceVersion } : {}) }, items };
  };
  const informer = new k8s.ListWatch<T>(opts.path, new TrimmingWatch(kc), list, false);

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
  if (opts.indexByController) {
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
  }
  const byController = (uid: string): T[] => {
    const out: T[] = [];
    for (const key of byUid.get(uid) ?? []) {
      const slash = key.indexOf("/");
      const o = informer.get(key.slice(slash + 1), key.slice(0, slash) || undefined);
      if (o) out.push(o);
    }
    return out;
  };
  const whenSynced = (ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (state === "listing") return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(state === "synced");
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        resolve(state === "synced");
      }, ms).unref();
      waiters.add(check);
      check();
    });
  return Object.assign(informer, { byController, watchPath: opts.path, synced: () => state === "synced", whenSynced });
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
