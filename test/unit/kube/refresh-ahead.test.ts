/**
 * Issue 51: refresh-ahead in the job reader (src/kube/jobs.ts). During a 1,000-pod launch the job's 5 s copy expired
 * mid-launch and the next wave of pods all waited on a GET to the loaded apiserver. Now a copy read past its refresh
 * point (half the TTL by default) is answered at once and re-read in the background, once for all its readers; the
 * new answer replaces it. Never past the TTL: an expired copy is not answered, a failed re-read leaves the copy to
 * its TTL, and `fresh` reads are what they were.
 *
 * Each case drives one reader (TTL 1000 ms, a fake clock) through steps against a stand-in apiserver whose GETs
 * come back only when a step answers them, so what waits and what does not is seen.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { KubeObject } from "../../../src/core/kube.js";
import { cachedJobReader, type GetObject, type JobReaderOptions } from "../../../src/kube/jobs.js";
import { kindOf } from "../../fixtures/jobs.js";

const KIND = kindOf("TFJob");
const NS = "team-a";

/** The job as three successive reads find it; `absent`: deleted (the apiserver's 404, read as undefined). */
const version = (resourceVersion: string): KubeObject => ({
  apiVersion: "kubeflow.org/v1",
  kind: "TFJob",
  metadata: { name: "mnist", namespace: NS, uid: "uid-mnist", resourceVersion },
});
const OBJECTS = { v1: version("1"), v2: version("2"), v3: version("3"), absent: undefined };
type Answer = keyof typeof OBJECTS;

type Step =
  /** The fake clock, in ms. */
  | { at: number }
  /** `readers` concurrent gets (default 1) of job `job` (default mnist): each answered at once, or still waiting (kept for `waited`), or failed. */
  | { get: Answer | "waits" | "fails"; readers?: number; job?: string }
  /** A peek: the copy, or `miss` (null: not cached, call get). */
  | { peek: Answer | "miss"; job?: string }
  | { fresh: "waits" }
  /** The reads left waiting so far all came to this. */
  | { waited: Answer | "fails" }
  /** GET number `answer` (1-based, in the order they were made) comes back. */
  | { answer: number; with: Answer | "error" }
  /** GETs made so far. */
  | { gets: number };

/** The first read, at 0: GET 1 answers v1. */
const SEED: Step[] = [{ get: "waits" }, { answer: 1, with: "v1" }, { waited: "v1" }, { gets: 1 }];

type State = { pending: true } | { value: KubeObject | undefined } | { error: unknown };
function track(p: Promise<KubeObject | undefined>): { state: State } {
  const t: { state: State } = { state: { pending: true } };
  p.then(
    (value) => (t.state = { value }),
    (error: unknown) => (t.state = { error }),
  );
  return t;
}
/** Lets every read that can settle do so (the reader's handlers, the client's load, the stand-in's GETs). */
const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

function expectState(state: State, want: Answer | "waits" | "fails", what: string): void {
  if (want === "waits") assert.ok("pending" in state, `${what}: waits, but ${JSON.stringify(state)}`);
  else if (want === "fails") assert.ok("error" in state && /apiserver down/.test(String(state.error)), `${what}: fails, but ${JSON.stringify(state)}`);
  else assert.ok("value" in state && state.value === OBJECTS[want], `${what}: ${want}, but ${JSON.stringify(state)}`);
}

async function run(steps: Step[], options: Partial<JobReaderOptions> = {}): Promise<void> {
  let t = 0;
  const gets: Array<{ resolve: (o: KubeObject | undefined) => void; reject: (e: Error) => void }> = [];
  const get: GetObject = () => new Promise((resolve, reject) => gets.push({ resolve, reject }));
  const reader = cachedJobReader(async () => get, { ttlMs: 1000, now: () => t, ...options });
  let waiting: Array<{ state: State }> = [];
  for (const [i, step] of steps.entries()) {
    const what = `step ${i} ${JSON.stringify(step)}`;
    if ("at" in step) t = step.at;
    else if ("get" in step) {
      const reads = Array.from({ length: step.readers ?? 1 }, () => track(reader.get(KIND, NS, step.job ?? "mnist")));
      await turn();
      for (const r of reads) expectState(r.state, step.get, what);
      if (step.get === "waits") waiting.push(...reads);
    } else if ("peek" in step) {
      const got = reader.peek!(KIND, NS, step.job ?? "mnist");
      assert.equal(got, step.peek === "miss" ? null : OBJECTS[step.peek], what);
    } else if ("fresh" in step) {
      const read = track(reader.fresh!(KIND, NS, "mnist"));
      await turn();
      expectState(read.state, "waits", what);
      waiting.push(read);
    } else if ("waited" in step) {
      await turn();
      for (const r of waiting) expectState(r.state, step.waited, what);
      waiting = [];
    } else if ("answer" in step) {
      await turn(); // a GET is made once the client has loaded, a turn after the read that asked for it
      const made = gets[step.answer - 1];
      assert.ok(made, `${what}: GET ${step.answer} was never made`);
      if (step.with === "error") made.reject(new Error("apiserver down"));
      else made.resolve(OBJECTS[step.with]);
      await turn();
    } else {
      await turn();
      assert.equal(gets.length, step.gets, `${what}: GETs made`);
    }
  }
}

describe("cachedJobReader: refresh-ahead (issue 51)", () => {
  // A background re-read's failure must be handled where it happens: nothing may reach the process.
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
  before(() => process.on("unhandledRejection", onUnhandled));
  after(() => process.off("unhandledRejection", onUnhandled));

  const cases: Array<{ name: string; options?: Partial<JobReaderOptions>; steps: Step[] }> = [
    {
      name: "before the refresh point (half the TTL): the copy, and no GET",
      steps: [...SEED, { at: 499 }, { get: "v1", readers: 3 }, { peek: "v1" }, { gets: 1 }],
    },
    {
      name: "past the refresh point: 10 concurrent readers and a peek get the copy without waiting, and one GET is made for them all",
      steps: [...SEED, { at: 500 }, { get: "v1", readers: 10 }, { peek: "v1" }, { get: "v1", readers: 5 }, { gets: 2 }],
    },
    {
      name: "a peek starts the re-read too (admission's hits go through it)",
      steps: [...SEED, { at: 600 }, { peek: "v1" }, { gets: 2 }],
    },
    {
      name: "once the re-read answers, the next read finds the new object, with no further GET",
      steps: [...SEED, { at: 600 }, { get: "v1" }, { answer: 2, with: "v2" }, { get: "v2" }, { peek: "v2" }, { gets: 2 }],
    },
    {
      // Had its age counted from when it answered (900), it would be no refresh point at 1100 and valid at 1600.
      name: "the new copy's age counts from when its re-read began: its refresh point and TTL come that much sooner",
      steps: [
        ...SEED,
        { at: 600 },
        { peek: "v1" },
        { at: 900 },
        { answer: 2, with: "v2" },
        { at: 1099 },
        { peek: "v2" },
        { gets: 2 },
        { at: 1100 },
        { peek: "v2" },
        { gets: 3 },
        { at: 1600 },
        { peek: "miss" },
        { answer: 3, with: "v3" },
        { peek: "v3" },
      ],
    },
    {
      name: "a failed re-read: the copy is answered until its TTL (each read past the refresh point tries again), then a read waits on a GET and gets its error",
      steps: [
        ...SEED,
        { at: 600 },
        { get: "v1" },
        { answer: 2, with: "error" },
        { at: 999 },
        { get: "v1" },
        { peek: "v1" },
        { gets: 3 },
        { answer: 3, with: "error" },
        { at: 1000 },
        { peek: "miss" },
        { get: "waits" },
        { gets: 4 },
        { answer: 4, with: "error" },
        { waited: "fails" },
        { peek: "miss" },
      ],
    },
    {
      name: "past the TTL, nothing read in between: the read waits on a GET, never answered the expired copy",
      steps: [...SEED, { at: 1000 }, { peek: "miss" }, { get: "waits" }, { gets: 2 }, { answer: 2, with: "v2" }, { waited: "v2" }],
    },
    {
      name: "past the TTL while the re-read is in flight: readers wait on that read, with no second GET",
      steps: [
        ...SEED,
        { at: 600 },
        { get: "v1" },
        { at: 1000 },
        { peek: "miss" },
        { get: "waits", readers: 3 },
        { gets: 2 },
        { answer: 2, with: "v2" },
        { waited: "v2" },
        { peek: "v2" },
      ],
    },
    {
      name: "past the TTL while the re-read is in flight, and it fails: the readers waiting on it get its error, and it is not cached",
      steps: [
        ...SEED,
        { at: 600 },
        { get: "v1" },
        { at: 1000 },
        { get: "waits" },
        { answer: 2, with: "error" },
        { waited: "fails" },
        { get: "waits" },
        { gets: 3 },
      ],
    },
    {
      name: "the job deleted: the not-found answer replaces the copy and is cached like any answer",
      steps: [
        ...SEED,
        { at: 600 },
        { get: "v1" },
        { answer: 2, with: "absent" },
        { get: "absent" },
        { peek: "absent" },
        { at: 1099 },
        { get: "absent" },
        { gets: 2 },
      ],
    },
    {
      name: "fresh before the refresh point still reads, and its answer is the cache's",
      steps: [...SEED, { at: 100 }, { fresh: "waits" }, { gets: 2 }, { answer: 2, with: "v2" }, { waited: "v2" }, { peek: "v2" }, { gets: 2 }],
    },
    {
      name: "fresh does not share a re-read in flight, and that older re-read, answering later, does not replace fresh's answer",
      steps: [
        ...SEED,
        { at: 600 },
        { get: "v1" },
        { fresh: "waits" },
        { gets: 3 },
        { answer: 3, with: "v3" },
        { waited: "v3" },
        { answer: 2, with: "v2" },
        { peek: "v3" },
        { get: "v3" },
        { gets: 3 },
      ],
    },
    {
      name: "maxEntries: a job evicted while its re-read is in flight is not brought back by it",
      options: { maxEntries: 2 },
      steps: [
        ...SEED,
        { get: "waits", job: "other" },
        { answer: 2, with: "v2" },
        { waited: "v2" },
        { at: 600 },
        { peek: "v1" }, // mnist: re-read, GET 3
        { at: 700 },
        { get: "waits", job: "third" }, // GET 4; mnist, the oldest, is evicted
        { answer: 3, with: "v3" },
        { peek: "miss" },
        { answer: 4, with: "v1" },
        { waited: "v1" },
        { gets: 4 },
      ],
    },
    {
      name: "refreshAfterMs at the TTL turns refresh-ahead off",
      options: { refreshAfterMs: 1000 },
      steps: [...SEED, { at: 999 }, { get: "v1" }, { peek: "v1" }, { gets: 1 }, { at: 1000 }, { get: "waits" }, { gets: 2 }],
    },
    {
      name: "refreshAfterMs sets the refresh point",
      options: { refreshAfterMs: 200 },
      steps: [...SEED, { at: 199 }, { get: "v1" }, { gets: 1 }, { at: 200 }, { get: "v1" }, { gets: 2 }],
    },
  ];
  for (const tc of cases)
    it(tc.name, async () => {
      unhandled.length = 0;
      await run(tc.steps, tc.options);
      await turn();
      assert.deepEqual(unhandled, []);
    });
});
