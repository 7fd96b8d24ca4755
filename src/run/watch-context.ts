/**
 * @module
 * What the resident reconciler's parts share (`./watch.ts` builds it; `./watch-caches.ts`, `./watch-sync.ts`
 * and `./watch-lead.ts` read it): its options, queue, expectations, deletion budget, pass lock, counters, the
 * deletes in flight, and whether it is stopping. One object per `startWatch`, passed explicitly.
 */
import type { BlockedSettings } from "./blocked.js";
import type { Logger } from "pino";
import type { JobKind, Policy } from "../policy/types.js";
import type { DeletionBudget } from "../reconcile/budget.js";
import type { Expectations } from "../reconcile/expectations.js";
import type { DeleteAction } from "../reconcile/finished.js";
import { objectWrite, type WatchMetrics } from "../reconcile/metrics.js";
import type { WorkQueue } from "../reconcile/queue.js";
import type { Cluster } from "../kube/cluster.js";

export interface WatchOptions {
  kubeconfig?: string;
  /** The deadline of each request (a LIST page, a Lease write) in ms; default ../kube/client.ts RESIDENT_REQUEST_TIMEOUT_MS. */
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
  /** The verdicts on jobs (./blocked.ts): how often, and the bounds on their Events; defaults there. */
  blocked?: BlockedSettings;
}

/** Syncs share it; a full pass takes it alone (so the two never decide on the same job at once). */
export class PassLock {
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

export interface WatchContext {
  readonly opts: WatchOptions;
  readonly policy: Policy;
  readonly log: Logger;
  readonly metrics: WatchMetrics | undefined;
  readonly now: () => Date;
  /** Every kind: the ones Quartermaster runs get the whole job controller, the operators' kinds their finished-job hygiene. */
  readonly kinds: readonly JobKind[];
  /** Per kind (same index): whether Quartermaster runs it. */
  readonly controls: readonly boolean[];
  readonly cluster: Cluster;
  readonly queue: WorkQueue;
  readonly expectations: Expectations;
  readonly budget: DeletionBudget;
  readonly lock: PassLock;
  readonly stats: { syncs: number; retries: number; passes: number };
  /**
   * Deletes sent whose object the caches still hold, by uid: a sync before the informer sees the deletion (its
   * pods' and the garbage collector's events queue the job at once) must not send, and count, them again.
   */
  readonly deleting: Map<string, number>;
  stopped: boolean;
}

/** How long a delete sent counts as in flight when the informer never says the object went. */
export const DELETING_MS = 30_000;

// An object without a namespace or name (never from the apiserver) keys as "undefined", as it always has.
export const keyOf = (kindIndex: number, namespace: string | undefined, name: string | undefined): string => `${kindIndex}\0${namespace}\0${name}`;

/** Whether a delete is still to send: not sent within DELETING_MS (an older one is forgotten: look again). */
export function notYetDeleted(ctx: WatchContext, d: DeleteAction, atMs: number): boolean {
  const sent = ctx.deleting.get(d.uid);
  if (sent === undefined) return true;
  if (atMs - sent < DELETING_MS) return false;
  ctx.deleting.delete(d.uid); // the informer never said: look again
  return true;
}

/** Counts an applied action (`verb Kind namespace/name`) in the objects-written metric. */
export function countWrite(ctx: WatchContext, action: string): void {
  const w = objectWrite(action);
  if (w) ctx.metrics?.object(w.verb, w.kind);
}
