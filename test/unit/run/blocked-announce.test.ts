/**
 * The reconciler's Events on blocked jobs when a POST fails (src/run/blocked.ts Announcements): the writer takes
 * an Event at once and posts it in the background, so a failure must undo the job's announcement, or the job stays
 * silent until the 50-minute refresh. Ticks driven through src/explain/blocked.ts planTick, as the reconciler does.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import pino from "pino";
import type { KubeObject } from "../../../src/core/kube.js";
import { planTick, type BlockedBounds, type JobTrack, type TickJob } from "../../../src/explain/blocked.js";
import type { Reason } from "../../../src/explain/types.js";
import { defaultPolicy } from "../../../src/policy/load.js";
import { Announcements } from "../../../src/run/blocked.js";

const pytorch = defaultPolicy().jobKinds.find((k) => k.kind === "PyTorchJob")!;
const B: BlockedBounds = { settleMs: 10_000, perJobMs: 60_000, perTick: 20, refreshMs: 3_000_000, maxAccrualMs: 60_000 };
const log = pino({ level: "silent" });
const T0 = 1_000_000_000;

const tickJob = (reason: Reason): TickJob => ({
  uid: "uid-llm",
  namespace: "team-a",
  name: "llm",
  kind: pytorch,
  verdict: { job: "PyTorchJob/llm", reason, summary: reason, evidence: [], next: "next", also: [] },
  gpus: new Map(),
});

/** A reconciler's ticks over one job, its Events posted (awaited, as the writer would) and refused while `failing`. */
function ticker() {
  const said = new Announcements();
  const posting = said.posting(async (_ns: string, _e: KubeObject) => {
    if (t.failing) throw new Error("the server was unable to return a response in the time allotted");
  });
  let tracks = new Map<string, JobTrack>();
  let lastMs: number | undefined;
  const sent: string[] = [];
  const t = {
    failing: false,
    sent,
    async tick(reason: Reason, at: number): Promise<void> {
      said.undoFailed(tracks);
      const plan = planTick({ previous: tracks, jobs: [tickJob(reason)], nowMs: at, lastMs, bounds: B });
      const writes: Array<Promise<unknown>> = [];
      said.announce(
        plan,
        {
          write: (e) => {
            sent.push(String(e.reason));
            writes.push(posting("team-a", e).catch(() => undefined));
            return true;
          },
          log,
        },
        new Date(at),
      );
      await Promise.all(writes);
      [tracks, lastMs] = [plan.tracks, at];
    },
  };
  return t;
}

describe("blocked: an Event whose POST failed", () => {
  it("is said again at the next tick", async () => {
    const t = ticker();
    t.failing = true;
    await t.tick("stale-node", T0);
    await t.tick("stale-node", T0 + 10_000);
    assert.deepEqual(t.sent, ["QuartermasterBlocked"], "settled: said once");
    t.failing = false;
    await t.tick("stale-node", T0 + 20_000);
    assert.deepEqual(t.sent, ["QuartermasterBlocked", "QuartermasterBlocked"], "the failed one said again");
    await t.tick("stale-node", T0 + 30_000);
    assert.equal(t.sent.length, 2, "once it went through: not again");
  });

  it("a Normal Event that failed is said again too", async () => {
    const t = ticker();
    await t.tick("stale-node", T0);
    await t.tick("stale-node", T0 + 10_000);
    t.failing = true;
    await t.tick("running", T0 + 80_000);
    t.failing = false;
    await t.tick("running", T0 + 90_000);
    await t.tick("running", T0 + 100_000);
    assert.deepEqual(t.sent, ["QuartermasterBlocked", "QuartermasterRunning", "QuartermasterRunning"]);
  });

  it("an Event that went through is not said again", async () => {
    const t = ticker();
    for (let i = 0; i < 6; i++) await t.tick("untolerated-taint", T0 + i * 10_000);
    assert.deepEqual(t.sent, ["QuartermasterBlocked"]);
  });
});
