/**
 * The reconciler's one restart policy for its informers (src/run/informer-restart.ts): a lasting refusal (404,
 * 403) is said once and looked at again every 30 s, and said again after the informer held a cache in between;
 * any other error is said each time and retried in 2 s, as is a start that fails before any request; nothing
 * starts once the process is stopping.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import type { KubernetesObject } from "@kubernetes/client-node";
import { pino } from "pino";
import type { TrimmedInformer } from "../../../src/kube/informer.js";
import { restartOnError } from "../../../src/run/informer-restart.js";

const PATH = "/apis/kueue.x-k8s.io/v1beta1/workloads";
const failure = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

/** How the restart after an error goes: still down (its LIST or watch fails again), back (synced), or the start rejects. */
type Outcome = "down" | "synced" | "rejects";

interface Case {
  readonly name: string;
  /** Each error, and how the restart after it goes. */
  readonly steps: ReadonlyArray<readonly [number, Outcome]>;
  /** The lines said, as "level message-start". */
  readonly said: readonly string[];
  /** The delays before each start, in order (a rejected start's retry included). */
  readonly delays: readonly number[];
  readonly stopped?: boolean;
}

const cases: Case[] = [
  {
    name: "not served, three times: said once, looked at again every 30 s",
    steps: [
      [404, "down"],
      [404, "down"],
      [404, "down"],
    ],
    said: ["info blocked: not served"],
    delays: [30_000, 30_000, 30_000],
  },
  {
    name: "refused, twice: said once at warn, every 30 s",
    steps: [
      [403, "down"],
      [403, "down"],
    ],
    said: ["warn blocked: watch refused"],
    delays: [30_000, 30_000],
  },
  {
    name: "a broken watch, twice: said each time, 2 s",
    steps: [
      [500, "down"],
      [500, "down"],
    ],
    said: ["warn blocked: informer stopped", "warn blocked: informer stopped"],
    delays: [2000, 2000],
  },
  {
    name: "not served, then served and synced, then gone again: said again",
    steps: [
      [404, "synced"],
      [404, "down"],
      [404, "down"],
    ],
    said: ["info blocked: not served", "info blocked: not served"],
    delays: [30_000, 30_000, 30_000],
  },
  {
    name: "a passing error between two lasting ones: the lasting state is said again",
    steps: [
      [404, "down"],
      [500, "down"],
      [404, "down"],
    ],
    said: ["info blocked: not served", "warn blocked: informer stopped", "info blocked: not served"],
    delays: [30_000, 2000, 30_000],
  },
  {
    name: "404 then 403: each lasting state said once",
    steps: [
      [404, "down"],
      [403, "down"],
      [403, "down"],
    ],
    said: ["info blocked: not served", "warn blocked: watch refused"],
    delays: [30_000, 30_000, 30_000],
  },
  {
    name: "a restart that fails before any request (unreadable credentials): said, tried again in 2 s",
    steps: [[500, "rejects"]],
    said: ["warn blocked: informer stopped", "warn blocked: informer did not start"],
    delays: [2000, 2000],
  },
  {
    name: "stopping: nothing said, nothing started",
    steps: [
      [500, "down"],
      [404, "down"],
    ],
    said: [],
    delays: [],
    stopped: true,
  },
];

/** An informer whose `start` goes as `next` says: resolves down, resolves synced, or rejects (once; then down). */
function fakeInformer() {
  const emitter = new EventEmitter();
  const state = { starts: [] as number[], synced: false, next: "down" as Outcome, now: 0 };
  const inf = Object.assign(emitter, {
    watchPath: PATH,
    synced: () => state.synced,
    start: async () => {
      state.starts.push(state.now);
      const outcome = state.next;
      state.next = "down";
      state.synced = outcome === "synced";
      if (outcome === "rejects") throw new Error("cannot read the token file");
    },
  });
  return { inf: inf as unknown as TrimmedInformer<KubernetesObject>, state, fail: (code: number) => emitter.emit("error", failure(code)) };
}

const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("restartOnError: one policy for every informer of the reconciler", () => {
  for (const c of cases) {
    it(c.name, async (t) => {
      t.mock.timers.enable({ apis: ["setTimeout"] });
      const lines: { level: number; msg: string; path?: string }[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
          done();
        },
      });
      const { inf, state, fail } = fakeInformer();
      restartOnError(inf, { log: pino({ level: "debug" }, sink), prefix: "blocked", stopped: () => c.stopped === true, meanwhile: "judged without it" });
      /** Advances the mocked clock by `ms`, letting each start's promise settle. */
      const advance = async (ms: number): Promise<void> => {
        for (let i = 0; i < ms; i += 500) {
          state.now += 500;
          t.mock.timers.tick(500);
          await settle();
        }
      };
      for (const [code, outcome] of c.steps) {
        state.synced = false;
        state.next = outcome;
        fail(code);
        await advance(40_000);
      }
      const delays = state.starts.map((at, i) => at - (i === 0 ? 0 : state.starts[i - 1]!));
      if (!c.stopped) {
        // Each error's restart counts from the error; a rejected start's retry from that start.
        const fromErrors: number[] = [];
        let k = 0;
        for (let s = 0; s < c.steps.length; s++) {
          const at = s * 40_000;
          fromErrors.push(state.starts[k]! - at);
          k++;
          if (c.steps[s]![1] === "rejects") (fromErrors.push(state.starts[k]! - state.starts[k - 1]!), k++);
        }
        assert.deepEqual(fromErrors, c.delays, `starts at ${state.starts.join(", ")} (${delays.join(", ")})`);
        assert.equal(state.starts.length, c.delays.length, "no start beyond those");
      } else assert.deepEqual(state.starts, []);
      const shown = lines.filter((l) => l.level >= 30).map((l) => `${l.level >= 40 ? "warn" : "info"} ${l.msg}`);
      assert.equal(shown.length, c.said.length, shown.join("\n"));
      c.said.forEach((start, i) => assert.ok(shown[i]!.startsWith(start), `${shown[i]} starts with ${start}`));
      for (const l of lines.filter((l) => l.level >= 30)) assert.equal(l.path, PATH, "each line names the watch");
    });
  }
});
