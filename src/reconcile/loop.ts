/**
 * @module
 * The resident reconciler (`reconcile --schedule "CRON"`): passes on a cron schedule, never two at once in
 * this process (a tick that finds a pass still running is skipped and logged), and a clean stop that
 * waits for the pass in flight. Across processes the Lease keeps passes apart.
 */
import type { Logger } from "pino";
import type { PassActions, PassResult, ReconcilerMetrics } from "./metrics.js";

/** The scheduling primitive (node-cron in production). */
export type Schedule = (expression: string, tick: () => void) => { stop(): void };

export interface Loop {
  /** Stops scheduling and resolves once the pass in flight, if any, has finished. */
  stop(): Promise<void>;
  /** Passes started and ticks skipped because one was still running. */
  readonly stats: { started: number; skipped: number };
}

/** What a pass tells the loop (for its metrics): the actions it took, or that another instance held the Lease. */
export type PassOutcome = { actions: PassActions } | { leaseBusy: true };

/** How a pass ended, from what it resolved with: `failed` when an action failed. */
export function passResult(outcome: PassOutcome | void): PassResult {
  if (!outcome) return "ok";
  if ("leaseBusy" in outcome) return "lease_busy";
  return outcome.actions.failed.length > 0 ? "failed" : "ok";
}

export function startLoop(opts: {
  expression: string;
  schedule: Schedule;
  pass: () => Promise<PassOutcome | void>;
  log: Logger;
  /** Where passes are reported (duration, actions, last success); none: not measured. */
  metrics?: ReconcilerMetrics;
  /** Clock for pass durations (seconds, monotonic); default `performance.now() / 1000`. */
  clock?: () => number;
}): Loop {
  const clock = opts.clock ?? ((): number => performance.now() / 1000);
  let running: Promise<void> | undefined;
  const stats = { started: 0, skipped: 0 };
  const task = opts.schedule(opts.expression, () => {
    if (running) {
      stats.skipped++;
      opts.metrics?.tickSkipped();
      opts.log.warn({ schedule: opts.expression }, "reconcile: previous pass still running; tick skipped");
      return;
    }
    stats.started++;
    const start = clock();
    const seconds = (): number => Math.max(0, clock() - start);
    running = opts
      .pass()
      .then(
        (outcome) => opts.metrics?.pass(passResult(outcome), seconds(), outcome && "actions" in outcome ? outcome.actions : undefined),
        (err: unknown) => {
          opts.metrics?.pass("error", seconds());
          opts.log.error({ err }, "reconcile pass failed");
        },
      )
      .finally(() => {
        running = undefined;
      });
  });
  return {
    stats,
    async stop() {
      task.stop();
      await running;
    },
  };
}
