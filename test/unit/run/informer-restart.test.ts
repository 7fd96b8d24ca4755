/**
 * The reconciler's one restart policy for its informers (src/run/informer-restart.ts): a lasting refusal (404,
 * 403) is said once and looked at again every 30 s; any other error is said each time and retried in 2 s;
 * nothing starts once the process is stopping.
 */
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import type { KubernetesObject } from "@kubernetes/client-node";
import { pino } from "pino";
import type { TrimmedInformer } from "../../../src/kube/informer.js";
import { RESTART_AFTER_MS, restartOnError } from "../../../src/run/informer-restart.js";

const PATH = "/apis/kueue.x-k8s.io/v1beta1/workloads";
const failure = (code: number) => Object.assign(new Error(`HTTP ${code}`), { code });

interface Case {
  readonly name: string;
  readonly errors: readonly number[];
  /** The lines said, as "level message-start". */
  readonly said: readonly string[];
  /** The delay before each restart, in order. */
  readonly delays: readonly number[];
  readonly stopped?: boolean;
}

const cases: Case[] = [
  {
    name: "not served, three times: said once, looked at again every 30 s",
    errors: [404, 404, 404],
    said: ["info blocked: not served"],
    delays: [30_000, 30_000, 30_000],
  },
  { name: "refused, twice: said once at warn, every 30 s", errors: [403, 403], said: ["warn blocked: watch refused"], delays: [30_000, 30_000] },
  {
    name: "a broken watch, twice: said each time, 2 s",
    errors: [500, 500],
    said: ["warn blocked: informer stopped", "warn blocked: informer stopped"],
    delays: [2000, 2000],
  },
  {
    name: "served again then gone again: the lasting state is said again",
    errors: [404, 500, 404],
    said: ["info blocked: not served", "warn blocked: informer stopped", "info blocked: not served"],
    delays: [30_000, 2000, 30_000],
  },
  {
    name: "404 then 403: each lasting state said once",
    errors: [404, 403, 403],
    said: ["info blocked: not served", "warn blocked: watch refused"],
    delays: [30_000, 30_000, 30_000],
  },
  { name: "stopping: nothing said, nothing started", errors: [500, 404], said: [], delays: [], stopped: true },
];

function fakeInformer(): { inf: TrimmedInformer<KubernetesObject>; fail: (code: number) => void; starts: () => number } {
  let starts = 0;
  const emitter = new EventEmitter();
  const inf = Object.assign(emitter, {
    watchPath: PATH,
    start: async () => {
      starts += 1;
    },
  });
  return { inf: inf as unknown as TrimmedInformer<KubernetesObject>, fail: (code) => emitter.emit("error", failure(code)), starts: () => starts };
}

describe("restartOnError: one policy for every informer of the reconciler", () => {
  for (const c of cases) {
    it(c.name, (t) => {
      t.mock.timers.enable({ apis: ["setTimeout"] });
      const lines: { level: number; msg: string; path?: string }[] = [];
      const sink = new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
          done();
        },
      });
      const log = pino({ level: "debug" }, sink);
      const { inf, fail, starts } = fakeInformer();
      restartOnError(inf, { log, prefix: "blocked", stopped: () => c.stopped === true, meanwhile: "verdicts judge without it meanwhile" });
      const delays: number[] = [];
      for (const code of c.errors) {
        const before = starts();
        fail(code);
        if (c.stopped) continue;
        const wait = code === 403 || code === 404 ? RESTART_AFTER_MS.lasting : RESTART_AFTER_MS.passing;
        t.mock.timers.tick(wait - 1);
        assert.equal(starts(), before, `no restart before ${wait} ms`);
        t.mock.timers.tick(1);
        assert.equal(starts(), before + 1, `one restart at ${wait} ms`);
        delays.push(wait);
      }
      t.mock.timers.tick(60_000);
      assert.deepEqual(delays, c.delays);
      if (c.stopped) assert.equal(starts(), 0);
      const said = lines.filter((l) => l.level >= 30);
      const shown = said.map((l) => `${l.level >= 40 ? "warn" : "info"} ${l.msg}`);
      assert.equal(shown.length, c.said.length, shown.join("\n"));
      c.said.forEach((start, i) => assert.ok(shown[i]!.startsWith(start), `${shown[i]} starts with ${start}`));
      for (const l of said) assert.equal(l.path, PATH, "each line names the watch");
    });
  }
});
