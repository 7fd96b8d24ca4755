/**
 * @module
 * The resident reconciler (`quartermaster reconcile --watch`): every action with a clock acted on when it is due,
 * not at the next scheduled pass. For the kinds Quartermaster runs (`jobKinds[].controller`) it is their job
 * controller; for the operators' kinds, the finished-job hygiene (CleanPodPolicy at once, the TTL to the second).
 *
 * - Informers on every job kind, pods, Services and namespaces, holding trimmed objects (`../kube/informer.ts`: paged
 *   LISTs or watch-lists, trimmed watch events, pods as the planners read them, a job out of scope as its stub,
 *   `../kube/projection.ts`): a job's change queues the job; a pod's or
 *   Service's change queues the job named by its controller reference, and a job's own objects are found by an
 *   index on that reference. A kind whose CRD is not installed is looked for again every 30 s.
 * - An operator's job is synced for nothing until it finishes; then its CleanPodPolicy is applied, and it is
 *   queued again for the moment its TTL runs out.
 * - A work queue (`src/reconcile/queue.ts`: one worker per key at a time, failures retried with exponential
 *   backoff, delays for deadlines and TTLs) and `reconciler.concurrency` workers. Each key is one job's sync:
 *   for a kind Quartermaster runs, the pure decision (`src/reconcile/job-controller.ts`) over the cached job,
 *   pods and Services, applied by `src/run/job-controller.ts` (its active deadline and backoff included); for
 *   every kind, a finished job's CleanPodPolicy and TTL (`src/reconcile/finished.ts`).
 * - Expectations (`src/reconcile/expectations.ts`) shared by every sync and pass of the process: a cache
 *   that has not caught up with the controller's own creates never makes it create twice.
 * - One deletion budget (`src/reconcile/budget.ts`): `reconciler.maxDeletionsPerPass` per `resyncSeconds`
 *   for the syncs and full passes together; a sync whose deletes do not fit does what fits and is queued again
 *   for when the window turns.
 * - A full reconcile pass (`src/run/pass.ts`: adoption, release, the ledger, every kind) right after taking
 *   the lead and every `resyncSeconds` as a safety net; syncs wait while it runs.
 * - A Lease (`quartermaster-reconciler` in Quartermaster's namespace, the one `--once` passes take) so one
 *   instance acts: every instance keeps its caches warm, only the holder works the queue. It renews every
 *   fifth of `leaseSeconds`, acts only while its last renewal is younger than `leaseSeconds` by its own
 *   clock, and releases the Lease when it stops, so a standby takes over at once (or, after a crash, once
 *   the Lease has expired).
 *
 * Its parts, over one `WatchContext` (`./watch-context.ts`): the caches (`./watch-caches.ts`), one job's sync and
 * the workers (`./watch-sync.ts`), the Lease and the full passes (`./watch-lead.ts`).
 */
import { quartermasterControls } from "../policy/types.js";
import { Expectations } from "../reconcile/expectations.js";
import { DeletionBudget } from "../reconcile/budget.js";
import { WorkQueue } from "../reconcile/queue.js";
import { kubeClient } from "../kube/client.js";
import { restClient } from "../kube/rest.js";
import { connectCluster, plainListPage } from "../kube/cluster.js";
import { startBlocked } from "./blocked.js";
import { readingCaches, startCaches, watchCaches } from "./watch-caches.js";
import { PassLock, type WatchContext, type WatchOptions } from "./watch-context.js";
import { lead } from "./watch-lead.js";
import { startWorkers } from "./watch-sync.js";

export { LEASE_NAME } from "./watch-lead.js";
export type { WatchOptions } from "./watch-context.js";

export interface Watcher {
  /** Whether this instance holds the Lease and acts. */
  leading(): boolean;
  readonly stats: { syncs: number; retries: number; passes: number };
  /** Stops acting, waits for the work in flight, stops the informers and releases the Lease. */
  stop(): Promise<void>;
}

export async function startWatch(opts: WatchOptions): Promise<Watcher> {
  const { policy, log } = opts;
  const timeouts = opts.requestTimeoutMs === undefined ? {} : { requestTimeoutMs: opts.requestTimeoutMs };
  const { k8s, kc } = await kubeClient(opts.kubeconfig, timeouts);
  const ctx: WatchContext = {
    opts,
    policy,
    log,
    metrics: opts.metrics,
    now: opts.now ?? ((): Date => new Date()),
    // Every kind: the ones Quartermaster runs get the whole job controller, the operators' kinds their finished-job
    // hygiene (CleanPodPolicy, TTL) on time. A kind whose CRD is not installed waits (its informer retries).
    kinds: policy.jobKinds,
    controls: policy.jobKinds.map((k) => quartermasterControls(k)),
    cluster: await connectCluster(opts.kubeconfig, timeouts),
    queue: new WorkQueue(),
    expectations: new Expectations(),
    budget: new DeletionBudget(policy.reconciler.maxDeletionsPerPass, opts.resyncSeconds * 1000),
    lock: new PassLock(),
    stats: { syncs: 0, retries: 0, passes: 0 },
    deleting: new Map(),
    stopped: false,
  };
  const rest = await restClient(opts.kubeconfig, timeouts).catch(() => undefined);
  const caches = watchCaches(ctx, { k8s, kc, rest });
  const passReads = readingCaches(ctx.cluster, ctx.kinds, caches);
  await startCaches(caches);
  log.info({ kinds: ctx.kinds.map((k) => k.kind), holder: opts.holder }, "watch: caches synced");
  const leadership = await lead(ctx, caches, passReads, timeouts);
  const workers = startWorkers(ctx, caches, leadership.leading);
  ctx.metrics?.source({ queueDepth: () => ctx.queue.length, leading: leadership.leading });
  // Why each job is not running (issue 49): verdicts from the caches, Events on the jobs, metrics (./blocked.ts).
  const blocked = startBlocked({
    ...opts.blocked,
    k8s,
    kc,
    ...(rest ? { plainPage: (path: string) => plainListPage(rest, path), get: (path: string) => rest.get(path) } : {}),
    log,
    policy,
    now: ctx.now,
    leading: leadership.leading,
    jobs: caches.jobs,
    pods: caches.pods,
    inScope: (ns) => caches.inScope(ns).inScope,
    post: (ns, event) => ctx.cluster.createEvent(ns, event),
    ...(ctx.metrics ? { metrics: ctx.metrics.blocked } : {}),
  });
  return {
    leading: leadership.leading,
    stats: ctx.stats,
    async stop() {
      ctx.stopped = true;
      leadership.halt();
      ctx.queue.shutDown();
      await blocked.stop();
      await Promise.all(workers);
      await ctx.lock.write(() => Promise.resolve());
      await leadership.renewing();
      await Promise.all(caches.all.map((i) => i.stop().catch(() => undefined)));
      await leadership.release();
    },
  };
}
