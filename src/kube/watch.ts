/**
 * @module
 * The resident reconciler (`quartermaster reconcile --watch`): every action with a clock acted on when it is due,
 * not at the next scheduled pass. For the kinds Quartermaster runs (`jobKinds[].controller`) it is their job
 * controller; for the operators' kinds, the finished-job hygiene (CleanPodPolicy at once, the TTL to the second).
 *
 * - Informers on every job kind, pods, Services and namespaces, holding trimmed objects (`./informer.ts`: paged
 *   LISTs or watch-lists, trimmed watch events, pods as the planners read them, a job out of scope as its stub,
 *   `./projection.ts`): a job's change queues the job; a pod's or
 *   Service's change queues the job named by its controller reference, and a job's own objects are found by an
 *   index on that reference. A kind whose CRD is not installed is looked for again every 30 s.
 * - An operator's job is synced for nothing until it finishes; then its CleanPodPolicy is applied, and it is
 *   queued again for the moment its TTL runs out.
 * - A work queue (`src/reconcile/queue.ts`: one worker per key at a time, failures retried with exponential
 *   backoff, delays for deadlines and TTLs) and `reconciler.concurrency` workers. Each key is one job's sync:
 *   for a kind Quartermaster runs, the pure decision (`src/reconcile/job-controller.ts`) over the cached job,
 *   pods and Services, applied by `src/kube/job-controller.ts` (its active deadline and backoff included); for
 *   every kind, a finished job's CleanPodPolicy and TTL (`src/reconcile/finished.ts`).
 * - Expectations (`src/reconcile/expectations.ts`) shared by every sync and pass of the process: a cache
 *   that has not caught up with the controller's own creates never makes it create twice.
 * - One deletion budget (`src/reconcile/budget.ts`): `reconciler.maxDeletionsPerPass` per `resyncSeconds`
 *   for the syncs and full passes together; a sync whose deletes do not fit does what fits and is queued again
 *   for when the window turns.
 * - A full reconcile pass (`src/kube/pass.ts`: adoption, release, the ledger, every kind) right after taking
 *   the lead and every `resyncSeconds` as a safety net; syncs wait while it runs.
 * - A Lease (`quartermaster-reconciler` in Quartermaster's namespace, the one `--once` passes take) so one
 *   instance acts: every instance keeps its caches warm, only the holder works the queue. It renews every
 *   fifth of `leaseSeconds`, acts only while its last renewal is younger than `leaseSeconds` by its own
 *   clock, and releases the Lease when it stops, so a standby takes over at once (or, after a crash, once
 *   the Lease has expired).
 */
import type { Informer as ClientInformer, KubernetesObject, V1OwnerReference } from "@kubernetes/client-node";
import type { Logger } from "pino";
import { asKubeObject } from "../core/boundary.js";
import { errorMessage } from "../core/errors.js";
import { quartermasterControls, type JobKind, type Policy } from "../policy/types.js";
import { Expectations } from "../reconcile/expectations.js";
import { DeletionBudget } from "../reconcile/budget.js";
import { finishedAt, planFinishedJob, readRunPolicy, type DeleteAction } from "../reconcile/finished.js";
import type { KubeObject } from "../core/kube.js";
import { decideJob } from "../reconcile/job-controller.js";
import { capControllerDeletes, managedElsewhere, type ControllerPlan } from "../reconcile/plan.js";
import { WorkQueue } from "../reconcile/queue.js";
import { namespaceScope, scopeIndex } from "../core/scope.js";
import { objectWrite, type SyncResult, type WatchMetrics } from "../reconcile/metrics.js";
import { kubeClient, statusOf } from "./client.js";
import { restClient } from "./rest.js";
import { connectCluster, JOB_PAGE_SIZE, PAGE_SIZE, plainListPage, slimNamespace, slimPod, slimService, type Cluster, type SharedParts } from "./cluster.js";
import { slimJob, trimmedInformer, type ListPage, type TrimmedInformer } from "./informer.js";
import { applyJobControllers } from "./job-controller.js";
import { acquireLease, type HeldLease } from "./lease.js";
import { runPass } from "./pass.js";
import { isJobStub, projectJob } from "./projection.js";

export const LEASE_NAME = "quartermaster-reconciler";

/** How long after a TTL runs out its job is synced (the TTL ends strictly after completionTime + ttl). */
const TTL_SLACK_MS = 250;

export interface WatchOptions {
  kubeconfig?: string;
  /** The deadline of each request (a LIST page, a Lease write) in ms; default ./client.ts RESIDENT_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
  policy: Policy;
  log: Logger;
  /** Quartermaster's namespace (its Lease and ledger). */
  namespace: string;
  /** This instance's identity in the Lease. */
  holder: string;
  leaseSeconds: number;
  /** Seconds between full passes while leading. */
  resyncSeconds: number;
  now?: () => Date;
  /** Prometheus metrics (`createWatchMetrics`): queue depth, syncs, durations, the Lease, objects written. */
  metrics?: WatchMetrics;
}

export interface Watcher {
  /** Whether this instance holds the Lease and acts. */
  leading(): boolean;
  readonly stats: { syncs: number; retries: number; passes: number };
  /** Stops acting, waits for the work in flight, stops the informers and releases the Lease. */
  stop(): Promise<void>;
}

const VERBS = ["add", "update", "delete"] as const;

/** The controller reference among an object's owners, if any. */
const controllerOf = (o: KubernetesObject): V1OwnerReference | undefined => (o.metadata?.ownerReferences ?? []).find((r) => r.controller === true);

/** Syncs share it; a full pass takes it alone (so the two never decide on the same job at once). */
class PassLock {
  private readers = 0;
  private writing: Promise<void> | undefined;
  private drained: (() => void) | undefined;

  async read<T>(fn: () => Promise<T>): Promise<T> {
    while (this.writing) await this.writing;
    this.readers++;
    try {
      return await fn();
    } finally {
      if (--this.readers === 0) this.drained?.();
    }
  }

  async write<T>(fn: () => Promise<T>): Promise<T> {
    while (this.writing) await this.writing;
    let release!: () => void;
    this.writing = new Promise((r) => (release = r));
    try {
      while (this.readers > 0) await new Promise<void>((r) => (this.drained = r));
      return await fn();
    } finally {
      this.writing = undefined;
      release();
    }
  }
}

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
function readingCaches(
  cluster: Cluster,
  caches: {
    pods: TrimmedInformer<KubeObject>;
    services: TrimmedInformer<KubeObject>;
    namespaces: TrimmedInformer<KubernetesObject>;
    jobs: ReadonlyMap<JobKind, TrimmedInformer<KubernetesObject>>;
  },
  scope: { inScope: (namespace: string) => boolean; rereading: () => Promise<unknown> },
): Cluster {
  const { pods, services, namespaces, jobs } = caches;
  /**
   * The cached jobs as the planners read them: a stub in a namespace that has opted in since it was cached
   * (./projection.ts) is read again first; one whose reread failed, fresh from the apiserver, one by one.
   */
  const cachedJobs = async (kind: JobKind, inf: TrimmedInformer<KubernetesObject>): Promise<KubeObject[]> => {
    const pending = (): boolean => inf.list().some((o) => isJobStub(o) && scope.inScope(o.metadata?.namespace ?? ""));
    if (pending()) await scope.rereading();
    const out: KubeObject[] = [];
    for (const o of inf.list()) {
      const { namespace = "", name = "" } = o.metadata ?? {};
      if (!isJobStub(o) || !scope.inScope(namespace)) out.push(asKubeObject(o));
      else {
        const fresh = await cluster.getJob(kind, namespace, name);
        if (fresh) out.push(asKubeObject(slimJob(fresh)));
      }
    }
    return out;
  };
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
      return inf?.synced() ? cachedJobs(kind, inf) : cluster.listJobs(kind, project);
    },
  };
}

// An object without a namespace or name (never from the apiserver) keys as "undefined", as it always has.
const keyOf = (kindIndex: number, namespace: string | undefined, name: string | undefined): string => `${kindIndex}\0${namespace}\0${name}`;

export async function startWatch(opts: WatchOptions): Promise<Watcher> {
  const { policy, log, metrics } = opts;
  const now = opts.now ?? ((): Date => new Date());
  // Every kind: the ones Quartermaster runs get the whole job controller, the operators' kinds their finished-job
  // hygiene (CleanPodPolicy, TTL) on time. A kind whose CRD is not installed waits (its informer retries).
  const kinds = policy.jobKinds;
  const controls = kinds.map((k) => quartermasterControls(k));
  // The parts trimmed pods share (src/kube/cluster.ts slimPod): one map for the process's cache.
  const sharedParts: SharedParts = new Map();
  const timeouts = opts.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: opts.requestTimeoutMs };
  const { k8s, kc } = await kubeClient(opts.kubeconfig, timeouts);
  const cluster: Cluster = await connectCluster(opts.kubeconfig, timeouts);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  // The big LISTs as plain JSON where the kubeconfig allows (./rest.ts; as the pass reads them, ./cluster.ts):
  // client-node's typed models of 50,000 pods are garbage the process's peak memory pays for.
  const rest = await restClient(opts.kubeconfig, timeouts).catch(() => undefined);
  const plainPage = (path: string) => plainListPage(rest!, path);
  const queue = new WorkQueue();
  const expectations = new Expectations();
  const budget = new DeletionBudget(policy.reconciler.maxDeletionsPerPass, opts.resyncSeconds * 1000);
  const lock = new PassLock();
  const stats = { syncs: 0, retries: 0, passes: 0 };
  const scope = namespaceScope(opts.namespace);
  let stopped = false;
  // Deletes sent whose object the caches still hold, by uid: a sync before the informer sees the deletion (its
  // pods' and the garbage collector's events queue the job at once) must not send, and count, them again.
  const deleting = new Map<string, number>();
  const DELETING_MS = 30_000;
  const notYetDeleted = (d: DeleteAction, atMs: number): boolean => {
    const sent = deleting.get(d.uid);
    if (sent === undefined) return true;
    if (atMs - sent < DELETING_MS) return false;
    deleting.delete(d.uid); // the informer never said: look again
    return true;
  };
  const forgetDeleted = (o: KubernetesObject): void => void (o.metadata?.uid && deleting.delete(o.metadata.uid));

  // A relist (the watch's resourceVersion expired, 410 Gone) is no error, but at 50,000 pods it is seconds of
  // LISTing: said, so it can be seen.
  const relisted = (path: string): void => log.info({ path }, "watch: listing again");
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
  let verdict: ReturnType<typeof scopeIndex> | undefined;
  const inScope = (ns: string): { inScope: boolean; why?: string } => (verdict ??= scopeIndex(scope, namespaces.list().map(slimNamespace)))(ns);
  const scoped = (ns: string): boolean => inScope(ns).inScope;
  // A job out of scope is cached as its stub (./projection.ts), decided as it arrives: the namespaces' cache
  // is synced before the jobs' first LIST, and a namespace that opts in later has its jobs read again.
  const jobs = kinds.map((k) =>
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
  const all = [pods, services, namespaces, ...jobs];

  // --- Namespaces opting in and out: their cached jobs read again, or trimmed to their stubs.
  const wasInScope = new Set<string>();
  const rereads = new Map<string, Promise<void>>();
  const reread = (ns: string): Promise<void> => {
    const running = rereads.get(ns);
    if (running) return running;
    const p = (async (): Promise<void> => {
      for (let attempt = 0; !stopped && scoped(ns); attempt++) {
        try {
          const read = await Promise.all(jobs.map((inf) => (inf.synced() ? inf.reread(ns, isJobStub) : Promise.resolve([]))));
          read.forEach((objs, i) => objs.forEach((o) => queue.add(keyOf(i, ns, o.metadata?.name))));
          return;
        } catch (err) {
          log.warn({ err: errorMessage(err), namespace: ns }, "watch: cannot read the jobs of a namespace that opted in; trying again");
          await new Promise((r) => setTimeout(r, Math.min(30_000, 1000 * 2 ** attempt)).unref());
        }
      }
    })().finally(() => rereads.delete(ns));
    rereads.set(ns, p);
    return p;
  };
  const scopeChanged = (o: KubernetesObject): void => {
    verdict = undefined;
    const ns = o.metadata?.name;
    if (ns === undefined) return;
    const now = scoped(ns);
    if (now === wasInScope.has(ns)) return;
    if (now) {
      wasInScope.add(ns);
      void reread(ns);
    } else {
      wasInScope.delete(ns);
      for (const inf of jobs) inf.retrim(ns);
    }
  };
  for (const verb of VERBS) namespaces.on(verb, scopeChanged);
  const passReads = readingCaches(
    cluster,
    { pods, services, namespaces, jobs: new Map(kinds.map((k, i) => [k, jobs[i]!])) },
    { inScope: scoped, rereading: () => Promise.all(rereads.values()) },
  );

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
  pods.on("delete", forgetDeleted);
  services.on("delete", forgetDeleted);
  for (const inf of jobs) inf.on("delete", forgetDeleted);
  const dependents: ReadonlyArray<ClientInformer<KubernetesObject>> = [pods, services];
  for (const inf of dependents) for (const verb of VERBS) inf.on(verb, byOwner);
  for (const inf of all) {
    let absent = false;
    inf.on("error", (err: unknown) => {
      if (stopped) return;
      // A job kind whose CRD is not installed: looked for again every 30 s, said once.
      const missing = statusOf(err) === 404;
      if (!missing) log.warn({ err: errorMessage(err) }, "watch: informer stopped; restarting in 2 s");
      else if (!absent) log.info({ path: inf.watchPath }, "watch: not served (CRD not installed?); looking again every 30 s");
      absent = missing;
      setTimeout(
        () => void (stopped ? undefined : inf.start().catch((e: unknown) => log.warn({ err: errorMessage(e) }, "watch: informer restart failed"))),
        missing ? 30_000 : 2000,
      ).unref();
    });
  }
  // The namespaces first: the jobs' projection reads their scope.
  await namespaces.start();
  await Promise.all(all.filter((i) => i !== namespaces).map((i) => i.start()));
  log.info({ kinds: kinds.map((k) => k.kind), holder: opts.holder }, "watch: caches synced");

  // --- The Lease.
  let held: HeldLease | undefined;
  let renewedAt = 0;
  const leading = (): boolean => held !== undefined && now().getTime() - renewedAt < opts.leaseSeconds * 1000;
  const enqueueAll = (): void => jobs.forEach((inf, i) => inf.list().forEach((o) => queue.add(keyOf(i, o.metadata?.namespace, o.metadata?.name))));
  let passTimer: ReturnType<typeof setTimeout> | undefined;
  let passing = false;
  const fullPass = async (): Promise<void> => {
    // One pass at a time: taking the Lease again while one runs (it lapsed meanwhile) starts no second chain.
    if (stopped || !leading() || passing) return;
    passing = true;
    try {
      await lock.write(async () => {
        stats.passes++;
        const started = performance.now();
        // A delete whose event the informer missed, of a job never synced again, is forgotten here at the latest.
        for (const [uid, sent] of deleting) if (now().getTime() - sent >= DELETING_MS) deleting.delete(uid);
        try {
          const report = await runPass({
            cluster: passReads,
            policy,
            log,
            now,
            dryRun: false,
            namespace: opts.namespace,
            expectations,
            maxDeletions: budget.available(now()),
          });
          budget.take(report.plan.actions.length + report.plan.controller.reduce((n, p) => n + p.decision.deletes.length, 0), now());
          for (const a of report.applied) countWrite(a);
          metrics?.pass(report.failed.length > 0 ? "failed" : "ok", (performance.now() - started) / 1000);
        } catch (err) {
          metrics?.pass("error", (performance.now() - started) / 1000);
          throw err;
        }
      });
    } catch (err) {
      log.error({ err: errorMessage(err) }, "watch: full pass failed");
    } finally {
      passing = false;
    }
    if (!stopped) (passTimer = setTimeout(() => void fullPass(), opts.resyncSeconds * 1000)).unref();
  };
  const renew = async (): Promise<void> => {
    // Validity counts from before the call: the renewTime written is no later than this, so this instance
    // stops acting no later than a standby (reading that renewTime) may take over.
    const asked = now().getTime();
    try {
      const r = await acquireLease({
        kubeconfig: opts.kubeconfig,
        ...timeouts,
        namespace: opts.namespace,
        name: LEASE_NAME,
        holder: opts.holder,
        durationSeconds: opts.leaseSeconds,
        now,
      });
      if ("held" in r) {
        const was = leading();
        held = r.held;
        renewedAt = asked;
        if (!was) {
          log.info({ holder: opts.holder }, "watch: took the lease; acting");
          if (passTimer) clearTimeout(passTimer);
          void fullPass();
          enqueueAll();
        }
      } else {
        if (held) log.warn({ holder: r.busy.holder }, "watch: lost the lease; standing by");
        held = undefined;
      }
    } catch (err) {
      log.warn({ err: errorMessage(err) }, "watch: could not renew the lease");
    }
  };
  await renew();
  const renewEvery = Math.max(1000, (opts.leaseSeconds * 1000) / 5);
  let renewing: Promise<void> | undefined;
  const renewTimer = setInterval(() => {
    renewing ??= renew().finally(() => (renewing = undefined));
  }, renewEvery);

  const countWrite = (action: string): void => {
    const w = objectWrite(action);
    if (w) metrics?.object(w.verb, w.kind);
  };

  // --- One job.
  /** The job controller's decision for a job of a kind Quartermaster runs. */
  const controllerPlan = (job: KubeObject, kind: JobKind, uid: string, own: { pods: KubeObject[]; services: KubeObject[] }, at: Date): ControllerPlan => {
    const inFlight = expectations.observeJob(uid, own.pods, own.services, at);
    const decision = decideJob({
      job,
      kind,
      pods: own.pods,
      services: own.services,
      now: at,
      clusterDomain: policy.clusterSpec.clusterDomain,
      allowedTemplates: policy.reconciler.allowedTemplates,
      inFlight,
    });
    for (const p of decision.problems) log.warn({ problem: p }, "watch: cannot act");
    const { namespace, name, resourceVersion: rv } = job.metadata as { namespace: string; name: string; resourceVersion?: string };
    return { kind, namespace, name, uid, ...(rv ? { resourceVersion: rv } : {}), decision };
  };
  /** Sends the deletes (uid preconditions); whether any failed. */
  const deleteAll = async (actions: readonly DeleteAction[]): Promise<boolean> => {
    let failed = false;
    for (const d of actions) {
      try {
        if ((await cluster.delete(d)) === "deleted") metrics?.object("delete", d.kind);
        log.info({ job: d.job, action: `delete ${d.kind}`, namespace: d.namespace, name: d.name, reason: d.reason }, "watch: delete");
      } catch (err) {
        failed = true;
        log.error({ err: errorMessage(err), action: `delete ${d.kind} ${d.namespace}/${d.name}` }, "watch: delete failed");
      }
    }
    return failed;
  };
  /** A finished job with a TTL is synced again just after it runs out (strictly after, as upstream). */
  const requeueAtTtl = (key: string, job: KubeObject, kind: JobKind, completionTime: Date | undefined, at: Date): void => {
    const rp = readRunPolicy(job, kind);
    if (!completionTime || "problems" in rp || rp.ttl === undefined || rp.suspended) return;
    // Only while it is ahead: once it has run out, the delete was planned now (or deferred, and queued for then).
    const ms = completionTime.getTime() + rp.ttl * 1000 - at.getTime();
    if (ms >= 0) queue.addAfter(key, ms + TTL_SLACK_MS);
  };

  const sync = async (key: string): Promise<SyncResult> => {
    const [i, ns, name] = key.split("\0") as [string, string, string];
    const kind: JobKind = kinds[Number(i)]!;
    const runs = controls[Number(i)]!;
    const raw = jobs[Number(i)]!.get(name, ns);
    if (!raw) return "ok";
    const job = asKubeObject(raw);
    if (!inScope(ns).inScope) return "ok";
    // Its namespace opted in since the job was cached as its stub: synced once it has been read again.
    if (isJobStub(raw)) {
      void reread(ns);
      queue.addAfter(key, 1000);
      return "ok";
    }
    if (managedElsewhere(job, kind)) return "ok";
    const { finished, completionTime } = finishedAt(job, kind);
    // An operator's job has nothing on a clock here until it finishes (its pods' every change lands here).
    if (!runs && !finished) return "ok";
    const uid = String((job.metadata as { uid?: string }).uid);
    const ownPods = pods.byController(uid);
    const ownServices = services.byController(uid);
    const at = now();
    const controller = runs ? [controllerPlan(job, kind, uid, { pods: ownPods, services: ownServices }, at)] : [];
    // The controller's deletes and a finished job's (CleanPodPolicy, TTL, as a pass does them) share the
    // process's deletion budget; what does not fit waits for the window to turn.
    const fin = planFinishedJob({ job, kind, pods: ownPods, services: ownServices, now: at, policy });
    for (const p of fin.problems) log.warn({ problem: p }, "watch: cannot act");
    const pending = fin.actions.filter((d) => notYetDeleted(d, at.getTime()));
    const capped = capControllerDeletes(pending, controller, budget.available(at));
    budget.take(capped.actions.length + capped.controller.reduce((n, p) => n + p.decision.deletes.length, 0), at);
    if (capped.deferred.length > 0) {
      log.info({ job: `${kind.kind} ${ns}/${name}`, deferred: capped.deferred.length }, "watch: deletion budget spent; the rest waits");
      queue.addAfter(key, budget.msUntilRefill(at) + 100);
    }
    let retry = false;
    if (runs) {
      const report = await applyJobControllers({ cluster, plans: capped.controller, expectations, now, log, width: 1, events: policy.reconciler.events });
      for (const a of report.applied) countWrite(a);
      retry = report.failed.length > 0 || report.skipped.some((s) => s.why.includes("changed since it was listed"));
      const requeueAfterMs = capped.controller[0]!.decision.requeueAfterMs;
      if (requeueAfterMs !== undefined) queue.addAfter(key, requeueAfterMs + 100);
    }
    for (const d of capped.actions) deleting.set(d.uid, at.getTime());
    if (await deleteAll(capped.actions)) retry = true;
    if (finished) requeueAtTtl(key, job, kind, completionTime, at);
    if (retry) {
      stats.retries++;
      queue.addRateLimited(key);
      return "requeued";
    }
    queue.forget(key);
    return "ok";
  };

  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        if (leading()) {
          stats.syncs++;
          const started = performance.now();
          try {
            // The sync first: `metrics?.sync(await …)` would skip it, arguments and all, without metrics.
            const result = await lock.read(() => sync(key));
            metrics?.sync(result, (performance.now() - started) / 1000);
          } catch (err) {
            metrics?.sync("error", (performance.now() - started) / 1000);
            throw err;
          }
        }
      } catch (err) {
        log.error({ err: errorMessage(err), key: key.replaceAll("\0", "/") }, "watch: sync failed");
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
    }
  };
  const workers = Array.from({ length: policy.reconciler.concurrency }, worker);
  metrics?.source({ queueDepth: () => queue.length, leading });

  return {
    leading,
    stats,
    async stop() {
      stopped = true;
      clearInterval(renewTimer);
      if (passTimer) clearTimeout(passTimer);
      queue.shutDown();
      await Promise.all(workers);
      await lock.write(() => Promise.resolve());
      await renewing;
      await Promise.all(all.map((i) => i.stop().catch(() => undefined)));
      if (held) await held.release().catch((err: unknown) => log.warn({ err: errorMessage(err) }, "watch: could not release the lease"));
      held = undefined;
    },
  };
}
