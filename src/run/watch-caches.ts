/**
 * @module
 * The resident reconciler's caches (`./watch.ts`): informers on pods, Services, namespaces and every job kind,
 * holding trimmed objects (`../kube/informer.ts`, `../kube/projection.ts`); the namespaces' scope and its changes (a job
 * cached as its stub read again when its namespace opts in, trimmed to its stub when it opts out); the events
 * that queue a job; and the cluster as a full pass reads it from these caches (`readingCaches`).
 */
import type { Informer as ClientInformer, KubernetesObject, V1OwnerReference } from "@kubernetes/client-node";
import { asKubeObject } from "../core/boundary.js";
import { errorMessage } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import { namespaceScope, scopeIndex } from "../core/scope.js";
import type { JobKind } from "../policy/types.js";
import type { kubeClient } from "../kube/client.js";
import { JOB_PAGE_SIZE, PAGE_SIZE, plainListPage, slimNamespace, slimPod, slimService, type Cluster, type SharedParts } from "../kube/cluster.js";
import { slimJob, trimmedInformer, type ListPage, type TrimmedInformer } from "../kube/informer.js";
import { isJobStub, projectJob } from "../kube/projection.js";
import type { RestClient } from "../kube/rest.js";
import { restartOnError } from "./informer-restart.js";
import { keyOf, type WatchContext } from "./watch-context.js";

const VERBS = ["add", "update", "delete"] as const;

type Client = Awaited<ReturnType<typeof kubeClient>>;

/** The client-node module and config, the plain-JSON client where the kubeconfig allows: what the informers read through. */
export interface CacheClient {
  k8s: Client["k8s"];
  kc: Client["kc"];
  rest: RestClient | undefined;
}

export interface WatchCaches {
  pods: TrimmedInformer<KubeObject>;
  services: TrimmedInformer<KubeObject>;
  namespaces: TrimmedInformer<KubernetesObject>;
  /** One per kind, same index as `WatchContext.kinds`. */
  jobs: Array<TrimmedInformer<KubernetesObject>>;
  all: Array<TrimmedInformer<KubernetesObject>>;
  /** The scope of a namespace, as the namespaces' cache says now. */
  inScope(namespace: string): { inScope: boolean; why?: string };
  /** Reads the jobs of a namespace that opted in again (retried until it works, it opts out, or the watch stops). */
  reread(namespace: string): Promise<void>;
  /** The rereads running. */
  rereading(): Promise<unknown>;
}

/** The caches, not started (`startCaches`), their events wired to `ctx.queue`. */
export function watchCaches(ctx: WatchContext, client: CacheClient): WatchCaches {
  const base = baseInformers(ctx, client);
  const scope = namespaceScopeOf(ctx, base.namespaces);
  const jobs = jobInformers(ctx, client, scope.scoped);
  const rereads = jobRereads(ctx, jobs, scope.scoped);
  const caches: WatchCaches = {
    ...base,
    jobs,
    all: [base.pods, base.services, base.namespaces, ...jobs],
    inScope: scope.inScope,
    reread: rereads.reread,
    rereading: rereads.rereading,
  };
  trackScopeChanges(caches, scope.changed, rereads.reread);
  queueJobsOnEvents(ctx, caches);
  for (const inf of caches.all) restartOnError(inf, { log: ctx.log, prefix: "watch", stopped: () => ctx.stopped });
  return caches;
}

/** The namespaces first (the jobs' projection reads their scope), then every other cache. */
export async function startCaches(caches: WatchCaches): Promise<void> {
  await caches.namespaces.start();
  await Promise.all(caches.all.filter((i) => i !== caches.namespaces).map((i) => i.start()));
}

function baseInformers(ctx: WatchContext, { k8s, kc, rest }: CacheClient): Pick<WatchCaches, "pods" | "services" | "namespaces"> {
  const core = kc.makeApiClient(k8s.CoreV1Api);
  // The big LISTs as plain JSON where the kubeconfig allows (../kube/rest.ts; as the pass reads them, ../kube/cluster.ts):
  // client-node's typed models of 50,000 pods are garbage the process's peak memory pays for.
  const plainPage = (path: string) => plainListPage(rest!, path);
  // The parts trimmed pods share (src/kube/cluster.ts slimPod): one map for the process's cache.
  const sharedParts: SharedParts = new Map();
  const relisted = relistLogger(ctx);
  const pods = trimmedInformer(k8s, kc, {
    path: "/api/v1/pods",
    onRelist: relisted,
    page: rest ? plainPage("/api/v1/pods") : (cont) => core.listPodForAllNamespaces({ limit: PAGE_SIZE, _continue: cont }),
    trim: (o) => {
      if (sharedParts.size > 16_384) sharedParts.clear(); // a few entries per job: bounded, sharing starts over
      return slimPod(o, sharedParts);
    },
    indexByController: true,
  });
  const services = trimmedInformer(k8s, kc, {
    path: "/api/v1/services",
    onRelist: relisted,
    page: rest ? plainPage("/api/v1/services") : (cont) => core.listServiceForAllNamespaces({ limit: PAGE_SIZE, _continue: cont }),
    trim: slimService,
    indexByController: true,
  });
  const namespaces = trimmedInformer(k8s, kc, {
    path: "/api/v1/namespaces",
    onRelist: relisted,
    page: (cont) => core.listNamespace({ limit: PAGE_SIZE, _continue: cont }),
    trim: (o) => ({ metadata: { ...slimNamespace(o) } }),
  });
  return { pods, services, namespaces };
}

/**
 * A relist (the watch's resourceVersion expired, 410 Gone) is no error, but at 50,000 pods it is seconds of
 * LISTing: said, so it can be seen.
 */
const relistLogger =
  (ctx: WatchContext) =>
  (path: string): void =>
    ctx.log.info({ path }, "watch: listing again");

/** The scope of each namespace from the namespaces' cache, decided once per change of it (`changed`). */
function namespaceScopeOf(
  ctx: WatchContext,
  namespaces: TrimmedInformer<KubernetesObject>,
): { inScope: WatchCaches["inScope"]; scoped: (ns: string) => boolean; changed: () => void } {
  const scope = namespaceScope(ctx.opts.namespace);
  let verdict: ReturnType<typeof scopeIndex> | undefined;
  const inScope = (ns: string): { inScope: boolean; why?: string } => (verdict ??= scopeIndex(scope, namespaces.list().map(slimNamespace)))(ns);
  return { inScope, scoped: (ns) => inScope(ns).inScope, changed: () => (verdict = undefined) };
}

/**
 * A job out of scope is cached as its stub (../kube/projection.ts), decided as it arrives: the namespaces' cache is
 * synced before the jobs' first LIST, and a namespace that opts in later has its jobs read again.
 */
function jobInformers(ctx: WatchContext, { k8s, kc }: CacheClient, scoped: (ns: string) => boolean): Array<TrimmedInformer<KubernetesObject>> {
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const relisted = relistLogger(ctx);
  return ctx.kinds.map((k) =>
    trimmedInformer(k8s, kc, {
      path: `/apis/${k.group}/${k.version}/${k.plural}`,
      onRelist: relisted,
      page: async (cont) =>
        (await custom.listClusterCustomObject({ group: k.group, version: k.version, plural: k.plural, limit: JOB_PAGE_SIZE, _continue: cont })) as ListPage,
      namespacePage: async (namespace, cont) =>
        (await custom.listNamespacedCustomObject({
          group: k.group,
          version: k.version,
          plural: k.plural,
          namespace,
          limit: JOB_PAGE_SIZE,
          _continue: cont,
        })) as ListPage,
      trim: (o) => projectJob(o, scoped),
      // A job may be as large as etcd takes: listed one object at a time where the apiserver can.
      streamList: true,
    }),
  );
}

/** The jobs of a namespace that opted in, read again (one reread per namespace at a time); each job read queued. */
function jobRereads(
  ctx: WatchContext,
  jobs: ReadonlyArray<TrimmedInformer<KubernetesObject>>,
  scoped: (ns: string) => boolean,
): Pick<WatchCaches, "reread" | "rereading"> {
  const rereads = new Map<string, Promise<void>>();
  const reread = (ns: string): Promise<void> => {
    const running = rereads.get(ns);
    if (running) return running;
    const p = (async (): Promise<void> => {
      for (let attempt = 0; !ctx.stopped && scoped(ns); attempt++) {
        try {
          const read = await Promise.all(jobs.map((inf) => (inf.synced() ? inf.reread(ns, isJobStub) : Promise.resolve([]))));
          read.forEach((objs, i) => objs.forEach((o) => ctx.queue.add(keyOf(i, ns, o.metadata?.name))));
          return;
        } catch (err) {
          ctx.log.warn({ err: errorMessage(err), namespace: ns }, "watch: cannot read the jobs of a namespace that opted in; trying again");
          await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** attempt)).unref());
        }
      }
    })().finally(() => rereads.delete(ns));
    rereads.set(ns, p);
    return p;
  };
  return { reread, rereading: () => Promise.all(rereads.values()) };
}

/** Namespaces opting in and out: their cached jobs read again, or trimmed to their stubs. */
function trackScopeChanges(caches: WatchCaches, invalidate: () => void, reread: (ns: string) => Promise<void>): void {
  const wasInScope = new Set<string>();
  const scopeChanged = (o: KubernetesObject): void => {
    invalidate();
    const ns = o.metadata?.name;
    if (ns === undefined) return;
    const now = caches.inScope(ns).inScope;
    if (now === wasInScope.has(ns)) return;
    if (now) {
      wasInScope.add(ns);
      void reread(ns);
    } else {
      wasInScope.delete(ns);
      for (const inf of caches.jobs) inf.retrim(ns);
    }
  };
  for (const verb of VERBS) caches.namespaces.on(verb, scopeChanged);
}

/** The controller reference among an object's owners, if any. */
const controllerOf = (o: KubernetesObject): V1OwnerReference | undefined => (o.metadata?.ownerReferences ?? []).find((r) => r.controller === true);

/**
 * A job's change queues the job; a pod's or Service's change queues the job named by its controller reference.
 * A deleted object's delete in flight is forgotten (`WatchContext.deleting`).
 */
function queueJobsOnEvents(ctx: WatchContext, caches: WatchCaches): void {
  const { queue, kinds } = ctx;
  const { pods, services, jobs } = caches;
  jobs.forEach((inf, i) => {
    for (const verb of VERBS) inf.on(verb, (o) => queue.add(keyOf(i, o.metadata?.namespace, o.metadata?.name)));
  });
  const byOwner = (o: KubernetesObject): void => {
    const ref = controllerOf(o);
    if (!ref) return;
    const group = String(ref.apiVersion ?? "").split("/")[0];
    const i = kinds.findIndex((k) => k.kind === ref.kind && k.group === group);
    if (i >= 0) queue.add(keyOf(i, o.metadata?.namespace, ref.name));
  };
  const forgetDeleted = (o: KubernetesObject): void => void (o.metadata?.uid && ctx.deleting.delete(o.metadata.uid));
  pods.on("delete", forgetDeleted);
  services.on("delete", forgetDeleted);
  for (const inf of jobs) inf.on("delete", forgetDeleted);
  const dependents: ReadonlyArray<ClientInformer<KubernetesObject>> = [pods, services];
  for (const inf of dependents) for (const verb of VERBS) inf.on(verb, byOwner);
}

/** An informer that stops is started again: in 2 s, or every 30 s for a kind whose CRD is not installed (said once). */
/**
 * The cluster as the resident reconciler's full pass reads it: pods, Services, namespaces and jobs from the
 * informers' caches (the objects the syncs read, trimmed alike: a job out of scope as its stub), as client-go's controllers resync from their
 * informers; a second LIST of every pod beside the caches doubled the process's peak memory (bench/scale.ts).
 * During a relist the cache still holds the last LIST, kept current until its watch broke (seconds); a cache
 * that never held a whole LIST, or whose kind is gone (404), is read from the apiserver. Nodes, their Leases,
 * the ledger's ConfigMaps, DRA and Kueue are listed fresh each pass. Every write keeps its precondition (a
 * claim's fresh read of the job, a delete's uid, a ledger write's resourceVersion), so a cache seconds behind
 * costs a skipped write, not a wrong one; the ledger it writes is as of the cache, and the next pass's
 * corrects it.
 */
export function readingCaches(cluster: Cluster, kinds: readonly JobKind[], caches: WatchCaches): Cluster {
  const { pods, services, namespaces } = caches;
  const jobs = new Map(kinds.map((k, i) => [k, caches.jobs[i]!]));
  return {
    ...cluster,
    get calls() {
      return cluster.calls;
    },
    // The cache holds trimmed pods: a reader of whole ones (`whole`) is answered from the apiserver.
    listPods: async (selector, whole) =>
      selector === undefined && whole === undefined && pods.synced() ? [...pods.list()] : cluster.listPods(selector, whole),
    listServices: async (selector) => (selector === undefined && services.synced() ? [...services.list()] : cluster.listServices(selector)),
    listNamespaces: async () => (namespaces.synced() ? namespaces.list().map(slimNamespace) : cluster.listNamespaces()),
    listJobs: async (kind, project) => {
      const inf = jobs.get(kind);
      return inf?.synced() ? cachedJobs(cluster, caches, kind, inf) : cluster.listJobs(kind, project);
    },
  };
}

/**
 * The cached jobs as the planners read them: a stub in a namespace that has opted in since it was cached
 * (../kube/projection.ts) is read again first; one whose reread failed, fresh from the apiserver, one by one.
 */
async function cachedJobs(cluster: Cluster, caches: WatchCaches, kind: JobKind, inf: TrimmedInformer<KubernetesObject>): Promise<KubeObject[]> {
  const scoped = (ns: string): boolean => caches.inScope(ns).inScope;
  const pending = (): boolean => inf.list().some((o) => isJobStub(o) && scoped(o.metadata?.namespace ?? ""));
  if (pending()) await caches.rereading();
  const out: KubeObject[] = [];
  for (const o of inf.list()) {
    const { namespace = "", name = "" } = o.metadata ?? {};
    if (!isJobStub(o) || !scoped(namespace)) out.push(asKubeObject(o));
    else {
      const fresh = await cluster.getJob(kind, namespace, name);
      if (fresh) out.push(asKubeObject(slimJob(fresh)));
    }
  }
  return out;
}
