/**
 * @module
 * One job's sync in the resident reconciler (`./watch.ts`), and the workers that run them off the queue: for a
 * kind Quartermaster runs, the job controller's decision (`src/reconcile/job-controller.ts`) over the cached
 * job, pods and Services, applied by `./job-controller.ts`; for every kind, a finished job's CleanPodPolicy and
 * TTL (`src/reconcile/finished.ts`); the deletes within the process's deletion budget.
 */
import { asKubeObject } from "../core/boundary.js";
import { errorMessage } from "../core/errors.js";
import type { KubeObject } from "../core/kube.js";
import type { JobKind } from "../policy/types.js";
import { finishedAt, planFinishedJob, readRunPolicy, type DeleteAction } from "../reconcile/finished.js";
import { decideJob } from "../reconcile/job-controller.js";
import type { SyncResult } from "../reconcile/metrics.js";
import { capControllerDeletes, managedElsewhere, type ControllerPlan } from "../reconcile/plan.js";
import { applyJobControllers } from "./job-controller.js";
import { isJobStub } from "../kube/projection.js";
import type { WatchCaches } from "./watch-caches.js";
import { countWrite, notYetDeleted, type WatchContext } from "./watch-context.js";

/** How long after a TTL runs out its job is synced (the TTL ends strictly after completionTime + ttl). */
const TTL_SLACK_MS = 250;

/** `reconciler.concurrency` workers taking keys off the queue, each key synced while this instance leads. */
export function startWorkers(ctx: WatchContext, caches: WatchCaches, leading: () => boolean): Array<Promise<void>> {
  return Array.from({ length: ctx.policy.reconciler.concurrency }, () => worker(ctx, caches, leading));
}

async function worker(ctx: WatchContext, caches: WatchCaches, leading: () => boolean): Promise<void> {
  const { queue, metrics } = ctx;
  for (;;) {
    const key = await queue.get();
    if (key === undefined) return;
    try {
      if (leading()) {
        ctx.stats.syncs++;
        const started = performance.now();
        try {
          // The sync first: `metrics?.sync(await …)` would skip it, arguments and all, without metrics.
          const result = await ctx.lock.read(() => sync(ctx, caches, key));
          metrics?.sync(result, (performance.now() - started) / 1000);
        } catch (err) {
          metrics?.sync("error", (performance.now() - started) / 1000);
          throw err;
        }
      }
    } catch (err) {
      ctx.log.error({ err: errorMessage(err), key: key.replaceAll("\0", "/") }, "watch: sync failed");
      queue.addRateLimited(key);
    } finally {
      queue.done(key);
    }
  }
}

/** One job's sync: "ok", or "requeued" when something failed or waits (retried with backoff). */
export async function sync(ctx: WatchContext, caches: WatchCaches, key: string): Promise<SyncResult> {
  const [i, ns, name] = key.split("\0") as [string, string, string];
  const kind: JobKind = ctx.kinds[Number(i)]!;
  const runs = ctx.controls[Number(i)]!;
  const raw = caches.jobs[Number(i)]!.get(name, ns);
  if (!raw) return "ok";
  const job = asKubeObject(raw);
  if (!caches.inScope(ns).inScope) return "ok";
  // Its namespace opted in since the job was cached as its stub: synced once it has been read again.
  if (isJobStub(raw)) {
    void caches.reread(ns);
    ctx.queue.addAfter(key, 1000);
    return "ok";
  }
  if (managedElsewhere(job, kind)) return "ok";
  const { finished, completionTime } = finishedAt(job, kind);
  // An operator's job has nothing on a clock here until it finishes (its pods' every change lands here).
  if (!runs && !finished) return "ok";
  const at = ctx.now();
  const capped = planJob(ctx, caches, { key, job, kind, runs }, at);
  let retry = false;
  if (runs) retry = await applyController(ctx, key, capped.controller);
  for (const d of capped.actions) ctx.deleting.set(d.uid, at.getTime());
  if (await deleteAll(ctx, capped.actions)) retry = true;
  if (finished) requeueAtTtl(ctx, key, { job, kind, completionTime }, at);
  if (retry) {
    ctx.stats.retries++;
    ctx.queue.addRateLimited(key);
    return "requeued";
  }
  ctx.queue.forget(key);
  return "ok";
}

/**
 * The job's plan: the controller's decision (a kind Quartermaster runs) and a finished job's deletes
 * (CleanPodPolicy, TTL, as a pass does them), sharing the process's deletion budget; what does not fit waits
 * for the window to turn.
 */
function planJob(
  ctx: WatchContext,
  caches: WatchCaches,
  target: { key: string; job: KubeObject; kind: JobKind; runs: boolean },
  at: Date,
): { actions: DeleteAction[]; controller: ControllerPlan[] } {
  const { job, kind } = target;
  const uid = String((job.metadata as { uid?: string }).uid);
  const own = { pods: caches.pods.byController(uid), services: caches.services.byController(uid) };
  const controller = target.runs ? [controllerPlan(ctx, { job, kind, uid, own }, at)] : [];
  const fin = planFinishedJob({ job, kind, pods: own.pods, services: own.services, now: at, policy: ctx.policy });
  for (const p of fin.problems) ctx.log.warn({ problem: p }, "watch: cannot act");
  const pending = fin.actions.filter((d) => notYetDeleted(ctx, d, at.getTime()));
  const capped = capControllerDeletes(pending, controller, ctx.budget.available(at));
  ctx.budget.take(capped.actions.length + capped.controller.reduce((n, p) => n + p.decision.deletes.length, 0), at);
  if (capped.deferred.length > 0) {
    const { namespace, name } = job.metadata as { namespace: string; name: string };
    ctx.log.info({ job: `${kind.kind} ${namespace}/${name}`, deferred: capped.deferred.length }, "watch: deletion budget spent; the rest waits");
    ctx.queue.addAfter(target.key, ctx.budget.msUntilRefill(at) + 100);
  }
  return capped;
}

/** The job controller's decision for a job of a kind Quartermaster runs. */
function controllerPlan(
  ctx: WatchContext,
  target: { job: KubeObject; kind: JobKind; uid: string; own: { pods: KubeObject[]; services: KubeObject[] } },
  at: Date,
): ControllerPlan {
  const { job, kind, uid, own } = target;
  const inFlight = ctx.expectations.observeJob(uid, own.pods, own.services, at);
  const decision = decideJob({
    job,
    kind,
    pods: own.pods,
    services: own.services,
    now: at,
    clusterDomain: ctx.policy.clusterSpec.clusterDomain,
    allowedTemplates: ctx.policy.reconciler.allowedTemplates,
    inFlight,
  });
  for (const p of decision.problems) ctx.log.warn({ problem: p }, "watch: cannot act");
  const { namespace, name, resourceVersion: rv } = job.metadata as { namespace: string; name: string; resourceVersion?: string };
  return { kind, namespace, name, uid, ...(rv ? { resourceVersion: rv } : {}), decision };
}

/** Applies the controller's plan; whether to retry (a failure, or a job changed since it was listed). */
async function applyController(ctx: WatchContext, key: string, plans: ControllerPlan[]): Promise<boolean> {
  const { cluster, expectations, now, log, policy } = ctx;
  const report = await applyJobControllers({ cluster, plans, expectations, now, log, width: 1, events: policy.reconciler.events });
  for (const a of report.applied) countWrite(ctx, a);
  const requeueAfterMs = plans[0]!.decision.requeueAfterMs;
  if (requeueAfterMs !== undefined) ctx.queue.addAfter(key, requeueAfterMs + 100);
  return report.failed.length > 0 || report.skipped.some((s) => s.why.includes("changed since it was listed"));
}

/** Sends the deletes (uid preconditions); whether any failed. */
async function deleteAll(ctx: WatchContext, actions: readonly DeleteAction[]): Promise<boolean> {
  let failed = false;
  for (const d of actions) {
    try {
      if ((await ctx.cluster.delete(d)) === "deleted") ctx.metrics?.object("delete", d.kind);
      ctx.log.info({ job: d.job, action: `delete ${d.kind}`, namespace: d.namespace, name: d.name, reason: d.reason }, "watch: delete");
    } catch (err) {
      failed = true;
      ctx.log.error({ err: errorMessage(err), action: `delete ${d.kind} ${d.namespace}/${d.name}` }, "watch: delete failed");
    }
  }
  return failed;
}

/** A finished job with a TTL is synced again just after it runs out (strictly after, as upstream). */
function requeueAtTtl(ctx: WatchContext, key: string, target: { job: KubeObject; kind: JobKind; completionTime: Date | undefined }, at: Date): void {
  const { job, kind, completionTime } = target;
  const rp = readRunPolicy(job, kind);
  if (!completionTime || "problems" in rp || rp.ttl === undefined || rp.suspended) return;
  // Only while it is ahead: once it has run out, the delete was planned now (or deferred, and queued for then).
  const ms = completionTime.getTime() + rp.ttl * 1000 - at.getTime();
  if (ms >= 0) ctx.queue.addAfter(key, ms + TTL_SLACK_MS);
}
