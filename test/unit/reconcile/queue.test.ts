/**
 * The work queue (`src/reconcile/queue.ts`) against client-go's workqueue contract: dedupe, one worker per key,
 * re-queue of a key added while processed, delayed adds, exponential per-key backoff, shutdown.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_TIMER_MS, WorkQueue, type Timers } from "../../../src/reconcile/queue.js";

/** Timers run by hand: `advance(ms)` fires what is due, in order. */
function manualTimers(): Timers & { advance(ms: number): void; pending(): number[] } {
  let now = 0;
  let id = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  return {
    setTimeout(fn, ms) {
      timers.set(++id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(h) {
      timers.delete(h as number);
    },
    advance(ms) {
      now += ms;
      for (const [k, t] of [...timers].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at > now) continue;
        timers.delete(k);
        t.fn();
      }
    },
    pending: () => [...timers.values()].map((t) => t.at - now).sort((a, b) => a - b),
    now: () => now,
  };
}

describe("work queue", () => {
  it("a key added many times is queued once", async () => {
    const q = new WorkQueue({ timers: manualTimers() });
    for (const k of ["a", "b", "a", "a", "b"]) q.add(k);
    assert.equal(q.length, 2);
    assert.equal(await q.get(), "a");
    assert.equal(await q.get(), "b");
  });

  it("a key added while processed is not handed to a second worker, and is processed again after done", async () => {
    const q = new WorkQueue({ timers: manualTimers() });
    q.add("a");
    const k = await q.get();
    q.add("a");
    assert.equal(q.length, 0, "not queued while processing");
    let second: string | undefined;
    const waiting = q.get().then((x) => (second = x));
    await Promise.resolve();
    assert.equal(second, undefined, "the other worker waits");
    q.done(k!);
    await waiting;
    assert.equal(second, "a");
  });

  it("a waiting worker gets a key as soon as it is added", async () => {
    const q = new WorkQueue({ timers: manualTimers() });
    const got = q.get();
    q.add("x");
    assert.equal(await got, "x");
  });

  it("addAfter delays; a pending delay for the key is not stacked, the sooner one wins", async () => {
    const t = manualTimers();
    const q = new WorkQueue({ timers: t });
    q.addAfter("a", 100);
    q.addAfter("a", 200);
    assert.deepEqual(t.pending(), [100]);
    q.addAfter("a", 50);
    assert.deepEqual(t.pending(), [50], "a deadline sooner than a pending retry replaces it");
    t.advance(49);
    assert.equal(q.length, 0);
    t.advance(1);
    assert.equal(q.length, 1);
  });

  it("a delay longer than a Node timer can wait (a 30-day TTL) waits the longest one can, never fires at once", () => {
    const t = manualTimers();
    const q = new WorkQueue({ timers: t });
    q.addAfter("ttl", 30 * 86_400_000);
    assert.deepEqual(t.pending(), [MAX_TIMER_MS]);
    t.advance(86_400_000);
    assert.equal(q.length, 0, "not due after a day");
    t.advance(MAX_TIMER_MS);
    assert.equal(q.length, 1);
  });

  it("addRateLimited backs off exponentially per key, capped, until forget", () => {
    const t = manualTimers();
    const q = new WorkQueue({ baseDelayMs: 5, maxDelayMs: 1000, timers: t });
    const delays: number[] = [];
    for (let i = 0; i < 10; i++) {
      delays.push(q.addRateLimited("a"));
      t.advance(2000);
    }
    assert.deepEqual(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
    assert.equal(q.addRateLimited("b"), 5, "per key");
    q.forget("a");
    assert.equal(q.retries("a"), 0);
    assert.equal(q.addRateLimited("a"), 5);
  });

  it("shutDown releases waiting workers and drops pending delays", async () => {
    const t = manualTimers();
    const q = new WorkQueue({ timers: t });
    q.addAfter("a", 10);
    const got = q.get();
    q.shutDown();
    assert.equal(await got, undefined);
    assert.deepEqual(t.pending(), []);
    q.add("b");
    assert.equal(await q.get(), undefined);
  });
});
