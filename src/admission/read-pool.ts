/**
 * @module
 * The reads reviews make, scheduled fairly over the webhook's one shared client (issue 46 finding 2: one review
 * naming 20,000 claims made 20,005 GETs on it over 18–21 s, and another tenant's pod lost its TF_CONFIG). Each
 * review reads through its own {@link ReviewReads}: its reads wait in its own queue, at most `perReview` of them in
 * flight; the pool runs at most `global` reads at once, taking the next from the review with one waiting that has
 * asked for the fewest (in turn among equals), so a review that asks for many reads waits for its own, and another
 * review's few go first.
 *
 * What is not read is shed, never guessed: a read still waiting when its review's time bound runs out, or asked
 * for while the review's own queue (`perReviewQueued`) or the pool's (`maxQueued`, which a review that has asked
 * for fewer than `perReview` reads may pass) is full, is rejected with
 * {@link ReadShed}. Through `readJob` (src/membership/lookup.ts) that is a failed read, which the rules count as
 * unknown, not as absent or zero (src/validate/claims.ts, gpu-unknown).
 *
 * Hand-written: p-limit and p-queue (the well-kept limiters) bound one queue; none keeps a queue per caller served
 * in turn with a per-caller bound, which is the point here. Cached answers (`peek`) do not queue, nor do the reader's
 * background re-reads of them (refresh-ahead, src/kube/jobs.ts).
 */
import type { KubeObject, ObjectKind } from "../core/kube.js";
import type { JobReader } from "../membership/types.js";

export interface ReadPoolOptions {
  /** Reads in flight at once over all reviews. */
  global?: number;
  /** Reads of one review in flight at once. */
  perReview?: number;
  /** Reads of one review waiting at once; past it, its further reads are shed. */
  perReviewQueued?: number;
  /** Reads of all reviews waiting at once; past it, further reads are shed. */
  maxQueued?: number;
}

/** The bounds used where none are given. */
export const READ_POOL_DEFAULTS: Readonly<Required<ReadPoolOptions>> = Object.freeze({
  global: 32,
  perReview: 8,
  // Above the claim names one review may make it read (MAX_CLAIM_NAMES, claims.ts) plus its runtime and queue.
  perReviewQueued: 512,
  maxQueued: 8192,
});

/** A read not made: its review's time ran out while it waited, or a queue was full. Counted as unknown, never as absent. */
export class ReadShed extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReadShed";
  }
}

/** What a review's reader passes straight to the shared one: its cached answers and their measuring (none of it queues). */
function passedThrough(reader: JobReader): Pick<JobReader, "observeLookup" | "clock" | "peek" | "refreshing"> {
  return {
    ...(reader.observeLookup ? { observeLookup: reader.observeLookup } : {}),
    ...(reader.clock ? { clock: reader.clock } : {}),
    ...(reader.peek ? { peek: reader.peek.bind(reader) } : {}),
    ...(reader.refreshing ? { refreshing: reader.refreshing.bind(reader) } : {}),
  };
}

/** A reader for one review; release it when the review has its answer (what still waits is then shed). */
export interface ReviewReads extends JobReader {
  release(): void;
}

export interface ReadPool {
  /** A reader for one review whose reads must be made within `timeoutMs` (waiting included). */
  review(timeoutMs: number): ReviewReads;
  /** Reads in flight and waiting now, and how many reviews have reads waiting (for tests and metrics). */
  load(): { active: number; queued: number; reviews: number };
}

interface Item {
  run: () => Promise<KubeObject | undefined>;
  resolve: (v: KubeObject | undefined) => void;
  reject: (e: unknown) => void;
}

interface Queue {
  items: Item[];
  active: number;
  /** Reads started so far. */
  started: number;
  closed: boolean;
  /** Whether it is in the ring (has items waiting). */
  ringed: boolean;
  timer?: NodeJS.Timeout;
}

/**
 * The review to take a read from: of those with one waiting and a free slot, the one that has asked for the fewest
 * (started and waiting), in ring order from `from` on a tie; its index, or -1. A review of a few reads goes before
 * reviews of many, however many of those came first; among reviews of many, each takes its turn.
 */
function fewestFirst(ring: readonly Queue[], from: number, perReview: number): number {
  let best = -1;
  for (let n = 0; n < ring.length; n++) {
    const i = (from + n) % ring.length;
    const q = ring[i]!;
    if (q.active >= perReview) continue;
    if (best < 0 || q.started + q.items.length < ring[best]!.started + ring[best]!.items.length) best = i;
  }
  return best;
}

/** A read, named in a shed read's message: `PyTorchJob team-a/bert`. */
const what = (kind: ObjectKind, namespace: string, name: string): string => `${kind.kind} ${namespace === "" ? "" : `${namespace}/`}${name}`;

/** A fair pool of reads over `reader` (the webhook's one cached client). */
export function readPool(reader: JobReader, options: ReadPoolOptions = {}): ReadPool {
  const o = { ...READ_POOL_DEFAULTS, ...options };
  const shared = passedThrough(reader); // once, not each review (~1.7 % of a review's CPU, bench:admission's profile)
  const ring: Queue[] = []; // reviews with reads waiting, served in turn from `cursor`
  let cursor = 0;
  let active = 0;
  let queued = 0;

  function nextReady(): Queue | undefined {
    const i = fewestFirst(ring, cursor, o.perReview);
    if (i >= 0) cursor = i + 1;
    return ring[i];
  }

  function unring(q: Queue): void {
    const i = ring.indexOf(q);
    if (i < 0) return;
    ring.splice(i, 1);
    if (i < cursor) cursor--;
    q.ringed = false;
  }

  function pump(): void {
    while (active < o.global) {
      const q = nextReady();
      if (!q) return;
      const item = q.items.shift()!;
      queued--;
      if (q.items.length === 0) unring(q);
      q.active++;
      q.started++;
      active++;
      // A reader that throws at once fails the read as one that rejects does.
      const p = new Promise<KubeObject | undefined>((resolve) => resolve(item.run()));
      p.then(item.resolve, item.reject).finally(() => {
        q.active--;
        active--;
        pump();
      });
    }
  }

  function shedAll(q: Queue, why: string): void {
    if (q.ringed) unring(q);
    queued -= q.items.length;
    for (const item of q.items.splice(0)) item.reject(new ReadShed(why));
  }

  return {
    load: () => ({ active, queued, reviews: ring.length }),
    review(timeoutMs) {
      const q: Queue = { items: [], active: 0, started: 0, closed: false, ringed: false };
      // The review's question is asked now: a fresh read begun after this answers it (`JobReader.fresh`'s `since`).
      const since = reader.began?.();
      const close = (why: string): void => {
        if (q.closed) return;
        q.closed = true;
        clearTimeout(q.timer);
        shedAll(q, why);
      };
      const enqueue = (run: Item["run"], what: string): Promise<KubeObject | undefined> => {
        if (q.closed) return Promise.reject(new ReadShed(`${what}: not read, the review's ${timeoutMs} ms for reads had passed`));
        if (q.items.length >= o.perReviewQueued)
          return Promise.reject(new ReadShed(`${what}: not read, the review already had ${q.items.length} reads waiting`));
        // A full pool sheds the reads of the reviews that asked for many, never a light review's first few (a
        // job lookup, a runtime, a claim or two): otherwise one tenant's reviews naming many claims would fill it
        // and every other review's reads would be shed, unknown. The overshoot is at most `perReview` a review.
        if (queued >= o.maxQueued && q.started + q.items.length >= o.perReview)
          return Promise.reject(new ReadShed(`${what}: not read, the webhook had ${queued} reads waiting (its own backlog)`));
        // Set on the first read: a review that reads nothing arms no timer.
        q.timer ??= setTimeout(() => close(`not read within the review's ${timeoutMs} ms: the webhook's reads were backed up`), timeoutMs);
        return new Promise((resolve, reject) => {
          q.items.push({ run, resolve, reject });
          queued++;
          if (!q.ringed) {
            q.ringed = true;
            ring.push(q);
          }
          pump();
        });
      };
      return {
        ...shared,
        get: (kind, namespace, name) => enqueue(() => reader.get(kind, namespace, name), what(kind, namespace, name)),
        fresh: (kind, namespace, name) =>
          enqueue(() => (reader.fresh ? reader.fresh(kind, namespace, name, since) : reader.get(kind, namespace, name)), what(kind, namespace, name)),
        release: () => close("not read: the review had been answered"),
      };
    },
  };
}
