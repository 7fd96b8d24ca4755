/**
 * @module
 * The admission server works in turns of the event loop: in the poll phase it only reads the requests
 * that arrived; then, in one `setImmediate` after that phase, it answers all of them (parse, rules,
 * serialized answer), writes all the answers, and last does the bookkeeping (metrics, log lines).
 *
 * Why: under load the loop reads several requests per turn. Interleaving each answer's computation
 * with TLS decryption, socket reads, encryption and writes evicts the admission code and data from the
 * CPU caches between requests; grouping like work keeps it warm. Measured in bench/admission on these
 * 2-core machines: batching the writes alone gave ~30 % more requests per second (for a bare floor
 * server too), answering in a batch ~10 % more on top, and p99 went down. An idle server loses
 * nothing: a lone request is answered and written in the very turn that read it.
 *
 * Re-measured 2026-11-29 (issue 30), `npm run bench:admission -- --unbatched` (turns on and off in the
 * same run, rounds interleaved; /mutate/pods, 7.9 KB review, 16 connections, node 20.20, shared 2-core
 * VM with other work on it): turns on/off requests/s 1.52× (median of 9 rounds, range 1.11–1.84×;
 * 1494 vs 1010 req/s), p99 0.49× (27 vs 35 ms in the median rows), server CPU per request 0.63× (519 vs
 * 763 µs); a second run of 7 rounds: 1.15× (range 1.02–1.98×; 1747 vs 1259 req/s), p99 0.72×, CPU per
 * request 0.70× (404 vs 544 µs). Every round of both runs favoured the turns. They still pay: kept.
 *
 * An answer that needs I/O (a job not in the cache) finishes later and is written in a later turn.
 * A step that throws is logged and stops no other step.
 */
import type { Logger } from "pino";

export interface Turn {
  /** Runs `step` in this turn's answering stage, after the poll phase. */
  answer(step: () => void): void;
  /** Runs `write` in the writing stage (this turn's, when queued while answering), and `then` after every write. */
  write(write: () => void, then?: () => void): void;
}

type Step = () => void;

/**
 * Set to `1` in a server's environment, its turns are off: each step runs at once, where it is queued (the
 * server as it was before turns). For bench/admission's `--unbatched` comparison only.
 */
export const UNBATCHED_TURNS_ENV = "QUARTERMASTER_BENCH_UNBATCHED_TURNS";

export function createTurn(log: Logger, opts: { batched?: boolean } = {}): Turn {
  const batched = opts.batched ?? process.env[UNBATCHED_TURNS_ENV] !== "1";
  let answers: Step[] = [];
  let writes: Step[] = [];
  let thens: Step[] = [];
  let scheduled = false;

  const run = (steps: Step[], stage: string): void => {
    for (const step of steps) {
      try {
        step();
      } catch (err) {
        log.error({ err, stage }, "admission turn step failed");
      }
    }
  };
  const flush = (): void => {
    const a = answers;
    answers = [];
    run(a, "answer");
    const w = writes;
    const t = thens;
    writes = [];
    thens = [];
    run(w, "write");
    run(t, "bookkeeping");
    scheduled = false;
    if (answers.length > 0 || writes.length > 0) schedule();
  };
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };

  if (!batched) {
    return {
      answer: (step) => run([step], "answer"),
      write(write, then) {
        run([write], "write");
        if (then) run([then], "bookkeeping");
      },
    };
  }
  return {
    answer(step) {
      answers.push(step);
      schedule();
    },
    write(write, then) {
      writes.push(write);
      if (then) thens.push(then);
      schedule();
    },
  };
}
