/**
 * @module
 * The resident reconciler's Lease and full passes (`./watch.ts`): the Lease (`quartermaster-reconciler`, the one
 * `--once` passes take) renewed every fifth of `leaseSeconds`, acted on only while its last renewal is younger
 * than `leaseSeconds` by this instance's clock; on taking it, a full pass (`./pass.ts`, over the caches) and every
 * job queued; then a full pass every `resyncSeconds`, syncs waiting while it runs.
 */
import { errorMessage } from "../core/errors.js";
import type { Cluster } from "../kube/cluster.js";
import { acquireLease, type HeldLease } from "./lease.js";
import { runPass } from "./pass.js";
import type { WatchCaches } from "./watch-caches.js";
import { countWrite, DELETING_MS, keyOf, type WatchContext } from "./watch-context.js";

export const LEASE_NAME = "quartermaster-reconciler";

/** The Lease as this instance holds it, and the timers that renew it and start full passes. */
interface LeadState {
  held: HeldLease | undefined;
  renewedAt: number;
  passTimer: ReturnType<typeof setTimeout> | undefined;
  passing: boolean;
  renewing: Promise<void> | undefined;
}

export interface Leadership {
  /** Whether this instance holds the Lease and acts. */
  leading: () => boolean;
  /** Stops renewing and starting passes. */
  halt: () => void;
  /** The renewal in flight, if any. */
  renewing: () => Promise<void> | undefined;
  /** Releases the Lease if held, so a standby takes over at once. */
  release: () => Promise<void>;
}

/** Takes (or waits for) the Lease: one renewal now, then every fifth of `leaseSeconds`. */
export async function lead(ctx: WatchContext, caches: WatchCaches, passReads: Cluster, timeouts: { requestTimeoutMs?: number }): Promise<Leadership> {
  const state: LeadState = { held: undefined, renewedAt: 0, passTimer: undefined, passing: false, renewing: undefined };
  const leading = (): boolean => state.held !== undefined && ctx.now().getTime() - state.renewedAt < ctx.opts.leaseSeconds * 1000;
  const pass = (): Promise<void> => fullPass(ctx, state, leading, passReads);
  const renew = (): Promise<void> => renewLease(ctx, state, { leading, pass, caches, timeouts });
  await renew();
  const renewEvery = Math.max(1000, (ctx.opts.leaseSeconds * 1000) / 5);
  const renewTimer = setInterval(() => {
    state.renewing ??= renew().finally(() => (state.renewing = undefined));
  }, renewEvery);
  return {
    leading,
    halt() {
      clearInterval(renewTimer);
      if (state.passTimer) clearTimeout(state.passTimer);
    },
    renewing: () => state.renewing,
    async release() {
      if (state.held) await state.held.release().catch((err: unknown) => ctx.log.warn({ err: errorMessage(err) }, "watch: could not release the lease"));
      state.held = undefined;
    },
  };
}

async function renewLease(
  ctx: WatchContext,
  state: LeadState,
  on: { leading: () => boolean; pass: () => Promise<void>; caches: WatchCaches; timeouts: { requestTimeoutMs?: number } },
): Promise<void> {
  const { opts, log } = ctx;
  // Validity counts from before the call: the renewTime written is no later than this, so this instance
  // stops acting no later than a standby (reading that renewTime) may take over.
  const asked = ctx.now().getTime();
  try {
    const r = await acquireLease({
      kubeconfig: opts.kubeconfig,
      ...on.timeouts,
      namespace: opts.namespace,
      name: LEASE_NAME,
      holder: opts.holder,
      durationSeconds: opts.leaseSeconds,
      now: ctx.now,
    });
    if ("held" in r) {
      const was = on.leading();
      state.held = r.held;
      state.renewedAt = asked;
      if (!was) {
        log.info({ holder: opts.holder }, "watch: took the lease; acting");
        if (state.passTimer) clearTimeout(state.passTimer);
        void on.pass();
        on.caches.jobs.forEach((inf, i) => inf.list().forEach((o) => ctx.queue.add(keyOf(i, o.metadata?.namespace, o.metadata?.name))));
      }
    } else {
      if (state.held) log.warn({ holder: r.busy.holder }, "watch: lost the lease; standing by");
      state.held = undefined;
    }
  } catch (err) {
    log.warn({ err: errorMessage(err) }, "watch: could not renew the lease");
  }
}

/** A full pass over the caches while leading, then the next in `resyncSeconds`. One at a time. */
async function fullPass(ctx: WatchContext, state: LeadState, leading: () => boolean, passReads: Cluster): Promise<void> {
  // One pass at a time: taking the Lease again while one runs (it lapsed meanwhile) starts no second chain.
  if (ctx.stopped || !leading() || state.passing) return;
  state.passing = true;
  try {
    await ctx.lock.write(() => passOnce(ctx, passReads));
  } catch (err) {
    ctx.log.error({ err: errorMessage(err) }, "watch: full pass failed");
  } finally {
    state.passing = false;
  }
  if (!ctx.stopped) (state.passTimer = setTimeout(() => void fullPass(ctx, state, leading, passReads), ctx.opts.resyncSeconds * 1000)).unref();
}

async function passOnce(ctx: WatchContext, passReads: Cluster): Promise<void> {
  const { now, metrics } = ctx;
  ctx.stats.passes++;
  const started = performance.now();
  // A delete whose event the informer missed, of a job never synced again, is forgotten here at the latest.
  for (const [uid, sent] of ctx.deleting) if (now().getTime() - sent >= DELETING_MS) ctx.deleting.delete(uid);
  try {
    const report = await runPass({
      cluster: passReads,
      policy: ctx.policy,
      log: ctx.log,
      now,
      dryRun: false,
      namespace: ctx.opts.namespace,
      expectations: ctx.expectations,
      maxDeletions: ctx.budget.available(now()),
    });
    ctx.budget.take(report.plan.actions.length + report.plan.controller.reduce((n, p) => n + p.decision.deletes.length, 0), now());
    for (const a of report.applied) countWrite(ctx, a);
    metrics?.pass(report.failed.length > 0 ? "failed" : "ok", (performance.now() - started) / 1000);
  } catch (err) {
    metrics?.pass("error", (performance.now() - started) / 1000);
    throw err;
  }
}
