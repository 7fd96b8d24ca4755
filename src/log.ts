/**
 * @module
 * Logger construction. Loggers are passed in everywhere; nothing in `src/` logs through a global.
 */
import { destination, pino, type Logger, type LevelWithSilent } from "pino";

export type { Logger };

export const LOG_LEVELS: readonly LevelWithSilent[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/**
 * sonic-boom's chunk size for asynchronous writes. Each line appended while a write is in flight
 * re-measures the pending chunk (`Buffer.byteLength`), so its 16 KiB default costs ~2.5 µs per line
 * under load, half the cost of an admission's log line; 4 KiB chunks keep that small (bench/admission).
 */
const MAX_WRITE_BYTES = 4096;

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

/** JSON lines on stdout, written asynchronously off the hot path; call `flush()` before exiting. */
export function createLogger(level: LevelWithSilent = "info", fd: 1 | 2 = 1): Logger {
  return pino(
    {
      level,
      base: { app: "quartermaster" },
      timestamp: isoTimeOncePerMs(),
      formatters: { level: (label) => ({ level: label }) },
    },
    destination({ dest: fd, sync: false, maxWrite: MAX_WRITE_BYTES }),
  );
}

/** A logger that drops everything, for tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
