/**
 * @module
 * Logger construction. Loggers are passed in everywhere; nothing in `src/` logs through a global.
 */
import { writeSync } from "node:fs";
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from "pino";

export type { Logger };

export const LOG_LEVELS: readonly LevelWithSilent[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/**
 * pino's ISO time, formatted once per millisecond: under load several admission lines share each one,
 * and `toISOString` is the dearest part of a line's header. The clock is read per line as before.
 */
export function isoTimeOncePerMs(now: () => number = Date.now): () => string {
  let last = Number.NaN;
  let text = "";
  return () => {
    const ms = now();
    if (ms !== last) {
      last = ms;
      text = `,"time":"${new Date(ms).toISOString()}"`;
    }
    return text;
  };
}

/** Bytes of waiting lines that are written at once rather than at the end of the batch. */
const BATCH_BYTES = 64 * 1024;

/**
 * Lines wait at most this long for their write. Under load the admission server answers one or two
 * requests per turn of the event loop, so a write per turn was a write(2) per admission (~1.4 µs of the
 * server's ~100 µs CPU per request in its profile, bench/admission); one per 20 ms carries ~160 lines at
 * 8,000 requests/s.
 */
export const FLUSH_MS = 20;

/** The default end-of-batch schedule: {@link FLUSH_MS} from the first waiting line, not keeping the process alive. */
function afterFlushDelay(write: () => void): void {
  setTimeout(write, FLUSH_MS).unref();
}

export interface BatchedDestination extends DestinationStream {
  /** Writes every waiting line now. */
  flushSync(): void;
  /** pino's `logger.flush(cb)` calls this. */
  flush(cb?: (err?: Error) => void): void;
}

export interface BatchedDestinationOptions {
  /** Runs the end-of-batch write; {@link FLUSH_MS} after the first waiting line by default. */
  schedule?: (write: () => void) => void;
  /** fs.writeSync, replaceable in tests. */
  write?: (fd: number, data: Buffer, offset: number) => number;
}

/**
 * A pino destination that writes the lines logged within {@link FLUSH_MS} together, in one synchronous
 * write(2) (an unref'd timer), or at once when {@link BATCH_BYTES} are waiting.
 *
 * Measured in bench/admission, per admission log line under load: ~25 µs of CPU written asynchronously
 * (sonic-boom's async mode hands every chunk to libuv's thread pool: a thread wake-up and a completion
 * callback per write, on the core the server shares with its callers), ~5 µs written synchronously one
 * write(2) per line (pino's default), ~1.5 µs batched per turn — 15 % of the server's throughput
 * between the first and the last; batched per 20 ms rather than per turn, the write(2) per request is gone too.
 * Written by hand because sonic-boom offers only those two modes (its `flushSync` also fsyncs every time).
 * Lines wait at most {@link FLUSH_MS}, and an `exit` handler writes them when the process ends; a SIGKILL
 * loses at most the last 20 ms of lines. The price of
 * synchronous writes: a stdout whose reader stalls (a full pipe) stalls the server with it; the
 * container runtime reads it continuously. A full non-blocking pipe (EAGAIN) is retried every 10 ms;
 * a closed one (EPIPE) ends logging, as pino does.
 */
export function batchedDestination(fd: number, opts: BatchedDestinationOptions = {}): BatchedDestination {
  const schedule = opts.schedule ?? afterFlushDelay;
  const write = opts.write ?? ((f: number, data: Buffer, offset: number) => writeSync(f, data, offset));
  let pending = "";
  let scheduled = false;
  let closed = false;
  const pause = new Int32Array(new SharedArrayBuffer(4));

  function flushSync(): void {
    scheduled = false;
    if (pending === "" || closed) return;
    const data = Buffer.from(pending, "utf8");
    pending = "";
    let offset = 0;
    while (offset < data.length) {
      try {
        offset += write(fd, data, offset);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "EAGAIN") {
          Atomics.wait(pause, 0, 0, 10);
          continue;
        }
        if (code === "EPIPE") {
          closed = true;
          return;
        }
        throw err;
      }
    }
  }

  return {
    write(line: string) {
      if (closed) return;
      pending += line;
      if (pending.length >= BATCH_BYTES) flushSync();
      else if (!scheduled) {
        scheduled = true;
        schedule(flushSync);
      }
    },
    flushSync,
    flush(cb) {
      try {
        flushSync();
      } catch (err) {
        cb?.(err as Error);
        return;
      }
      cb?.();
    },
  };
}

/** JSON lines on stdout (or stderr), written synchronously in one write per 20 ms: {@link batchedDestination}. */
export function createLogger(level: LevelWithSilent = "info", fd: 1 | 2 = 1): Logger {
  const dest = batchedDestination(fd);
  process.once("exit", () => dest.flushSync());
  return pino(
    {
      level,
      base: { app: "quartermaster" },
      timestamp: isoTimeOncePerMs(),
      formatters: { level: (label) => ({ level: label }) },
    },
    dest,
  );
}

/** A logger that drops everything, for tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

/** Resolves once everything `log` has taken is written: before a process that logged ends. */
export function flushLog(log: Logger): Promise<void> {
  return new Promise((done) => log.flush(() => done()));
}
