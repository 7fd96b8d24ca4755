/**
 * @module
 * Large request bodies are parsed off the event loop. JSON.parse of a 3 MiB review of 40,000 containers
 * holds the loop for 30–90 ms on these machines, although the cost bound (`core/cost.ts`) then
 * answers it in ~1 ms; every review behind it waits that long.
 *
 * Bodies of at least {@link OFFLOAD_BYTES} go to one worker thread, started by the first of them (its boot, ~20 ms
 * here, is paid by that body alone) and stopped after {@link WORKER_IDLE_MS} without one: a server that is sent no
 * large body (the usual case: an ordinary review is ~10 KB) does not carry the thread's ~5 MiB of RSS (bench:admission,
 * peak 119–120 → 110–115 MiB), and one that was sent a burst gives the memory back. `serve`'s `warmBodyParser` starts
 * it a second after listening instead (serve.ts WARM_BODY_PARSER_AFTER_MS).
 *
 * Sending the parsed document back whole would not help: its structured clone costs the main thread about as much as
 * parsing it (measured on a 3.1 MiB / 40k-container review: parse 34–80 ms, deserialize 80–170 ms). So the
 * worker sends the document back with every array longer than {@link STUB_ITEMS} replaced by an empty
 * stand-in of the same length, which crosses as its length and the few resource names its elements carry
 * (`core/stand-in.ts`). The cost bound prices a container list by its length before looking inside,
 * so a review that is over the bound because of a long array gets the very answer it would get in-thread;
 * so does a wide pod the guards skip (no job label: they read the list's length and resource names only).
 * Any other answer from a stand-in document is thrown away and the body parsed again on the main thread
 * (`app.ts`, counted by `quartermaster_admission_bodies_parsed_again_total`): exact, at the old price, for
 * the rare large body that is not over the bound.
 *
 * Re-measured 2026-11-29 (issue 30), `npm run bench:abuse -- --skip-before` three times ("in-thread": the
 * same server with every body parsed on the loop; "after": this; one pod of n containers posted to
 * /mutate/pods, a small /validate/pods review 20 ms later; shared 2-core VM, so single requests are noisy):
 * longest event-loop stall at 3.1 MiB (40,000 containers) 85–130 ms in-thread vs 11–27 ms here, at
 * 0.8–1.6 MiB 12–95 ms vs 9–21 ms; the small review meanwhile took 13–115 ms in-thread vs 6.6–8.3 ms
 * here at 3.1 MiB (18–83 ms vs 2.7–23 ms at 0.8–1.6 MiB). The large review itself is no faster here
 * (3.1 MiB: 110–303 ms vs 109–170 ms in-thread): the worker buys the other reviews' latency, not its own.
 * It still pays for that: kept.
 *
 * Nesting is bounded before any parse: a body whose arrays and objects nest deeper than
 * {@link MAX_NESTING} is refused (a 400) by a byte scan (`nestedDeeperThan`, `parse-worker.ts`), in the worker for a
 * large body and in-thread for a small one. Such a body is never parsed, on either thread (issue 29: a
 * 6.7 MiB body of 3.5M nested arrays, parsed again on the main thread, stalled every review ~1.35 s).
 */
import { Worker } from "node:worker_threads";
import type { Logger } from "pino";
import { STAND_IN_CLAIMS, STAND_IN_NAMES } from "../core/stand-in.js";
import { nestedDeeperThan, workerSource, type ParseReply, type WorkerParseOptions } from "./parse-worker.js";

/** Arrays and objects nested deeper than this refuse the body (Kubernetes objects nest a few dozen levels). */
export const MAX_NESTING = 1000;

export { nestedDeeperThan };

/**
 * The worker's code: parse, replace every array longer than the stub bound by a stand-in (`new Array(length)`,
 * holes only, so it crosses the thread boundary as its length, plus the resource names its elements carry:
 * see `core/stand-in.ts`), send back. Written as functions in `parse-worker.ts`, which tsc checks, and
 * run as a script of their text, so the same code runs from source (tsx) and built.
 */
export const WORKER_SOURCE = workerSource();

/** Bodies this large or larger are parsed in the worker. Ordinary reviews are ~10 KB. */
export const OFFLOAD_BYTES = 256 * 1024;

/** Arrays longer than this come back from the worker as stand-ins (length only). */
export const STUB_ITEMS = 256;

/** A worker with no body to parse for this long stops; the next large body starts another. */
export const WORKER_IDLE_MS = 60_000;

/**
 * The parse worker's nice value: below the event loop (CFS gives a nice-10 thread about a tenth of a nice-0 thread's
 * share when both are runnable), so large bodies never take the CPU from small reviews (`lowerThreadPriority`).
 */
export const WORKER_NICE = 10;

export interface ParsedBody {
  value: unknown;
  /** True when some long array is a stand-in (holes with the original length; `core/stand-in.ts`). */
  stubbed: boolean;
}

/** Thrown for a body that is not JSON (`message` is JSON.parse's). */
export class BodySyntaxError extends Error {}

/** Thrown for a body nested deeper than {@link MAX_NESTING} (never parsed). */
export class BodyTooDeepError extends Error {
  constructor() {
    super(`request body is nested deeper than ${MAX_NESTING} levels of arrays and objects`);
  }
}

/** Thrown when the worker died with the body in hand. */
export class ParserCrashError extends Error {}

export interface BodyParser {
  parse(body: Buffer): Promise<ParsedBody>;
  /**
   * Starts the worker now if there is none, so that the first large body does not wait for a thread to
   * boot (~20 ms on these machines, more under load). The worker stays parked (unref'd) until a body comes.
   */
  warm(): void;
  /** True while a worker thread exists. */
  running(): boolean;
  /** Stops the worker, if any; pending parses fail. */
  close(): Promise<void>;
}

export interface BodyParserOptions {
  log: Logger;
  /** The worker's code (tests swap it); default {@link WORKER_SOURCE}. */
  workerSource?: string;
  stubItems?: number;
  /** The worker thread's nice value (tests); {@link WORKER_NICE} by default, 0 to leave it as the process's. */
  workerNice?: number;
  /** Stop the worker after this long without a body; {@link WORKER_IDLE_MS} by default, Infinity (or past 2^31 − 1) to keep it. */
  idleMs?: number;
}

/** The longest delay `setTimeout` keeps (a longer one fires after 1 ms, with a warning). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `stop` once `ms` have passed since the last `park()` (never past {@link MAX_TIMER_MS}); `cancel` forgets the time. */
function idleTimer(ms: number, stop: () => void): { park(): void; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  return {
    park() {
      if (!(ms <= MAX_TIMER_MS)) return;
      if (timer) timer.refresh();
      else
        timer = setTimeout(() => {
          timer = undefined;
          stop();
        }, ms).unref();
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

export function createBodyParser(opts: BodyParserOptions): BodyParser {
  let worker: Worker | undefined;
  let nextId = 0;
  /** After `close`, `warm` starts nothing (a parse still would, as before). */
  let closed = false;
  const pending = new Map<number, { resolve(p: ParsedBody): void; reject(e: Error): void }>();
  const idle = idleTimer(opts.idleMs ?? WORKER_IDLE_MS, () => {
    const w = worker;
    if (!w || pending.size > 0) return;
    // Cleared first, so its exit is not taken for a crash (`gone`).
    worker = undefined;
    opts.log.debug("body parser worker stopped after its idle time");
    void w.terminate();
  });

  const failAll = (err: Error): void => {
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  };

  const start = (): Worker => {
    const parse: WorkerParseOptions = {
      maxItems: opts.stubItems ?? STUB_ITEMS,
      maxDepth: MAX_NESTING,
      namesKey: STAND_IN_NAMES,
      claimsKey: STAND_IN_CLAIMS,
      nice: opts.workerNice ?? WORKER_NICE,
    };
    const w = new Worker(opts.workerSource ?? WORKER_SOURCE, { eval: true, workerData: { parse } });
    // A parked worker must not keep the process alive.
    w.unref();
    w.on("message", (m: ParseReply) => {
      const p = pending.get(m.id);
      if (!p) return;
      pending.delete(m.id);
      // Too deep: refused, never parsed here.
      if ("deep" in m) p.reject(new BodyTooDeepError());
      else if (m.ok) p.resolve({ value: m.value, stubbed: m.stubbed });
      else p.reject(new BodySyntaxError(m.message));
      if (pending.size === 0) {
        w.unref();
        idle.park();
      }
    });
    const gone = (why: string): void => {
      if (worker !== w) return;
      worker = undefined;
      opts.log.error({ why }, "body parser worker stopped; the next large body starts a new one");
      failAll(new ParserCrashError(`body parser worker stopped: ${why}`));
    };
    w.on("error", (err) => gone(err.message));
    // A reply that cannot be deserialized here names no request: fail them all rather than leave one waiting.
    w.on("messageerror", (err) => {
      opts.log.error({ err: err.message }, "body parser worker sent a reply that cannot be read");
      failAll(new ParserCrashError(`body parser reply unreadable: ${err.message}`));
    });
    w.on("exit", (code) => gone(`exit code ${code}`));
    idle.park();
    return w;
  };

  return {
    parse(body) {
      worker ??= start();
      const w = worker;
      const id = nextId++;
      // A copy is transferred (~1 ms for 3 MiB): the caller keeps the body to parse again if need be.
      const bytes = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer;
      return new Promise<ParsedBody>((resolve, reject) => {
        pending.set(id, { resolve, reject });
        w.ref();
        w.postMessage({ id, body: bytes }, [bytes]);
      });
    },
    warm() {
      if (!closed) worker ??= start();
    },
    running: () => worker !== undefined,
    async close() {
      closed = true;
      idle.cancel();
      const w = worker;
      worker = undefined;
      failAll(new ParserCrashError("body parser closed"));
      if (w) await w.terminate();
    },
  };
}
