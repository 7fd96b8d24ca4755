/**
 * The parse worker runs below the event loop (src/server/parse-worker.ts, lowerThreadPriority; issue 46): large
 * bodies, the few tenants who send them, must not take the CPU from every other tenant's small review.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { silentLogger } from "../../../src/log.js";
import { createBodyParser, WORKER_NICE } from "../../../src/server/parse.js";
import { lowerThreadPriority } from "../../../src/server/parse-worker.js";

describe("lowerThreadPriority", () => {
  const cases: Array<{ name: string; nice: number; now?: number; link: string | Error; setFails?: boolean; want: number | undefined; set?: [number, number] }> =
    [
      { name: "this thread's id from /proc/thread-self", nice: 10, link: "4242/task/4250", want: 10, set: [4250, 10] },
      { name: "below a process already niced", nice: 10, now: 5, link: "4242/task/4250", want: 15, set: [4250, 15] },
      { name: "never past 19", nice: 10, now: 15, link: "4242/task/4250", want: 19, set: [4250, 19] },
      { name: "nice 0 leaves the thread alone", nice: 0, link: "4242/task/4250", want: undefined },
      { name: "no /proc (not Linux)", nice: 10, link: new Error("ENOENT"), want: undefined },
      { name: "a link that names no thread", nice: 10, link: "self", want: undefined },
      { name: "not permitted", nice: 10, link: "4242/task/4250", setFails: true, want: undefined, set: [4250, 10] },
    ];
  for (const c of cases) {
    it(c.name, () => {
      const calls: Array<[number, number]> = [];
      const got = lowerThreadPriority(
        c.nice,
        () => {
          if (c.link instanceof Error) throw c.link;
          return c.link;
        },
        {
          getPriority: () => c.now ?? 0,
          setPriority: (id, nice) => {
            calls.push([id, nice]);
            if (c.setFails) throw new Error("EACCES");
          },
        },
      );
      assert.equal(got, c.want);
      assert.deepEqual(calls, c.set ? [c.set] : []);
    });
  }
});

/** The nice values of this process's threads (Linux: field 19 of /proc/self/task/TID/stat, after the command's parentheses). */
function threadNices(): number[] {
  return readdirSync("/proc/self/task").map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("the parse worker's thread on Linux", { skip: !existsSync("/proc/thread-self") && "no /proc/thread-self here" }, () => {
  for (const c of [
    { name: `runs ${WORKER_NICE} nice steps below the process by default`, workerNice: undefined, want: 1 },
    { name: "runs as the process does with workerNice 0", workerNice: 0, want: 0 },
  ]) {
    it(c.name, async (t) => {
      // Relative to this process's own nice value (the tests may run under `nice`).
      const own = threadNices()[0]!;
      const lowered = Math.min(19, own + WORKER_NICE);
      // Under `nice -n 19` (or close to it) a lowered thread and the process's own are at the same, lowest, priority.
      if (lowered === own) return t.skip(`this process already runs at nice ${own}: a thread ${WORKER_NICE} steps below cannot be told from it`);
      const before = threadNices().filter((n) => n === lowered).length;
      const parser = createBodyParser({ log: silentLogger(), ...(c.workerNice === undefined ? {} : { workerNice: c.workerNice }) });
      try {
        // A parse is answered once the worker's script has run, its priority set first.
        const parsed = await parser.parse(Buffer.from(JSON.stringify({ kind: "AdmissionReview", items: [1, 2, 3] })));
        assert.deepEqual(parsed.value, { kind: "AdmissionReview", items: [1, 2, 3] });
        assert.equal(threadNices().filter((n) => n === lowered).length - before, c.want);
      } finally {
        await parser.close();
        await sleep(10);
      }
    });
  }
});
