/**
 * @module
 * The resident reconciler (`reconcile --schedule "CRON"`): passes on a cron schedule, never two at once in
 * this process (a tick that finds a pass still running is skipped and logged), and a clean stop that
 * waits for the pass in flight. Across processes the Lease keeps passes apart.
 */
import type { Logger } from "pino";

/** The scheduling primitive (node-cron in production). */
export type Schedule = (expression: string, tick: () => void) => { stop(): void };

export interface Loop {
  /** Stops scheduling and resolves once the pass in flight, if any, has finished. */
  stop(): Promise<void>;
  /** Passes started and ticks skipped because one was still running. */
  readonly stats: { started: number; skipped: number };
}

export function startLoop(opts: { expression: string; schedule: Schedule; pass: () => Promise<void>; log: Logger }): Loop {
  let running: Promise<void> | undefined;
  const stats = { started: 0, skipped: 0 };
  const task = opts.schedule(opts.expression, () => {
    if (running) {
      stats.skipped++;
      opts.log.warn({ schedule: opts.expression }, "reconcile: previous pass still running; tick skipped");
      return;
    }
    stats.started++;
    running = opts
      .pass()
      .catch((err: unknown) => opts.log.error({ err }, "reconcile pass failed"))
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
