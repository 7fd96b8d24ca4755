/**
 * @module
 * A work queue of keys as client-go's (`k8s.io/client-go/util/workqueue`): a key is queued at most once
 * however often it is added; a key being processed that is added again is processed once more after, never
 * by two workers at once; `addAfter` delays an add; `addRateLimited` delays it exponentially per key
 * (ItemExponentialFailureRateLimiter: `base * 2^failures`, capped) until `forget`. Written by hand: the
 * npm work queues are job runners (persistence, workers of their own), not this small in-process contract.
 * Timers are passed in (tests run them by hand).
 */

/** The longest delay Node's setTimeout honours. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Milliseconds, monotonic. */
  now(): number;
}

const REAL_TIMERS: Timers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
  now: () => performance.now(),
};

export interface QueueOptions {
  /** First retry delay (client-go: 5 ms). */
  baseDelayMs?: number;
  /** Longest retry delay (client-go: 1000 s; a controller here retries within a minute). */
  maxDelayMs?: number;
  timers?: Timers;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly waiting = new Map<string, { handle: unknown; due: number }>();

  private readonly getters: Array<(key: string | undefined) => void> = [];
  private shut = false;
  private readonly base: number;
  private readonly max: number;
  private readonly timers: Timers;

  constructor(opts: QueueOptions = {}) {
    this.base = opts.baseDelayMs ?? 5;
    this.max = opts.maxDelayMs ?? 60_000;
    this.timers = opts.timers ?? REAL_TIMERS;
  }

  private now(): number {
    return this.timers.now();
  }

  get length(): number {
    return this.queue.length;
  }

  add(key: string): void {
    if (this.shut || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // re-queued by done()
    const getter = this.getters.shift();
    if (getter) {
      this.dirty.delete(key);
      this.processing.add(key);
      getter(key);
    } else this.queue.push(key);
  }

  /** Adds `key` after `ms`; a pending delay for the key is kept if it is due sooner, else replaced. */
  addAfter(key: string, ms: number): void {
    if (this.shut) return;
    if (ms <= 0) return this.add(key);
    // A timer longer than 2^31-1 ms (~24.8 days, a long TTL) fires at once in Node: wait the longest one
    // can, and let the key's sync ask again for the rest.
    ms = Math.min(ms, MAX_TIMER_MS);
    const due = this.now() + ms;
    const pending = this.waiting.get(key);
    if (pending && pending.due <= due) return;
    if (pending) this.timers.clearTimeout(pending.handle);
    const handle = this.timers.setTimeout(() => {
      this.waiting.delete(key);
      this.add(key);
    }, ms);
    this.waiting.set(key, { handle, due });
  }

  /** Adds `key` after its next backoff delay; the delay doubles with each call until `forget(key)`. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.max, this.base * 2 ** n);
    this.addAfter(key, delay);
    return delay;
  }

  /** The key succeeded: its backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to process (waits for one); undefined once shut down. Call `done(key)` after. */
  get(): Promise<string | undefined> {
    if (this.shut) return Promise.resolve(undefined);
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.getters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.add(key);
    }
  }

  /** Stops handing out keys; waiting `get()`s resolve undefined; pending delays are dropped. */
  shutDown(): void {
    this.shut = true;
    for (const w of this.waiting.values()) this.timers.clearTimeout(w.handle);
    this.waiting.clear();
    for (const g of this.getters.splice(0)) g(undefined);
  }
}
