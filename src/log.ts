/**
 * @module
 * Logger construction. Loggers are passed in everywhere; nothing in `src/` logs through a global.
 */
import { destination, pino, type Logger, type LevelWithSilent } from "pino";

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

/**
 * JSON lines on stdout (or stderr), each written synchronously, as pino's own default does.
 *
 * Measured in bench/admission: an admission's log line cost ~25 µs of CPU written asynchronously
 * (sonic-boom hands every chunk to libuv's thread pool: a thread wake-up and a completion callback per
 * write, on a core the server shares with its callers) and ~3 µs written synchronously, one write(2)
 * per line: 15 % of the server's throughput. A synchronous write also loses no line when the
 * process is killed. The cost: a stdout whose reader stalls (a full pipe) stalls the server with it;
 * the container runtime reads it continuously.
 */
export function createLogger(level: LevelWithSilent = "info", fd: 1 | 2 = 1): Logger {
  return pino(
    {
      level,
      base: { app: "quartermaster" },
      timestamp: isoTimeOncePerMs(),
      formatters: { level: (label) => ({ level: label }) },
    },
    destination({ dest: fd, sync: true }),
  );
}

/** A logger that drops everything, for tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
